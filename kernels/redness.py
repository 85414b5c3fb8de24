"""Triton keypoint redness: ``S = clip(R - max(G, B), 0, 1)`` on [0, 1] channels and ``S > 0.5``.

kernel -> launcher -> (used by the keypoint decoder through ``icl.ops.redness``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _redness_kernel(img_ptr, s_ptr, mask_ptr, n, threshold, IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    m = offs < n
    r = tl.load(img_ptr + offs * 3, mask=m, other=0).to(tl.float32)
    g = tl.load(img_ptr + offs * 3 + 1, mask=m, other=0).to(tl.float32)
    b = tl.load(img_ptr + offs * 3 + 2, mask=m, other=0).to(tl.float32)
    if not IS_FLOAT:
        r = r / 255.0
        g = g / 255.0
        b = b / 255.0
    s = tl.minimum(tl.maximum(r - tl.maximum(g, b), 0.0), 1.0)
    tl.store(s_ptr + offs, s, mask=m)
    tl.store(mask_ptr + offs, (s > threshold).to(tl.uint8), mask=m)


def redness_triton(images: torch.Tensor, threshold: float = 0.5, block: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Launcher. images [B, H, W, 3] uint8 (levels / 255) or float in [0, 1].
    Returns (S float32 [B, H, W], mask bool [B, H, W])."""
    bsz, h, w, _ = images.shape
    n = bsz * h * w
    s = torch.empty((bsz, h, w), dtype=torch.float32, device=images.device)
    mask = torch.empty((bsz, h, w), dtype=torch.uint8, device=images.device)
    if n:
        _redness_kernel[(triton.cdiv(n, block),)](images.contiguous(), s, mask, n, float(threshold),
                                                   IS_FLOAT=images.dtype != torch.uint8, BLOCK=block)
    return s, mask.view(torch.bool)
