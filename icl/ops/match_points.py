"""One-to-one greedy matching of predicted to GT points by increasing distance (PROTOCOL §1.3)."""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional, overload

import numpy as np
import torch

from icl.ops._boxes import host_numpy
from icl.ops._dispatch import native, op
from icl.ops._tensor import ArrayLike, NDArray, as_tensor, call_op, custom_op, restore_one

_OP = op("match_points", gpu_module="icl.ops._gpu.match_points")


@_OP.register("reference")
def _reference(pred: torch.Tensor, gt: torch.Tensor, radius: float) -> tuple[torch.Tensor, torch.Tensor]:
    # Explicit differences (not torch.cdist, whose matmul form rounds differently).
    d2 = (pred[:, None, 0] - gt[None, :, 0]) ** 2 + (pred[:, None, 1] - gt[None, :, 1]) ** 2
    pi, gi = torch.nonzero(d2 <= radius * radius, as_tuple=True)  # row-major: (pred, gt) ascending
    order = torch.sort(d2[pi, gi], stable=True).indices
    pused: set[int] = set()
    gused: set[int] = set()
    keep = []
    for k in order.tolist():
        p, g = int(pi[k]), int(gi[k])
        if p in pused or g in gused:
            continue
        pused.add(p)
        gused.add(g)
        keep.append(k)
    idx = torch.tensor(keep, dtype=torch.int64)
    return pi[idx].to(torch.int64), gi[idx].to(torch.int64)


@_OP.register("cpu")
def _cpu(pred: torch.Tensor, gt: torch.Tensor, radius: float) -> tuple[torch.Tensor, torch.Tensor]:
    _C = native()
    p, g = _C.match_points(pred.numpy(), gt.numpy(), radius)
    return torch.from_numpy(p), torch.from_numpy(g)


def _points(x: Any, name: str) -> tuple[torch.Tensor, bool]:
    t, was_numpy = as_tensor(x, name)
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name}: expected a real numeric dtype, got {t.dtype}")
    if t.ndim != 2 or t.shape[1] != 2:
        raise ValueError(f"{name}: expected points of shape [N, 2] (x, y), got {tuple(t.shape)}")
    return t.detach(), was_numpy


def _host_points(t: torch.Tensor, name: str) -> torch.Tensor:
    """float64 host copy; NaN/infinite coordinates raise (a data check, run inside the op)."""
    h = np.ascontiguousarray(host_numpy(t), dtype=np.float64)
    if not np.isfinite(h).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    return torch.from_numpy(h)


@custom_op("match_points")
def _match_points_op(pred: torch.Tensor, gt: torch.Tensor, radius: float,
                     backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    out: tuple[torch.Tensor, torch.Tensor] = _OP("cpu", _host_points(pred, "pred"), _host_points(gt, "gt"), radius,
                                                 backend=backend)
    return out


@_match_points_op.register_fake
def _match_points_fake(pred: torch.Tensor, gt: torch.Tensor, radius: float,
                       backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    n = torch.library.get_ctx().new_dynamic_size()
    return torch.empty((n,), dtype=torch.int64), torch.empty((n,), dtype=torch.int64)


@overload
def match_points(pred: NDArray, gt: ArrayLike, radius: float, *,
                 backend: Optional[str] = None) -> tuple[NDArray, NDArray]: ...
@overload
def match_points(pred: torch.Tensor, gt: ArrayLike, radius: float, *,
                 backend: Optional[str] = None) -> tuple[torch.Tensor, torch.Tensor]: ...
def match_points(pred: ArrayLike, gt: ArrayLike, radius: float, *,
                 backend: Optional[str] = None) -> tuple[ArrayLike, ArrayLike]:
    """The torch front end of ``icl.ops.match_points`` (documented there): tensors, and the numpy calls
    ``icl.ops._host`` hands over."""
    p, was_numpy = _points(pred, "pred")
    g, _ = _points(gt, "gt")
    if isinstance(radius, bool) or not isinstance(radius, numbers.Real):
        raise TypeError(f"radius: expected a real number, got {type(radius).__name__}")
    r = float(radius)
    if not math.isfinite(r) or r < 0:
        raise ValueError(f"radius: expected a finite value >= 0, got {radius}")
    pred_idx, gt_idx = call_op("match_points", p, g, r, backend)
    return restore_one(pred_idx, was_numpy), restore_one(gt_idx, was_numpy)
