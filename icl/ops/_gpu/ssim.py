"""Triton backend of ``ssim`` (kernel in ``icl.kernels.ssim``)."""

from __future__ import annotations

from typing import Optional

import torch

from icl.ops._gpu import kernels_module
from icl.ops.ssim import _OP


def _supports(x: torch.Tensor, y: torch.Tensor, data_range: float) -> Optional[str]:
    if x.dtype == torch.float64:
        return "the triton kernel accumulates in float32; float64 input keeps its float64 contract on cpu/reference"
    return None


@_OP.register("triton", supports=_supports)
def _triton(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    return kernels_module("ssim").ssim_triton(x, y, data_range).to(torch.float64)
