"""Triton backend of ``box_iou`` (kernel in ``icl.kernels.box_iou``)."""

from __future__ import annotations

import torch

from icl.ops._gpu import float32_only, kernels_module
from icl.ops.box_iou import _OP


@_OP.register("triton", supports=float32_only)
def _triton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = kernels_module("box_iou").box_iou_triton(a, b)
    return out
