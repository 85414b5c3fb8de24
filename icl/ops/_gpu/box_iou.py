"""Triton backend of ``box_iou`` (kernel in ``icl.kernels.box_iou``)."""

from __future__ import annotations

import torch

from icl.ops._gpu import float32_only, kernels_module
from icl.ops._dispatch import op

_OP = op('box_iou')  # created by icl.ops.box_iou, which imports this module on first dispatch


@_OP.register("triton", supports=float32_only)
def _triton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = kernels_module("box_iou").box_iou_triton(a, b)
    return out
