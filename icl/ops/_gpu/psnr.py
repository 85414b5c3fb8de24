"""Triton backend of ``psnr`` (kernel in ``icl.kernels.ssim``)."""

from __future__ import annotations

import torch

from icl.ops._gpu import float32_only, kernels_module
from icl.ops._dispatch import op

_OP = op('psnr')  # created by icl.ops.psnr, which imports this module on first dispatch


@_OP.register("triton", supports=float32_only)
def _triton(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    out: torch.Tensor = kernels_module("ssim").psnr_triton(x, y, data_range)
    return out
