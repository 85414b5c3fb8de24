"""Object detection: boxes <-> filled rectangles packed into R, G, B; AP at IoU 0.5."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from icl.data.dataset import DatasetMeta, Sample
from icl.data.geometry import pack_channels as pack_channels, pixel_rects as pixel_rects
from icl.benchmarks.vibe.tasks.base import BoxesTarget, EncodingError, Task, scale_boxes

if TYPE_CHECKING:
    import torch

IOU_THRESHOLD = 0.5
MIN_LOSSLESS_SIDE = 3  # px: PROTOCOL §1.4's lossless boxes


def decode_boxes(pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes float64 [N, 4] (pixel extent, exclusive ends) and confidences float64 [N] of a uint8
    prediction: per channel value >= 128, 8-connected components, confidence = mean channel
    value in [0, 1] over the component; channels R, G, B pooled in that order."""
    chans = np.ascontiguousarray(np.moveaxis(pred, 2, 0))
    mask = chans >= 128
    if not mask.any():
        return np.zeros((0, 4), np.float64), np.zeros(0, np.float64)
    from icl.ops import connected_components  # numpy in: the native kernel without torch

    comps = connected_components(mask, connectivity=8, values=(chans / 255.0).astype(np.float32))
    boxes = np.asarray(comps.box, np.float64).reshape(-1, 4)
    return boxes, np.asarray(comps.value_mean, np.float64).reshape(-1)


def decode_boxes_device(images: torch.Tensor) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`decode_boxes` of every image of a uint8 ``[B, H, W, 3]`` batch, on its device: the
    3B channel masks are labelled in one connected-components call."""
    import torch

    from icl.ops.components import connected_components

    b, h, w, _ = images.shape
    chans = images.permute(0, 3, 1, 2).reshape(3 * b, h, w)
    # float32 level / 255 equals numpy's float64 division rounded to float32 for all 256 levels
    comps = connected_components(chans >= 128, connectivity=8, values=chans.float() / 255.0)
    found = torch.cat([comps.image.view(-1, 1).double(), comps.box.double(), comps.value_mean.view(-1, 1).double()],
                      1).cpu().numpy()
    image = found[:, 0].astype(np.int64) // 3
    return [(found[image == j, 1:5].copy(), found[image == j, 5].copy()) for j in range(b)]


class Detection(Task):
    name = "detection"
    metrics = ("ap50",)
    rank_metrics = ("ap50",)
    semantic = True
    paper_task = "object detection"

    def check_sample(self, sample: Sample, meta: DatasetMeta) -> str | None:
        packed = pack_channels(pixel_rects(sample.annotations["boxes"], sample.image.shape[:2]))
        return packed if isinstance(packed, str) else None

    def oracle_ceiling(self, target: BoxesTarget, context_targets, meta) -> str | None:
        rects = pixel_rects(target.boxes, target.size)
        small = np.minimum(rects[:, 2] - rects[:, 0], rects[:, 3] - rects[:, 1]) < MIN_LOSSLESS_SIDE
        if small.any():
            return f"box {int(np.flatnonzero(small)[0])} is under {MIN_LOSSLESS_SIDE} px on a side"
        return None

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        ann = sample.annotations
        target = BoxesTarget(ann["boxes"].astype(np.float64), ann["box_classes"].astype(np.int64), tuple(sample.image.shape[:2]))
        return sample.image, target

    def encode(self, target: BoxesTarget, meta: DatasetMeta) -> np.ndarray:
        rects = pixel_rects(target.boxes, target.size)
        packed = pack_channels(rects)
        if isinstance(packed, str):
            raise EncodingError(f"detection target cannot be encoded: {packed}")
        img = np.zeros((*target.size, 3), np.uint8)
        for (x0, y0, x1, y1), c in zip(rects, packed):
            img[y0:y1, x0:x1, c] = 255
        return img

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, float]]:
        out = []
        for pred, target in zip(preds, targets):
            boxes, scores = decode_boxes(pred)
            out.append({"ap50": _ap50(boxes, scores, pred.shape[:2], target)})
        return out

    def _score_device(self, batch, targets, context_targets, meta) -> list[dict[str, float]]:
        sizes = batch.shapes()
        out: list[dict[str, float]] = [{} for _ in targets]
        for idx, x in batch.groups:
            for i, (boxes, scores) in zip(idx, decode_boxes_device(x)):
                out[i] = {"ap50": _ap50(boxes, scores, sizes[i], targets[i])}
        return out


def _ap50(boxes: np.ndarray, scores: np.ndarray, size: tuple[int, int], target: BoxesTarget) -> float:
    """AP at IoU 0.5 of decoded boxes (at prediction ``size``) against the target's boxes."""
    from icl.ops import average_precision  # numpy in: the native kernel without torch

    boxes = scale_boxes(boxes, size, target.size)
    gt = np.asarray(target.boxes, np.float64).reshape(-1, 4)
    if len(gt) == 0 or len(boxes) == 0:
        return 1.0 if len(gt) == len(boxes) else 0.0
    return float(
        average_precision(
            boxes, scores, np.zeros(len(boxes), np.int64), gt, np.zeros(len(gt), np.int64),
            iou_threshold=IOU_THRESHOLD, interpolation="all",
        )
    )
