"""Average precision of scored box detections over many images (PROTOCOL §1.3).

The matching and ranking follow pycocotools' ``COCOeval`` (single category, no crowd or
ignored GT, area range "all", whose only effect there is to ignore boxes of area > 1e10)
to the bit, so that ``interpolation="coco101"`` equals its AP:

* Within an image, predictions are taken by descending score, ties in input order (numpy's
  stable mergesort); with ``max_detections`` only the first ``max_detections`` of each image
  are kept (COCO's ``maxDets``), the others are neither TP nor FP.
* Each prediction is matched to the not yet matched GT of its image with the highest IoU,
  provided IoU >= ``iou_threshold``; among equal IoUs the GT given later wins (pycocotools
  replaces its best candidate on ``>=``). A threshold of 1 is taken as ``1 - 1e-10``, as
  pycocotools does, so that boxes equal up to rounding still match.
* The kept predictions are ranked by descending score; ties go to the lower image id, then
  to the lower input index (COCO concatenates images in id order, then sorts stably).
* Precision at rank k is ``TP_k / k``, recall ``TP_k / num_gt`` where ``num_gt`` counts every GT
  box of every image (images without predictions included); precision is made
  non-increasing from the right. ``"all"``: the area under that curve summed over recall
  steps (PASCAL VOC 2010+ all-point AP). ``"coco101"``: the mean over the 101 recall
  thresholds 0, 0.01, ..., 1 of the precision at the first rank whose recall reaches the
  threshold (0 when none does).
* No GT box at all: AP is undefined and returned as NaN (pycocotools reports -1).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np
import torch

from icl.ops._boxes import check_boxes, host_numpy, iou_matrix
from icl.ops._dispatch import native, op
from icl.ops._numpy_core import COCO_RECALL_THRESHOLDS, INTERPOLATIONS  # pycocotools' recThrs
from icl.ops._tensor import ArrayLike, NDArray, as_tensor, call_op, custom_op, restore_one

_OP = op("average_precision", gpu_module="icl.ops._gpu.average_precision")
_MATCH_OP = op("detection_matches", gpu_module="icl.ops._gpu.average_precision")


class DetectionMatches(NamedTuple):
    """Per-prediction matching: ``gt_index`` int64 ``[P]`` is the matched GT (index into the GT
    arrays) or -1; ``order`` int64 ``[K]`` lists the kept predictions by rank (descending score);
    ``num_gt`` is the number of GT boxes."""

    gt_index: Any
    order: Any
    num_gt: int


@_MATCH_OP.register("reference")
def _reference_matches(pb: np.ndarray, ps: np.ndarray, pi: np.ndarray, gb: np.ndarray, gi: np.ndarray,
                       threshold: float, max_det: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(ps)
    matched = np.full(n, -1, dtype=np.int64)
    # Grouped order: image, then descending score, then input index.
    grouped = np.lexsort((np.arange(n), -ps, pi))
    starts = np.searchsorted(pi[grouped], pi[grouped], side="left")
    rank_in_image = np.arange(n) - starts
    keep = grouped[rank_in_image < max_det] if max_det > 0 else grouped
    gt_order = np.argsort(gi, kind="stable")
    gt_images = gi[gt_order]
    thr = min(threshold, 1.0 - 1e-10)
    kept_images = pi[keep]
    bounds = np.flatnonzero(np.diff(kept_images)) + 1
    for group in np.split(keep, bounds) if n else []:
        image = pi[group[0]]
        gts = gt_order[np.searchsorted(gt_images, image, "left"):np.searchsorted(gt_images, image, "right")]
        if len(gts) == 0:
            continue
        iou = iou_matrix(torch.from_numpy(pb[group]), torch.from_numpy(gb[gts])).numpy()
        used = np.zeros(len(gts), dtype=bool)
        for row, p in zip(iou, group):
            cand = np.where(used, -1.0, row)
            best = cand.max()
            if best >= thr:
                m = len(cand) - 1 - int(np.argmax(cand[::-1]))  # the last of equal maxima
                used[m] = True
                matched[p] = gts[m]
    # Stable by descending score on the grouped order: ties by image id, then index.
    order = keep[np.argsort(-ps[keep], kind="stable")]
    return matched, order


def _ap_from_ranked(tp: np.ndarray, num_gt: int, interpolation: str) -> float:
    if num_gt == 0:
        return float("nan")
    ntp = np.cumsum(tp, dtype=np.int64)
    prec = ntp / np.arange(1, len(tp) + 1, dtype=np.float64)
    prec = np.maximum.accumulate(prec[::-1])[::-1]
    if interpolation == "all":
        return float(prec[tp].sum() / num_gt)
    rec = ntp / float(num_gt)
    idx = np.searchsorted(rec, COCO_RECALL_THRESHOLDS, side="left")
    return float(prec[idx[idx < len(tp)]].sum() / len(COCO_RECALL_THRESHOLDS))


@_MATCH_OP.register("cpu")
def _matches_cpu(pb: np.ndarray, ps: np.ndarray, pi: np.ndarray, gb: np.ndarray, gi: np.ndarray,
                 threshold: float, max_det: int) -> tuple[np.ndarray, np.ndarray]:
    _C = native()
    matched, order = _C.detection_matches(pb, ps, pi, gb, gi, threshold, max_det)
    return np.asarray(matched), np.asarray(order)


@_OP.register("reference")
def _reference(pb: np.ndarray, ps: np.ndarray, pi: np.ndarray, gb: np.ndarray, gi: np.ndarray,
               threshold: float, max_det: int, interpolation: str) -> float:
    matched, order = _reference_matches(pb, ps, pi, gb, gi, threshold, max_det)
    return _ap_from_ranked(matched[order] >= 0, len(gi), interpolation)


@_OP.register("cpu")
def _cpu(pb: np.ndarray, ps: np.ndarray, pi: np.ndarray, gb: np.ndarray, gi: np.ndarray,
         threshold: float, max_det: int, interpolation: str) -> float:
    _C = native()
    mode = INTERPOLATIONS.index(interpolation)
    return float(_C.average_precision(pb, ps, pi, gb, gi, threshold, max_det, mode, COCO_RECALL_THRESHOLDS))


_Args = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _prepare(pred_boxes: Any, pred_scores: Any, pred_image: Any, gt_boxes: Any, gt_image: Any,
             iou_threshold: float, max_detections: Optional[int]) -> tuple[_Args, float, int, bool]:
    """The checks that need no data (shapes, dtypes, arguments); returns the five tensors,
    the threshold, the detection cap (0: none) and whether the caller passed numpy."""
    pb, was_numpy = as_tensor(pred_boxes, "pred_boxes")
    gb, _ = as_tensor(gt_boxes, "gt_boxes")
    for name, t in (("pred_boxes", pb), ("gt_boxes", gb)):
        if t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"{name}: expected a real numeric dtype, got {t.dtype}")
        if t.ndim != 2 or t.shape[1] != 4:
            raise ValueError(f"{name}: expected boxes of shape [N, 4] (x0, y0, x1, y1), got {tuple(t.shape)}")
    ps, _ = as_tensor(pred_scores, "pred_scores")
    if ps.dtype == torch.bool or ps.is_complex():
        raise TypeError(f"pred_scores: expected a real numeric dtype, got {ps.dtype}")
    if ps.shape != (pb.shape[0],):
        raise ValueError(f"pred_scores: expected shape [{pb.shape[0]}] (one per box), got {tuple(ps.shape)}")
    images = []
    for x, name, n in ((pred_image, "pred_image", pb.shape[0]), (gt_image, "gt_image", gb.shape[0])):
        t, _ = as_tensor(x, name)
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{name}: expected an integer dtype (image ids), got {t.dtype}")
        if t.shape != (n,):
            raise ValueError(f"{name}: expected shape [{n}] (one image id per box), got {tuple(t.shape)}")
        images.append(t.detach())
    thr = float(iou_threshold)
    if not 0.0 <= thr <= 1.0:
        raise ValueError(f"iou_threshold: expected a value in [0, 1], got {iou_threshold}")
    if max_detections is None:
        max_det = 0
    elif isinstance(max_detections, (bool, float)) or int(max_detections) < 1:
        raise ValueError(f"max_detections: expected None or a positive integer, got {max_detections!r}")
    else:
        max_det = int(max_detections)
    return (pb.detach(), ps.detach(), images[0], gb.detach(), images[1]), thr, max_det, was_numpy


def _host(pb: torch.Tensor, ps: torch.Tensor, pi: torch.Tensor, gb: torch.Tensor,
          gi: torch.Tensor) -> tuple[NDArray, NDArray, NDArray, NDArray, NDArray]:
    """Host arrays (float64 boxes and scores, int64 ids) after the data checks (run in the op).
    The matching is sequential: every backend runs it on host arrays (CUDA inputs are copied)."""
    check_boxes(pb, "pred_boxes")
    check_boxes(gb, "gt_boxes")
    scores = np.ascontiguousarray(host_numpy(ps), dtype=np.float64)
    if np.isnan(scores).any():
        raise ValueError("pred_scores: contains NaN")
    boxes = [np.ascontiguousarray(host_numpy(t), dtype=np.float64) for t in (pb, gb)]
    ids = [np.ascontiguousarray(host_numpy(t), dtype=np.int64) for t in (pi, gi)]
    return boxes[0], scores, ids[0], boxes[1], ids[1]


@custom_op("average_precision")
def _ap_op(pb: torch.Tensor, ps: torch.Tensor, pi: torch.Tensor, gb: torch.Tensor, gi: torch.Tensor,
           threshold: float, max_det: int, interpolation: str, backend: Optional[str]) -> torch.Tensor:
    ap = _OP("cpu", *_host(pb, ps, pi, gb, gi), threshold, max_det, interpolation, backend=backend)
    return torch.tensor(float(ap), dtype=torch.float64)


@_ap_op.register_fake
def _ap_fake(pb: torch.Tensor, ps: torch.Tensor, pi: torch.Tensor, gb: torch.Tensor, gi: torch.Tensor,
             threshold: float, max_det: int, interpolation: str, backend: Optional[str]) -> torch.Tensor:
    return torch.empty((), dtype=torch.float64)


@custom_op("detection_matches")
def _matches_op(pb: torch.Tensor, ps: torch.Tensor, pi: torch.Tensor, gb: torch.Tensor, gi: torch.Tensor,
                threshold: float, max_det: int, backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    matched, order = _MATCH_OP("cpu", *_host(pb, ps, pi, gb, gi), threshold, max_det, backend=backend)
    return torch.from_numpy(np.asarray(matched)), torch.from_numpy(np.asarray(order))


@_matches_op.register_fake
def _matches_fake(pb: torch.Tensor, ps: torch.Tensor, pi: torch.Tensor, gb: torch.Tensor, gi: torch.Tensor,
                  threshold: float, max_det: int, backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    kept = torch.library.get_ctx().new_dynamic_size()
    return torch.empty((pb.shape[0],), dtype=torch.int64), torch.empty((kept,), dtype=torch.int64)


def average_precision(pred_boxes: ArrayLike, pred_scores: ArrayLike, pred_image: ArrayLike, gt_boxes: ArrayLike,
                      gt_image: ArrayLike, iou_threshold: float = 0.5, interpolation: str = "all", *,
                      max_detections: Optional[int] = None, backend: Optional[str] = None) -> float:
    """AP of scored detections against GT boxes, pooled over images (see the module docstring).

    ``pred_boxes`` ``[P, 4]`` and ``gt_boxes`` ``[G, 4]`` are xyxy boxes (continuous, no ``+1``;
    IoU in float64 as :func:`icl.ops.box_iou`); ``pred_scores`` ``[P]`` real (NaN raises; ties
    as described); ``pred_image`` ``[P]`` and ``gt_image`` ``[G]`` integer image ids (any values).
    ``interpolation`` is ``"all"`` (all-point, VOC 2010+) or ``"coco101"`` (COCO's 101 recall
    points). Returns a Python float in [0, 1], NaN when there is no GT box. Not
    differentiable; a ``torch.library`` op (``torch.ops.icl.average_precision``, a 0-d float64
    tensor: the Python float is taken from it, so ``torch.compile`` breaks the graph here).
    """
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation: expected one of {INTERPOLATIONS}, got {interpolation!r}")
    args, thr, max_det, _ = _prepare(pred_boxes, pred_scores, pred_image, gt_boxes, gt_image, iou_threshold,
                                     max_detections)
    return float(call_op("average_precision", *args, thr, max_det, interpolation, backend))


def detection_matches(pred_boxes: ArrayLike, pred_scores: ArrayLike, pred_image: ArrayLike, gt_boxes: ArrayLike,
                      gt_image: ArrayLike, iou_threshold: float = 0.5, *, max_detections: Optional[int] = None,
                      backend: Optional[str] = None) -> DetectionMatches:
    """The matching behind :func:`average_precision`, same arguments and rules.

    ``gt_index[p] >= 0`` marks prediction ``p`` as a true positive. Predictions not in ``order``
    (beyond ``max_detections`` in their image) are neither TP nor FP. Tensors in, CPU tensors
    out; numpy in, numpy out. Not differentiable; a ``torch.library`` op.
    """
    args, thr, max_det, was_numpy = _prepare(pred_boxes, pred_scores, pred_image, gt_boxes, gt_image,
                                             iou_threshold, max_detections)
    matched, order = call_op("detection_matches", *args, thr, max_det, backend)
    return DetectionMatches(restore_one(matched, was_numpy), restore_one(order, was_numpy), int(args[3].shape[0]))
