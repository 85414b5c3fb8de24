"""Triton backend of ``box_iou`` (kernel in ``icl.kernels.box_iou``)."""

from __future__ import annotations

from typing import Optional

import torch

from icl.ops._gpu import kernels_module
from icl.ops.box_iou import _OP


def _supports(a: torch.Tensor, b: torch.Tensor) -> Optional[str]:
    if a.dtype == torch.float64:
        return "the triton kernel computes in float32; float64 boxes keep float64 on cpu/reference"
    return None


@_OP.register("triton", supports=_supports)
def _triton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return kernels_module("box_iou").box_iou_triton(a, b)
