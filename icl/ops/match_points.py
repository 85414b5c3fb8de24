"""One-to-one greedy matching of predicted to GT points by increasing distance (PROTOCOL §1.3)."""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional

import numpy as np
import torch

from icl.ops._boxes import host_numpy
from icl.ops._dispatch import native, op
from icl.ops._tensor import as_tensor, restore_one

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
    h = np.ascontiguousarray(host_numpy(t), dtype=np.float64)
    if not np.isfinite(h).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    return torch.from_numpy(h), was_numpy


def match_points(pred: Any, gt: Any, radius: float, *,
                 backend: Optional[str] = None) -> tuple[Any, Any]:
    """Greedy one-to-one matching of ``pred`` ``[N, 2]`` to ``gt`` ``[M, 2]`` points.

    All pairs with distance <= ``radius`` are taken by increasing distance, ties to the lower
    pred index, then the lower gt index, each point used at most once. Distances are compared
    as squared distances ``dx*dx + dy*dy`` in float64 against ``radius * radius`` (so integer
    coordinates tie exactly). Returns ``(pred_idx, gt_idx)``, int64 ``[T]``, in matching order
    (increasing distance); numpy in, numpy out. Coordinates of any real dtype (converted to
    float64; CUDA inputs are matched on the host). NaN/infinite coordinates and a negative or
    non-finite radius raise ``ValueError``.
    """
    p, was_numpy = _points(pred, "pred")
    g, _ = _points(gt, "gt")
    if isinstance(radius, bool) or not isinstance(radius, numbers.Real):
        raise TypeError(f"radius: expected a real number, got {type(radius).__name__}")
    r = float(radius)
    if not math.isfinite(r) or r < 0:
        raise ValueError(f"radius: expected a finite value >= 0, got {radius}")
    out = _OP("cpu", p, g, r, backend=backend)
    pred_idx, gt_idx = out
    return restore_one(pred_idx, was_numpy), restore_one(gt_idx, was_numpy)
