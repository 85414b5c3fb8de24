"""Triton backend of ``nearest_palette`` (kernel in ``icl.kernels.palette``)."""

from __future__ import annotations

from typing import Optional

import torch

from icl.ops._gpu import kernels_module
from icl.ops._dispatch import op

_OP = op('nearest_palette')  # created by icl.ops.palette, which imports this module on first dispatch


@_OP.register("triton")
def _triton(images: torch.Tensor, palette: torch.Tensor, candidates: Optional[torch.Tensor]) -> torch.Tensor:
    out: torch.Tensor = kernels_module("palette").nearest_palette_triton(images, palette, candidates)
    return out
