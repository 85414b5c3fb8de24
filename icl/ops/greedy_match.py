"""Score-free greedy one-to-one matching of boxes (PROTOCOL §2, cross-image detection).

All prediction/ground-truth pairs are visited by descending IoU (ties: lower prediction index,
then lower ground-truth index); a pair is accepted when neither box is used yet. At threshold
``t`` the accepted pairs with IoU >= t are the true positives. Because the visit order is by
descending IoU, the matching at ``t`` is the prefix of the full greedy sequence down to ``t``:
one sort per sample serves every threshold.

IoU of xyxy boxes, in float64: ``iw = min(ax1, bx1) - max(ax0, bx0)`` (``ih`` alike),
``inter = iw * ih`` when both are > 0 else 0, ``union = (area_a + area_b) - inter``,
``iou = inter / union`` when ``union > 0`` else 0. Both backends evaluate exactly these
operations in this order, so exact ties are decided identically.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
import torch

from icl.ops._dispatch import native, op
from icl.ops._tensor import FLOAT_DTYPES, ArrayLike, NDArray, as_tensor, call_op, custom_op, restore_one

_MATCH = op("greedy_match", gpu_module="icl.ops._gpu.greedy_match")
_COUNTS = op("greedy_match_counts", gpu_module="icl.ops._gpu.greedy_match")

_INT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def pairwise_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU of xyxy float64 boxes ``a [N, 4]`` and ``b [M, 4]`` -> float64 ``[N, M]`` (module rule)."""
    iw = torch.minimum(a[:, None, 2], b[None, :, 2]) - torch.maximum(a[:, None, 0], b[None, :, 0])
    ih = torch.minimum(a[:, None, 3], b[None, :, 3]) - torch.maximum(a[:, None, 1], b[None, :, 1])
    inter = torch.where((iw > 0) & (ih > 0), iw * ih, torch.zeros((), dtype=torch.float64))
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = (area_a[:, None] + area_b[None, :]) - inter
    safe = torch.where(union > 0, union, torch.ones((), dtype=torch.float64))
    return torch.where(union > 0, inter / safe, torch.zeros((), dtype=torch.float64))


def _greedy_order(iou: torch.Tensor, threshold: float) -> tuple[list[int], list[int]]:
    """Reference greedy on a float64 ``[N, M]`` matrix: accepted (pred, gt) in selection order."""
    n, m = iou.shape
    flat = iou.reshape(-1)
    # A stable ascending sort of -iou keeps row-major (pred, gt) order among equal IoUs.
    order = torch.argsort(-flat, stable=True).tolist()
    values = flat.tolist()
    pred_used, gt_used = [False] * n, [False] * m
    preds: list[int] = []
    gts: list[int] = []
    for idx in order:
        if values[idx] < threshold or len(preds) == min(n, m):
            break
        p, g = divmod(idx, m)
        if pred_used[p] or gt_used[g]:
            continue
        pred_used[p] = gt_used[g] = True
        preds.append(p)
        gts.append(g)
    return preds, gts


