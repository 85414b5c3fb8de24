"""Triton nearest-palette kernel: exact nearest colour through a coarse colour-cube grid.

kernel -> launcher -> (public function in ``icl.ops.palette``).

The RGB cube is cut into 16^3 cells of 16 levels. For each candidate set (the palette
restricted to one image's candidates) a table lists, per cell, the palette colours that can
be nearest to some point of the cell: colour ``p`` survives when its smallest possible
squared distance to the cell is <= the smallest largest-possible distance of any colour.
Lists keep ascending palette order, and the kernel replaces the best only on a strictly
smaller distance, so ties go to the lower palette index exactly as in the reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CELL_BITS = 4  # 16 levels per cell edge, 16^3 cells
CELLS_PER_AXIS = 256 >> CELL_BITS


@triton.jit
def _to_level(x):
    """round(255 * clip(x, 0, 1)) with round-half-to-even, computed in float32 (as to_uint8)."""
    v = tl.minimum(tl.maximum(x.to(tl.float32), 0.0), 1.0) * 255.0
    f = tl.floor(v + 0.5)
    odd_tie = ((f - v) == 0.5) & ((f.to(tl.int32) & 1) == 1)
    return tl.where(odd_tie, f - 1.0, f).to(tl.int32)


@triton.jit
def _nearest_palette_kernel(
    img_ptr, out_ptr, set_of_image_ptr, table_ptr, counts_ptr, palette_ptr,
    n_pixels, max_k,
    IS_FLOAT: tl.constexpr, CELL_BITS: tl.constexpr, CELLS: tl.constexpr, BLOCK: tl.constexpr,
):
    b = tl.program_id(1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_pixels
    base = (b.to(tl.int64) * n_pixels + offs) * 3
    if IS_FLOAT:
        # PROTOCOL §1.3: float predictions become levels before the search
        r = _to_level(tl.load(img_ptr + base, mask=mask, other=0.0))
        g = _to_level(tl.load(img_ptr + base + 1, mask=mask, other=0.0))
        bl = _to_level(tl.load(img_ptr + base + 2, mask=mask, other=0.0))
    else:
        r = tl.load(img_ptr + base, mask=mask, other=0).to(tl.int32)
        g = tl.load(img_ptr + base + 1, mask=mask, other=0).to(tl.int32)
        bl = tl.load(img_ptr + base + 2, mask=mask, other=0).to(tl.int32)
    cell = ((r >> CELL_BITS) * CELLS + (g >> CELL_BITS)) * CELLS + (bl >> CELL_BITS)
    s = tl.load(set_of_image_ptr + b)
    row = (s * (CELLS * CELLS * CELLS) + cell).to(tl.int64)
    count = tl.load(counts_ptr + row, mask=mask, other=0)
    best = tl.full((BLOCK,), 1 << 30, tl.int32)
    arg = tl.zeros((BLOCK,), tl.int32)
    for k in range(0, max_k):
        active = mask & (k < count)
        p = tl.load(table_ptr + row * max_k + k, mask=active, other=0).to(tl.int32)
        pr = tl.load(palette_ptr + p * 3, mask=active, other=0)
        pg = tl.load(palette_ptr + p * 3 + 1, mask=active, other=0)
        pb = tl.load(palette_ptr + p * 3 + 2, mask=active, other=0)
        d = (r - pr) * (r - pr) + (g - pg) * (g - pg) + (bl - pb) * (bl - pb)
        better = active & (d < best)
        best = tl.where(better, d, best)
        arg = tl.where(better, p, arg)
    tl.store(out_ptr + b.to(tl.int64) * n_pixels + offs, arg, mask=mask)


def build_cell_tables(palette: torch.Tensor, sets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Per candidate set and cell, the palette indices that can be nearest (ascending).

    palette: int32 [P, 3]; sets: bool [S, P]. Returns (table int16 [S, cells, K], counts int32
    [S, cells], K). Runs on the palette's device with torch ops.
    """
    device = palette.device
    n = CELLS_PER_AXIS
    width = 1 << CELL_BITS
    lo = torch.arange(n, device=device, dtype=torch.int32) * width
    hi = lo + (width - 1)
    pal = palette.to(torch.int32)
    # per axis and channel: [n, P] lower and upper squared-distance bounds
    def axis_bounds(ch: int) -> tuple[torch.Tensor, torch.Tensor]:
        p = pal[:, ch][None, :]
        below = (lo[:, None] - p).clamp(min=0)
        above = (p - hi[:, None]).clamp(min=0)
        dmin = (below + above) ** 2
        dmax = torch.maximum((p - lo[:, None]) ** 2, (p - hi[:, None]) ** 2)
        return dmin, dmax

    (rmin, rmax), (gmin, gmax), (bmin, bmax) = (axis_bounds(c) for c in range(3))
    dmin = (rmin[:, None, None, :] + gmin[None, :, None, :] + bmin[None, None, :, :]).reshape(n ** 3, -1)
    dmax = (rmax[:, None, None, :] + gmax[None, :, None, :] + bmax[None, None, :, :]).reshape(n ** 3, -1)
    big = torch.iinfo(torch.int32).max
    tables, counts = [], []
    for s in range(sets.shape[0]):
        allowed = sets[s][None, :]
        bound = torch.where(allowed, dmax, big).amin(dim=1, keepdim=True)
        keep = allowed & (dmin <= bound)
        counts.append(keep.sum(dim=1, dtype=torch.int32))
        # stable order of kept indices: sort by (not kept, index)
        order = torch.argsort((~keep).to(torch.int32) * 512 + torch.arange(pal.shape[0], device=device), dim=1)
        tables.append(order)
    count = torch.stack(counts)
    k = max(int(count.max().item()), 1)
    table = torch.stack([t[:, :k] for t in tables]).to(torch.int16).contiguous()
    return table, count.contiguous(), k


def nearest_palette_triton(images: torch.Tensor, palette: torch.Tensor, candidates: torch.Tensor | None,
                           block: int = 1024) -> torch.Tensor:
    """Launcher. images [B, H, W, 3] uint8 or float (CUDA, contiguous); palette [P, 3];
    candidates bool [B, P] or None. Returns int32 [B, H, W]."""
    bsz, h, w, _ = images.shape
    device = images.device
    pal = palette.to(device=device, dtype=torch.int32).contiguous()
    if candidates is None:
        sets = torch.ones((1, pal.shape[0]), dtype=torch.bool, device=device)
        set_of_image = torch.zeros(bsz, dtype=torch.int32, device=device)
    else:
        sets, inverse = torch.unique(candidates.to(device=device, dtype=torch.bool), dim=0, return_inverse=True)
        set_of_image = inverse.to(torch.int32)
    table, counts, max_k = build_cell_tables(pal, sets)
    images = images.contiguous()
    out = torch.empty((bsz, h, w), dtype=torch.int32, device=device)
    n_pixels = h * w
    grid = (triton.cdiv(n_pixels, block), bsz)
    _nearest_palette_kernel[grid](
        images, out, set_of_image, table, counts, pal, n_pixels, max_k,
        IS_FLOAT=images.dtype != torch.uint8, CELL_BITS=CELL_BITS, CELLS=CELLS_PER_AXIS, BLOCK=block,
    )
    return out
