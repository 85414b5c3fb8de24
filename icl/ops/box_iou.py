"""Pairwise intersection over union of axis-aligned boxes (xyxy, continuous coordinates)."""

from __future__ import annotations

from typing import Any, Optional

import torch

from icl.ops._boxes import check_boxes, iou_matrix
from icl.ops._dispatch import op
from icl.ops._tensor import as_tensor, restore

_OP = op("box_iou", gpu_module="icl.ops._gpu.box_iou")


@_OP.register("reference")
def _reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return iou_matrix(a, b)


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
    check_boxes(ta, "a")
    check_boxes(tb, "b")
    dtype = torch.float64 if torch.float64 in (ta.dtype, tb.dtype) else torch.float32
    ta, tb = ta.to(dtype), tb.to(dtype)
    if ta.device != tb.device:
        raise ValueError(f"a and b must be on the same device, got {ta.device} and {tb.device}")
    out = _OP(ta.device.type, ta, tb, backend=backend)
    return restore(out, np_a)
