"""Helpers shared by the box and point kernels (validation, pure-torch IoU)."""

from __future__ import annotations

import numpy as np
import torch


def host_numpy(t: torch.Tensor) -> np.ndarray:
    """A host numpy view (or copy) of ``t``; bfloat16, which numpy lacks, becomes float32."""
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def check_boxes(t: torch.Tensor, name: str) -> None:
    """Validate ``[N, 4]`` xyxy boxes of a real dtype.

    Raises ``TypeError`` for a non-numeric dtype and ``ValueError`` for a wrong shape,
    NaN/infinite coordinates or an inverted box (``x1 < x0`` or ``y1 < y0``).
    """
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name}: expected a real numeric dtype, got {t.dtype}")
    if t.ndim != 2 or t.shape[1] != 4:
        raise ValueError(f"{name}: expected boxes of shape [N, 4] (x0, y0, x1, y1), got {tuple(t.shape)}")
    # numpy on the host: torch's reductions cost far more at these sizes on a busy CPU.
    h = host_numpy(t)
    if h.dtype.kind == "f" and not np.isfinite(h).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    bad = (h[:, 2] < h[:, 0]) | (h[:, 3] < h[:, 1])
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}: box {i} is inverted (x1 < x0 or y1 < y0): {h[i].tolist()}")


def iou_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU ``[N, M]`` of xyxy boxes in their (common floating) dtype, in pure torch."""
    # Same operation order as pycocotools' bbIou: union = area_a + area_b - inter.
    w = (torch.minimum(a[:, None, 2], b[None, :, 2]) - torch.maximum(a[:, None, 0], b[None, :, 0])).clamp_min(0)
    h = (torch.minimum(a[:, None, 3], b[None, :, 3]) - torch.maximum(a[:, None, 1], b[None, :, 1])).clamp_min(0)
    inter = w * h
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    # inter > 0 implies union > 0; where inter is 0 (disjoint or zero-area) the result is 0 / 1.
    return inter / torch.where(inter > 0, union, 1.0)
