"""Triton backend of ``ssim`` (kernel in ``icl.kernels.ssim``)."""

from __future__ import annotations

import torch

from icl.ops._gpu import kernels_module
from icl.ops._dispatch import op

_OP = op('ssim')  # created by icl.ops.ssim, which imports this module on first dispatch


@_OP.register("triton")  # float64 throughout: any input dtype
def _triton(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    out: torch.Tensor = kernels_module("ssim").ssim_triton(x, y, data_range)
    return out
