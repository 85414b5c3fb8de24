"""Pairwise intersection over union of axis-aligned boxes (xyxy, continuous coordinates)."""

from __future__ import annotations

from typing import Any, Optional

import torch

from icl.ops._dispatch import op
from icl.ops._tensor import as_tensor, check_finite, restore

_OP = op("box_iou", gpu_module="icl.ops._gpu.box_iou")


def boxes_tensor(x: Any, name: str, dtype: Optional[torch.dtype] = None) -> tuple[torch.Tensor, bool]:
    """Validate ``[N, 4]`` xyxy boxes; return ``(boxes, was_numpy)``.

    Raises ``TypeError`` for a non-numeric dtype and ``ValueError`` for a wrong shape,
    NaN/infinite coordinates or an inverted box (``x1 < x0`` or ``y1 < y0``). Integer and
    half-precision boxes become float32 unless ``dtype`` is given.
    """
    t, was_numpy = as_tensor(x, name)
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name}: expected a real numeric dtype, got {t.dtype}")
    if t.ndim != 2 or t.shape[1] != 4:
        raise ValueError(f"{name}: expected boxes of shape [N, 4] (x0, y0, x1, y1), got {tuple(t.shape)}")
    if dtype is None:
        dtype = torch.float64 if t.dtype == torch.float64 else torch.float32
    t = t.to(dtype)
    check_finite(t, name)
    bad = (t[:, 2] < t[:, 0]) | (t[:, 3] < t[:, 1])
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"{name}: box {i} is inverted (x1 < x0 or y1 < y0): {t[i].tolist()}")
    return t, was_numpy


@_OP.register("reference")
def _reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Same operation order as pycocotools' bbIou: union = area_a + area_b - inter.
    w = (torch.minimum(a[:, None, 2], b[None, :, 2]) - torch.maximum(a[:, None, 0], b[None, :, 0])).clamp_min(0)
    h = (torch.minimum(a[:, None, 3], b[None, :, 3]) - torch.maximum(a[:, None, 1], b[None, :, 1])).clamp_min(0)
    inter = w * h
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    # inter > 0 implies union > 0; where inter is 0 (disjoint or zero-area) the result is 0 / 1.
    return inter / torch.where(inter > 0, union, 1.0)


@_OP.register("cpu")
def _cpu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    from icl import _C

    return torch.from_numpy(_C.box_iou(a.contiguous().numpy(), b.contiguous().numpy()))


def box_iou(a: Any, b: Any, *, backend: Optional[str] = None) -> Any:
    """IoU of every box of ``a`` with every box of ``b``.

    ``a`` ``[N, 4]`` and ``b`` ``[M, 4]`` are ``x0, y0, x1, y1`` boxes in continuous coordinates
    (area ``(x1 - x0) * (y1 - y0)``, no ``+1``). Returns ``[N, M]``: float64 when either input is
    float64, else float32 (integer and half inputs are converted to float32); computed in the
    output dtype as ``inter / (area_a + area_b - inter)``, pycocotools' order. Boxes that do
    not overlap, and zero-area boxes (with anything, themselves included), have IoU exactly 0.
    Inverted boxes, NaN or infinite coordinates raise ``ValueError``.
    """
    ta, np_a = as_tensor(a, "a")
    tb, _ = as_tensor(b, "b")
    dtype = torch.float64 if torch.float64 in (ta.dtype, tb.dtype) else torch.float32
    ta, _ = boxes_tensor(ta, "a", dtype)
    tb, _ = boxes_tensor(tb, "b", dtype)
    if ta.device != tb.device:
        raise ValueError(f"a and b must be on the same device, got {ta.device} and {tb.device}")
    out = _OP(ta.device.type, ta, tb, backend=backend)
    return restore(out, np_a)
