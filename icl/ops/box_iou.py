"""Pairwise intersection over union of axis-aligned boxes (xyxy, continuous coordinates)."""

from __future__ import annotations

from typing import Optional, overload

import torch

from icl.ops._boxes import check_boxes, iou_matrix
from icl.ops._dispatch import native, op
from icl.ops._tensor import ArrayLike, NDArray, as_tensor, call_op, custom_op, restore_one

_OP = op("box_iou", gpu_module="icl.ops._gpu.box_iou")


@_OP.register("reference")
def _reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return iou_matrix(a, b)


@_OP.register("cpu")
def _cpu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _C = native()
    return torch.from_numpy(_C.box_iou(a.contiguous().numpy(), b.contiguous().numpy()))


# float32 coordinates above this may overflow the float32 area (2^61 squared < 2^128): the
# op then computes in float64 and rounds once (IoU itself always lies in [0, 1]).
_FLOAT32_SAFE = 2.0**60


@custom_op("box_iou")
def _box_iou_op(a: torch.Tensor, b: torch.Tensor, backend: Optional[str]) -> torch.Tensor:
    check_boxes(a, "a")
    check_boxes(b, "b")
    big = a.dtype == torch.float32 and any(t.numel() and float(t.abs().max()) > _FLOAT32_SAFE for t in (a, b))
    if big:
        wide: torch.Tensor = _OP(a.device.type, a.double(), b.double(), backend=backend)
        return wide.float()
    out: torch.Tensor = _OP(a.device.type, a, b, backend=backend)
    return out


@_box_iou_op.register_fake
def _box_iou_fake(a: torch.Tensor, b: torch.Tensor, backend: Optional[str]) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[0]))


@overload
def box_iou(a: NDArray, b: ArrayLike, *, backend: Optional[str] = None) -> NDArray: ...
@overload
def box_iou(a: torch.Tensor, b: ArrayLike, *, backend: Optional[str] = None) -> torch.Tensor: ...
def box_iou(a: ArrayLike, b: ArrayLike, *, backend: Optional[str] = None) -> ArrayLike:
    """The torch front end of ``icl.ops.box_iou`` (documented there): tensors, and the numpy
    calls ``icl.ops._host`` hands over."""
    ta, np_a = as_tensor(a, "a")
    tb, _ = as_tensor(b, "b")
    for name, t in (("a", ta), ("b", tb)):
        if t.dtype == torch.bool or t.is_complex():
            raise TypeError(f"{name}: expected a real numeric dtype, got {t.dtype}")
        if t.ndim != 2 or t.shape[1] != 4:
            raise ValueError(f"{name}: expected boxes of shape [N, 4] (x0, y0, x1, y1), got {tuple(t.shape)}")
    dtype = torch.float64 if torch.float64 in (ta.dtype, tb.dtype) else torch.float32
    ta, tb = ta.detach().to(dtype), tb.detach().to(dtype)
    if ta.device != tb.device:
        raise ValueError(f"a and b must be on the same device, got {ta.device} and {tb.device}")
    return restore_one(call_op("box_iou", ta, tb, backend), np_a)
