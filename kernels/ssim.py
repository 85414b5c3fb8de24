"""Triton fused SSIM (scikit-image semantics, Gaussian window) and PSNR.

kernel -> launcher -> (public functions in ``icl.ops.ssim`` / ``icl.ops.psnr``).

SSIM: one program computes a 16 x 64 tile of the SSIM map of one (image, channel). The
horizontal Gaussian pass is 11 shifted loads over 32 input rows; the vertical pass is a banded
[16, 32] matrix product (exact fp32, ``input_precision="ieee"``). Only the valid window
positions are evaluated (``skimage`` crops ``(win - 1) // 2`` from each border before the
mean), so no border handling is needed. Inputs are shifted by ``data_range / 2`` before the
moments are taken: variances are shift-invariant and the smaller magnitudes lose less to
fp32 cancellation. Per-tile sums are reduced on the host side in float64, deterministically.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

WIN = 11  # gaussian_weights=True, sigma=1.5, truncate=3.5 -> radius 5
SIGMA = 1.5
TILE_H = 16
TILE_W = 64
ROWS_IN = 32  # >= TILE_H + WIN - 1, a power of two for tl.dot


def gaussian_window() -> torch.Tensor:
    """The 11 normalised taps, computed in float64 as SciPy does, stored as float32."""
    x = torch.arange(WIN, dtype=torch.float64) - (WIN // 2)
    w = torch.exp(-0.5 * (x / SIGMA) ** 2)
    return (w / w.sum()).to(torch.float32)


@triton.jit
def _ssim_tile_kernel(
    x_ptr, y_ptr, w_ptr, partial_ptr,
    H, W, C, n_tiles_r, n_tiles_c, shift, c1, c2,
    TILE_H: tl.constexpr, TILE_W: tl.constexpr, ROWS_IN: tl.constexpr, WIN: tl.constexpr,
):
    bc = tl.program_id(0)
    tr = tl.program_id(1)
    tcol = tl.program_id(2)
    b = bc // C
    ch = bc % C
    r0 = tr * TILE_H
    c0 = tcol * TILE_W
    rows = r0 + tl.arange(0, ROWS_IN)[:, None]
    cols = c0 + tl.arange(0, TILE_W)[None, :]
    base = b.to(tl.int64) * H * W * C + ch
    hx = tl.zeros((ROWS_IN, TILE_W), tl.float32)
    hy = tl.zeros((ROWS_IN, TILE_W), tl.float32)
    hxx = tl.zeros((ROWS_IN, TILE_W), tl.float32)
    hyy = tl.zeros((ROWS_IN, TILE_W), tl.float32)
    hxy = tl.zeros((ROWS_IN, TILE_W), tl.float32)
    for k in tl.static_range(WIN):
        cc = cols + k
        m = (rows < H) & (cc < W)
        off = base + (rows.to(tl.int64) * W + cc) * C
        xv = tl.load(x_ptr + off, mask=m, other=0).to(tl.float32) - shift
        yv = tl.load(y_ptr + off, mask=m, other=0).to(tl.float32) - shift
        wk = tl.load(w_ptr + k)
        hx += wk * xv
        hy += wk * yv
        hxx += wk * xv * xv
        hyy += wk * yv * yv
        hxy += wk * xv * yv
    # banded vertical filter: gv[i, j] = w[j - i] for 0 <= j - i < WIN
    d = tl.arange(0, ROWS_IN)[None, :] - tl.arange(0, TILE_H)[:, None]
    band = (d >= 0) & (d < WIN)
    gv = tl.load(w_ptr + tl.where(band, d, 0), mask=band, other=0.0)
    mx = tl.dot(gv, hx, input_precision="ieee")
    my = tl.dot(gv, hy, input_precision="ieee")
    sxx = tl.dot(gv, hxx, input_precision="ieee") - mx * mx
    syy = tl.dot(gv, hyy, input_precision="ieee") - my * my
    sxy = tl.dot(gv, hxy, input_precision="ieee") - mx * my
    mx += shift
    my += shift
    num = (2.0 * mx * my + c1) * (2.0 * sxy + c2)
    den = (mx * mx + my * my + c1) * (sxx + syy + c2)
    out_r = r0 + tl.arange(0, TILE_H)[:, None]
    valid = (out_r < H - (WIN - 1)) & (cols < W - (WIN - 1))
    s = tl.sum(tl.sum(tl.where(valid, num / den, 0.0), axis=1), axis=0)
    tl.store(partial_ptr + (bc * n_tiles_r + tr) * n_tiles_c + tcol, s)


def ssim_triton(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    """Launcher. x, y [B, H, W, C] (same dtype, contiguous, H and W >= 11). Returns float64 [B]:
    the mean over valid window positions per channel, then over channels (tile sums in float64)."""
    bsz, h, w, c = x.shape
    x = x.contiguous()
    y = y.contiguous()
    weights = gaussian_window().to(x.device)
    n_tiles_r = triton.cdiv(h - (WIN - 1), TILE_H)
    n_tiles_c = triton.cdiv(w - (WIN - 1), TILE_W)
    partial = torch.empty((bsz * c, n_tiles_r, n_tiles_c), dtype=torch.float32, device=x.device)
    c1 = (0.01 * data_range) ** 2
    c2 = (0.03 * data_range) ** 2
    grid = (bsz * c, n_tiles_r, n_tiles_c)
    _ssim_tile_kernel[grid](
        x, y, weights, partial, h, w, c, n_tiles_r, n_tiles_c, float(data_range) / 2.0, c1, c2,
        TILE_H=TILE_H, TILE_W=TILE_W, ROWS_IN=ROWS_IN, WIN=WIN,
    )
    n_valid = (h - (WIN - 1)) * (w - (WIN - 1))
    per_channel = partial.double().sum(dim=(1, 2)) / n_valid
    return per_channel.view(bsz, c).mean(dim=1)


@triton.jit
def _sq_diff_kernel(x_ptr, y_ptr, partial_ptr, n, IS_INT: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    base = b.to(tl.int64) * n
    if IS_INT:
        # uint8 differences squared sum exactly in int64
        d = tl.load(x_ptr + base + offs, mask=m, other=0).to(tl.int32) - tl.load(y_ptr + base + offs, mask=m, other=0).to(tl.int32)
        s = tl.sum((d * d).to(tl.int64), axis=0).to(tl.float64)
    else:
        d = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32) - tl.load(y_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
        # squares in float32 summed in float64, as the cpu backend does
        s = tl.sum((d * d).to(tl.float64), axis=0)
    tl.store(partial_ptr + b * tl.num_programs(0) + tl.program_id(0), s)


def psnr_triton(x: torch.Tensor, y: torch.Tensor, data_range: float, block: int = 4096) -> torch.Tensor:
    """Launcher. x, y [B, ...] same shape and dtype. Returns float64 [B] (the MSE is summed and
    the logarithm taken in float64, as on the CPU); identical -> +inf."""
    bsz = x.shape[0]
    n = x[0].numel()
    x = x.contiguous()
    y = y.contiguous()
    n_blocks = triton.cdiv(n, block)
    partial = torch.empty((bsz, n_blocks), dtype=torch.float64, device=x.device)
    _sq_diff_kernel[(n_blocks, bsz)](x, y, partial, n, IS_INT=x.dtype == torch.uint8, BLOCK=block)
    mse = partial.sum(dim=1) / n
    with torch.no_grad():
        out = 10.0 * torch.log10((data_range ** 2) / mse)
    return torch.where(mse == 0, torch.full_like(out, math.inf), out)
