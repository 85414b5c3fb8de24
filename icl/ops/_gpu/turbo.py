"""Triton backends of ``turbo_bins`` and ``turbo_decode``: one gather per pixel through the
full RGB lookup table (``icl.kernels.turbo``). ``turbo_encode`` is a table gather that the
torch reference already does on the device."""

from __future__ import annotations

import torch

from icl.ops._gpu import kernels_module
from icl.ops._dispatch import op
from icl.ops._turbo_table import depth_of_bin
from icl.ops.turbo import torch_table

_BINS, _DECODE = op("turbo_bins"), op("turbo_decode")  # created by icl.ops.turbo, which imports this module on first dispatch


def _lut(device: torch.device) -> torch.Tensor:
    turbo = kernels_module("turbo")
    if device.type == "cuda":
        out: torch.Tensor = turbo.turbo_lut(torch_table(device), device)
        return out
    # interpreter mode (tests): the 2^24-colour table is built by the native CPU kernel
    from icl.ops.palette import nearest_palette

    lut: torch.Tensor = turbo.turbo_lut(torch_table(device), device, lambda img, pal: nearest_palette(img, pal))
    return lut


@_BINS.register("triton")
def _bins_triton(images: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = kernels_module("turbo").turbo_lookup_triton(images, _lut(images.device), None)
    return out


@_DECODE.register("triton")
def _decode_triton(images: torch.Tensor, d_min: float, d_max: float) -> torch.Tensor:
    centres = torch.from_numpy(depth_of_bin(d_min, d_max)).to(images.device)
    out: torch.Tensor = kernels_module("turbo").turbo_lookup_triton(images, _lut(images.device), centres)
    return out
