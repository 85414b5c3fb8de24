"""Triton backend of ``redness`` (kernel in ``icl.kernels.redness``)."""

from __future__ import annotations

import torch

from icl.ops._gpu import kernels_module
from icl.ops._dispatch import op

_OP = op('redness')  # created by icl.ops.redness, which imports this module on first dispatch


@_OP.register("triton")
def _triton(images: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    out: tuple[torch.Tensor, torch.Tensor] = kernels_module("redness").redness_triton(images, threshold)
    return out
