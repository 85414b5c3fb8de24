"""numba.cuda backend of ``connected_components`` (kernels in ``icl.kernels.components_cuda``)."""

from __future__ import annotations

from typing import Optional

import torch

from icl.ops._gpu import kernels_module
from icl.ops._dispatch import op
from icl.ops._numpy_core import Components

_OP = op("connected_components")  # created by icl.ops.components, which imports this module on first dispatch


def _supports(mask: torch.Tensor, connectivity: int, values: Optional[torch.Tensor]) -> Optional[str]:
    if values is not None and values.dtype == torch.float64:
        return "the cuda backend ranks values in float32; float64 values would lose argmax ties"
    return None


@_OP.register("cuda", supports=_supports)
def _cuda(mask: torch.Tensor, connectivity: int, values: Optional[torch.Tensor]) -> Components:
    if values is not None and not bool(torch.isfinite(values).all()):
        raise ValueError("values: contains NaN or infinite values")
    kernel = kernels_module("components_cuda").connected_components_cuda
    return Components(*kernel(mask, connectivity, values))