@_MATCH.register("reference")
def _match_reference(iou: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    preds, gts = _greedy_order(iou.double(), threshold)
    return torch.tensor(preds, dtype=torch.int64), torch.tensor(gts, dtype=torch.int64)


@_MATCH.register("cpu")
def _match_cpu(iou: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    _C = native()
    p, g = _C.greedy_match(iou.double().contiguous().numpy(), float(threshold))
    return torch.from_numpy(p), torch.from_numpy(g)


@_COUNTS.register("reference")
def _counts_reference(pred: torch.Tensor, pred_off: torch.Tensor, gt: torch.Tensor, gt_off: torch.Tensor,
                      thresholds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t_list = thresholds.tolist()
    t_min = min(t_list)
    po, go = pred_off.tolist(), gt_off.tolist()
    tp: list[list[int]] = []
    tp_sum: list[list[float]] = []
    best: list[float] = []
    for s in range(len(po) - 1):
        iou = pairwise_iou(pred[po[s]:po[s + 1]], gt[go[s]:go[s + 1]])
        rows = iou.tolist()
        # per-column max in Python: torch's reduction is slow on many tiny tensors
        if rows:
            best.extend(max(col) for col in zip(*rows))
        else:
            best.extend([0.0] * (go[s + 1] - go[s]))
        counts, sums = [0] * len(t_list), [0.0] * len(t_list)
        for p, g in zip(*_greedy_order(iou, t_min)):
            v = rows[p][g]
            for t, thr in enumerate(t_list):
                if v >= thr:
                    counts[t] += 1
                    sums[t] += v
        tp.append(counts)
        tp_sum.append(sums)
    shape = (len(po) - 1, len(t_list))
    return (torch.tensor(tp, dtype=torch.int64).reshape(shape), torch.tensor(tp_sum, dtype=torch.float64).reshape(shape),
            torch.tensor(best, dtype=torch.float64))


@_COUNTS.register("cpu")
def _counts_cpu(pred: torch.Tensor, pred_off: torch.Tensor, gt: torch.Tensor, gt_off: torch.Tensor,
                thresholds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _C = native()
    tp, tp_sum, best = _C.greedy_match_counts(pred.numpy(), pred_off.numpy(), gt.numpy(), gt_off.numpy(),
                                              thresholds.numpy())
    return torch.from_numpy(tp), torch.from_numpy(tp_sum), torch.from_numpy(best)


def _threshold(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number in [0, 1], got {type(value).__name__}")
    number = float(value)
    if not 0.0 <= number <= 1.0:  # also rejects NaN
        raise ValueError(f"{name}: expected a number in [0, 1], got {number}")
    return number


def _boxes(x: Any, name: str) -> tuple[torch.Tensor, bool]:
    t, was_numpy = as_tensor(x, name)
    if t.ndim != 2 or t.shape[1] != 4:
        raise ValueError(f"{name}: expected shape [N, 4] (x0, y0, x1, y1), got {tuple(t.shape)}")
    if t.dtype not in FLOAT_DTYPES + _INT_DTYPES:
        raise TypeError(f"{name}: expected a float or integer dtype, got {t.dtype}")
    return t.detach(), was_numpy


def _host_boxes(t: torch.Tensor, name: str) -> torch.Tensor:
    """float64 host copy; NaN/infinite or inverted boxes raise (data checks, run in the op)."""
    t = t.cpu().to(torch.float64).contiguous()
    a = t.numpy()  # checks in numpy: torch's threaded reductions are slow on many small inputs
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    bad = (a[:, 2] < a[:, 0]) | (a[:, 3] < a[:, 1])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}: box {i} {a[i].tolist()} has x1 < x0 or y1 < y0")
    return t


def _offsets(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    t, _ = as_tensor(x, name)
    if t.ndim != 1 or t.numel() < 1:
        raise ValueError(f"{name}: expected shape [S + 1] with S >= 0, got {tuple(t.shape)}")
    if t.dtype not in _INT_DTYPES:
        raise TypeError(f"{name}: expected an integer dtype, got {t.dtype}")
    return t.detach()


def _host_offsets(t: torch.Tensor, name: str, rows: int) -> torch.Tensor:
    """int64 host copy, non-decreasing from 0 to ``rows`` (a data check, run in the op)."""
    t = t.cpu().to(torch.int64).contiguous()
    a = t.numpy()
    if a[0] != 0 or a[-1] != rows or (a[1:] < a[:-1]).any():
        shown = a.tolist() if a.size <= 8 else f"[{a[0]}, ..., {a[-1]}]"
        raise ValueError(f"{name}: expected non-decreasing offsets from 0 to {rows} (the number of boxes), got {shown}")
    return t


@custom_op("greedy_match")
def _greedy_match_op(iou: torch.Tensor, threshold: float, backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    t64 = iou.to(torch.float64).cpu().contiguous()
    a = t64.numpy()
    if not np.isfinite(a).all():
        raise ValueError("iou: contains NaN or infinite values")
    if a.size and (a.min() < 0.0 or a.max() > 1.0):
        raise ValueError(f"iou: expected values in [0, 1], got [{a.min()}, {a.max()}]")
    pred_idx, gt_idx = _MATCH("cpu", t64, threshold, backend=backend)  # on the CPU for any input device
    return pred_idx.to(iou.device), gt_idx.to(iou.device)


@_greedy_match_op.register_fake
def _greedy_match_fake(iou: torch.Tensor, threshold: float,
                       backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    n = torch.library.get_ctx().new_dynamic_size()
    return iou.new_empty((n,), dtype=torch.int64), iou.new_empty((n,), dtype=torch.int64)


def greedy_match(iou: Union[torch.Tensor, NDArray], threshold: float = 0.5, *,
                 backend: Optional[str] = None) -> tuple[ArrayLike, ArrayLike, ArrayLike]:
    """The torch front end of ``icl.ops.greedy_match`` (documented there): tensors, and the numpy calls
    ``icl.ops._host`` hands over."""
    t, was_numpy = as_tensor(iou, "iou")
    if t.ndim != 2:
        raise ValueError(f"iou: expected shape [N, M], got {tuple(t.shape)}")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"iou: expected a float dtype, got {t.dtype}")
    thr = _threshold(threshold, "threshold")
    t = t.detach()
    pred_idx, gt_idx = call_op("greedy_match", t, thr, backend)
    return (restore_one(pred_idx, was_numpy), restore_one(gt_idx, was_numpy),
            restore_one(t[pred_idx, gt_idx], was_numpy))


_Counts = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@custom_op("greedy_match_counts")
def _counts_op(pred: torch.Tensor, pred_offsets: torch.Tensor, gt: torch.Tensor, gt_offsets: torch.Tensor,
               thresholds: torch.Tensor, backend: Optional[str]) -> _Counts:
    pred64, gt64 = _host_boxes(pred, "pred_boxes"), _host_boxes(gt, "gt_boxes")
    p_off = _host_offsets(pred_offsets, "pred_offsets", pred64.shape[0])
    g_off = _host_offsets(gt_offsets, "gt_offsets", gt64.shape[0])
    out: _Counts = _COUNTS("cpu", pred64, p_off, gt64, g_off, thresholds, backend=backend)
    return out


@_counts_op.register_fake
def _counts_fake(pred: torch.Tensor, pred_offsets: torch.Tensor, gt: torch.Tensor, gt_offsets: torch.Tensor,
                 thresholds: torch.Tensor, backend: Optional[str]) -> _Counts:
    shape = (pred_offsets.shape[0] - 1, thresholds.shape[0])
    return (torch.empty(shape, dtype=torch.int64), torch.empty(shape, dtype=torch.float64),
            torch.empty((gt.shape[0],), dtype=torch.float64))


def greedy_match_counts(pred_boxes: ArrayLike, pred_offsets: Any, gt_boxes: ArrayLike, gt_offsets: Any,
                        thresholds: Union[Sequence[float], torch.Tensor, NDArray], *,
                        backend: Optional[str] = None) -> tuple[ArrayLike, ArrayLike, ArrayLike]:
    """The torch front end of ``icl.ops.greedy_match_counts`` (documented there): tensors, and the numpy
    calls ``icl.ops._host`` hands over."""
    pred, was_numpy = _boxes(pred_boxes, "pred_boxes")
    gt, _ = _boxes(gt_boxes, "gt_boxes")
    p_off = _offsets(pred_offsets, "pred_offsets")
    g_off = _offsets(gt_offsets, "gt_offsets")
    if p_off.numel() != g_off.numel():
        raise ValueError(f"pred_offsets and gt_offsets: expected the same length S + 1, "
                         f"got {p_off.numel()} and {g_off.numel()}")
    if isinstance(thresholds, (torch.Tensor, np.ndarray)):
        if thresholds.ndim != 1:
            raise ValueError(f"thresholds: expected shape [T], got {tuple(thresholds.shape)}")
        values = thresholds.tolist()
    else:
        values = list(thresholds)
    if not values:
        raise ValueError("thresholds: expected at least one threshold")
    thr = torch.tensor([_threshold(v, f"thresholds[{i}]") for i, v in enumerate(values)], dtype=torch.float64)
    tp, tp_sum, best = call_op("greedy_match_counts", pred, p_off, gt, g_off, thr, backend)
    return restore_one(tp, was_numpy), restore_one(tp_sum, was_numpy), restore_one(best, was_numpy)
