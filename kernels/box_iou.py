"""Triton pairwise box IoU: kernel -> launcher -> (public function in ``icl.ops.box_iou``)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _box_iou_kernel(a_ptr, b_ptr, out_ptr, n, m, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    i = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    j = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    mi = i < n
    mj = j < m
    ax0 = tl.load(a_ptr + i * 4, mask=mi, other=0.0).to(tl.float32)[:, None]
    ay0 = tl.load(a_ptr + i * 4 + 1, mask=mi, other=0.0).to(tl.float32)[:, None]
    ax1 = tl.load(a_ptr + i * 4 + 2, mask=mi, other=0.0).to(tl.float32)[:, None]
    ay1 = tl.load(a_ptr + i * 4 + 3, mask=mi, other=0.0).to(tl.float32)[:, None]
    bx0 = tl.load(b_ptr + j * 4, mask=mj, other=0.0).to(tl.float32)[None, :]
    by0 = tl.load(b_ptr + j * 4 + 1, mask=mj, other=0.0).to(tl.float32)[None, :]
    bx1 = tl.load(b_ptr + j * 4 + 2, mask=mj, other=0.0).to(tl.float32)[None, :]
    by1 = tl.load(b_ptr + j * 4 + 3, mask=mj, other=0.0).to(tl.float32)[None, :]
    iw = tl.maximum(tl.minimum(ax1, bx1) - tl.maximum(ax0, bx0), 0.0)
    ih = tl.maximum(tl.minimum(ay1, by1) - tl.maximum(ay0, by0), 0.0)
    inter = iw * ih
    area_a = tl.maximum(ax1 - ax0, 0.0) * tl.maximum(ay1 - ay0, 0.0)
    area_b = tl.maximum(bx1 - bx0, 0.0) * tl.maximum(by1 - by0, 0.0)
    union = area_a + area_b - inter
    # zero-area boxes: IoU 0, never NaN
    iou = tl.where(union > 0, inter / tl.where(union > 0, union, 1.0), 0.0)
    tl.store(out_ptr + i[:, None].to(tl.int64) * m + j[None, :], iou, mask=mi[:, None] & mj[None, :])


def box_iou_triton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Launcher. a [N, 4], b [M, 4] xyxy float. Returns float32 [N, M]."""
    n, m = a.shape[0], b.shape[0]
    out = torch.empty((n, m), dtype=torch.float32, device=a.device)
    if n == 0 or m == 0:
        return out
    grid = (triton.cdiv(n, 32), triton.cdiv(m, 32))
    _box_iou_kernel[grid](a.contiguous(), b.contiguous(), out, n, m, BLOCK_N=32, BLOCK_M=32)
    return out
