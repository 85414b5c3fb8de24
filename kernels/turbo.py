"""Triton turbo decoding through a full RGB lookup table.

kernel -> launcher -> (public functions in ``icl.ops.turbo``).

The turbo table is fixed, so the nearest bin of every one of the 2^24 RGB colours is computed
once per device (16 MiB, built by the exact palette kernel) and decoding becomes one gather
per pixel, which keeps the table in L2 and the kernel bound by image bandwidth.
"""

from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from .palette import nearest_palette_triton

_LUTS: dict[torch.device, torch.Tensor] = {}


def rgb_cube(device: torch.device) -> torch.Tensor:
    """All 2^24 colours as one uint8 image [1, 4096, 4096, 3], in LUT index order."""
    levels = torch.arange(256, device=device, dtype=torch.uint8)
    r, g, b = torch.meshgrid(levels, levels, levels, indexing="ij")
    return torch.stack([r, g, b], dim=-1).reshape(1, 4096, 4096, 3)


def turbo_lut(table: torch.Tensor, device: torch.device,
              nearest: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = lambda img, pal: nearest_palette_triton(img, pal, None)
              ) -> torch.Tensor:
    """uint8 [2^24]: nearest turbo bin of colour ``(r << 16) | (g << 8) | b`` (ties lower bin),
    computed once per device by ``nearest`` (the exact palette kernel by default)."""
    lut = _LUTS.get(device)
    if lut is None:
        lut = nearest(rgb_cube(device), table.to(device)).reshape(-1).to(torch.uint8)
        _LUTS[device] = lut
    return lut


@triton.jit
def _lut_decode_kernel(img_ptr, lut_ptr, bins_ptr, depth_ptr, depth_of_bin_ptr, n,
                       WRITE_DEPTH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    m = offs < n
    r = tl.load(img_ptr + offs * 3, mask=m, other=0).to(tl.int32)
    g = tl.load(img_ptr + offs * 3 + 1, mask=m, other=0).to(tl.int32)
    b = tl.load(img_ptr + offs * 3 + 2, mask=m, other=0).to(tl.int32)
    bins = tl.load(lut_ptr + ((r << 16) | (g << 8) | b), mask=m, other=0).to(tl.int32)
    if WRITE_DEPTH:
        tl.store(depth_ptr + offs, tl.load(depth_of_bin_ptr + bins, mask=m, other=0.0), mask=m)
    else:
        tl.store(bins_ptr + offs, bins, mask=m)


def turbo_lookup_triton(images: torch.Tensor, lut: torch.Tensor, depth_of_bin: torch.Tensor | None,
                        block: int = 1024) -> torch.Tensor:
    """Launcher. images uint8 [B, H, W, 3]; lut uint8 [2^24]. Returns int32 bins [B, H, W], or
    float32 depth ``depth_of_bin[bin]`` when the float32 [256] table of bin centres is given."""
    bsz, h, w, _ = images.shape
    n = bsz * h * w
    write_depth = depth_of_bin is not None
    out = torch.empty((bsz, h, w), dtype=torch.float32 if write_depth else torch.int32, device=images.device)
    table = depth_of_bin.contiguous() if write_depth else out
    if n:
        _lut_decode_kernel[(triton.cdiv(n, block),)](
            images.contiguous(), lut, out, out, table, n, WRITE_DEPTH=write_depth, BLOCK=block)
    return out
