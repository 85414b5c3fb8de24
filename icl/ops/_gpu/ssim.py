"""Triton backend of ``ssim`` (kernel in ``icl.kernels.ssim``)."""

from __future__ import annotations

import torch

from icl.ops._gpu import float32_only, kernels_module
from icl.ops.ssim import _OP


@_OP.register("triton", supports=float32_only)
def _triton(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    out: torch.Tensor = kernels_module("ssim").ssim_triton(x, y, data_range)
    return out
