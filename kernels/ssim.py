"""Triton fused SSIM (scikit-image semantics, Gaussian window) and PSNR.

kernel -> launcher -> (public functions in ``icl.ops.ssim`` / ``icl.ops.psnr``).

SSIM: one program computes a 16 x 64 tile of the SSIM map of one (image, channel), in
float64 throughout, as skimage does: float32 moments drift by 1e-5 on flat or bright
low-variance images, and the contract is 1e-6. For each of the 11 vertical taps the
horizontal 11-tap pass is recomputed on the shifted rows (121 loads per output, served by
L1/L2), which keeps every step elementwise float64 (no fp64 matrix product needed). Only the
valid window positions are evaluated (``skimage`` crops ``(win - 1) // 2`` from each border
before the mean), so no border handling is needed. Inputs are shifted by ``data_range / 2``
before the moments are taken (variances are shift-invariant; smaller magnitudes lose less to
cancellation). Per-tile sums are reduced on the host side in float64, deterministically.
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


def gaussian_window() -> torch.Tensor:
    """The 11 normalised taps, computed in float64 as SciPy does."""
    x = torch.arange(WIN, dtype=torch.float64) - (WIN // 2)
    w = torch.exp(-0.5 * (x / SIGMA) ** 2)
    return w / w.sum()


@triton.jit
def _ssim_tile_kernel(
    x_ptr, y_ptr, w_ptr, partial_ptr,
    H, W, C, n_tiles_r, n_tiles_c, shift, c1, c2,
    TILE_H: tl.constexpr, TILE_W: tl.constexpr, WIN: tl.constexpr,
):
    bc = tl.program_id(0)
    tr = tl.program_id(1)
    tcol = tl.program_id(2)
    b = bc // C
    ch = bc % C
    r0 = tr * TILE_H
    c0 = tcol * TILE_W
    out_r = r0 + tl.arange(0, TILE_H)[:, None]
    cols = c0 + tl.arange(0, TILE_W)[None, :]
    valid = (out_r < H - (WIN - 1)) & (cols < W - (WIN - 1))
    base = b.to(tl.int64) * H * W * C + ch
    mx = tl.zeros((TILE_H, TILE_W), tl.float64)
    my = tl.zeros((TILE_H, TILE_W), tl.float64)
    sxx = tl.zeros((TILE_H, TILE_W), tl.float64)
    syy = tl.zeros((TILE_H, TILE_W), tl.float64)
    sxy = tl.zeros((TILE_H, TILE_W), tl.float64)
    for kv in tl.static_range(WIN):
        rows = out_r + kv
        hx = tl.zeros((TILE_H, TILE_W), tl.float64)
        hy = tl.zeros((TILE_H, TILE_W), tl.float64)
        hxx = tl.zeros((TILE_H, TILE_W), tl.float64)
        hyy = tl.zeros((TILE_H, TILE_W), tl.float64)
        hxy = tl.zeros((TILE_H, TILE_W), tl.float64)
        for kh in tl.static_range(WIN):
            off = base + (rows.to(tl.int64) * W + cols + kh) * C
            xv = tl.load(x_ptr + off, mask=valid, other=0).to(tl.float64) - shift
            yv = tl.load(y_ptr + off, mask=valid, other=0).to(tl.float64) - shift
            wk = tl.load(w_ptr + kh)
            hx += wk * xv
            hy += wk * yv
            hxx += wk * xv * xv
            hyy += wk * yv * yv
            hxy += wk * xv * yv
        wv = tl.load(w_ptr + kv)
        mx += wv * hx
        my += wv * hy
        sxx += wv * hxx
        syy += wv * hyy
        sxy += wv * hxy
    vx = sxx - mx * mx
    vy = syy - my * my
    vxy = sxy - mx * my
    mx += shift
    my += shift
    num = (2.0 * mx * my + c1) * (2.0 * vxy + c2)
    den = (mx * mx + my * my + c1) * (vx + vy + c2)
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
    partial = torch.empty((bsz * c, n_tiles_r, n_tiles_c), dtype=torch.float64, device=x.device)
    c1 = (0.01 * data_range) ** 2
    c2 = (0.03 * data_range) ** 2
    grid = (bsz * c, n_tiles_r, n_tiles_c)
    _ssim_tile_kernel[grid](
        x, y, weights, partial, h, w, c, n_tiles_r, n_tiles_c, float(data_range) / 2.0, c1, c2,
        TILE_H=TILE_H, TILE_W=TILE_W, WIN=WIN,
    )
    n_valid = (h - (WIN - 1)) * (w - (WIN - 1))
    per_channel = partial.sum(dim=(1, 2)) / n_valid
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
