"""ViT building blocks with timm's parameter names (``norm1``, ``attn.qkv``, ``attn.proj``,
``norm2``, ``mlp.fc1``, ``mlp.fc2``; ``patch_embed.proj``), as MAE and Painter checkpoints use
them. Attention runs through ``scaled_dot_product_attention``. Painter's decomposed relative
position bias (``attn.rel_pos_h``, ``attn.rel_pos_w``, from ViTDet/MViTv2) is
``q . Rh[qh, kh] + q . Rw[qw, kw]``: on CUDA it rides in extra head dimensions (queries get
their ``gh + gw`` bias values, keys the one-hot of their row and column), so no N x N mask is
built and the flash / memory-efficient kernels stay usable; on the CPU the additive mask is
faster (measured 2.4 s vs 3.0 s for one 896 x 448 layer at batch 2) and is kept."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


class PatchEmbed(nn.Module):
    """Non-overlapping ``patch`` x ``patch`` convolution: ``[B, C, H, W]`` -> ``[B, H/p, W/p, D]``."""

    def __init__(self, patch: int, in_chans: int, dim: int):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).permute(0, 2, 3, 1)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


def relative_positions(size: int, table: torch.Tensor) -> torch.Tensor:
    """``table[q - k + size - 1]`` for all query/key positions: ``[size, size, C]``; the table
    (``2 * size - 1`` rows when trained at this size) is linearly resized first otherwise."""
    n = 2 * size - 1
    if table.shape[0] != n:
        table = F.interpolate(table.t()[None].float(), size=n, mode="linear")[0].t().to(table.dtype)
    idx = torch.arange(size, device=table.device)
    return table[idx[:, None] - idx[None, :] + size - 1]


class Attention(nn.Module):
    """Multi-head self-attention over ``[B, N, D]`` tokens; with ``rel_pos_size=(h, w)`` the
    tokens form an ``h x w`` grid and get Painter's decomposed relative position bias."""

    def __init__(self, dim: int, heads: int, rel_pos_size: Optional[tuple[int, int]] = None):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.grid = rel_pos_size
        if rel_pos_size is not None:
            head_dim = dim // heads
            self.rel_pos_h = nn.Parameter(torch.zeros(2 * rel_pos_size[0] - 1, head_dim))
            self.rel_pos_w = nn.Parameter(torch.zeros(2 * rel_pos_size[1] - 1, head_dim))

    def forward(self, x: torch.Tensor, grid: Optional[tuple[int, int]] = None,
                dense_bias: Optional[bool] = None) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.grid is None:
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            gh, gw = grid or self.grid
            rq = q.reshape(b, self.heads, gh, gw, -1)
            bh = torch.einsum("bnhwc,hkc->bnhwk", rq, relative_positions(gh, self.rel_pos_h))  # [.., gh, gw, gh]
            bw = torch.einsum("bnhwc,wkc->bnhwk", rq, relative_positions(gw, self.rel_pos_w))  # [.., gh, gw, gw]
            if dense_bias if dense_bias is not None else not x.is_cuda:
                bias = (bh[..., :, None] + bw[..., None, :]).reshape(b, self.heads, n, n)
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            else:
                out = _attention_with_grid_bias(q, k, v, bh.reshape(b, self.heads, n, gh),
                                                bw.reshape(b, self.heads, n, gw), gh, gw)
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


def _attention_with_grid_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bh: torch.Tensor, bw: torch.Tensor,
                              gh: int, gw: int) -> torch.Tensor:
    """``softmax(q k^T s + bh[:, kh] + bw[:, kw]) v`` without an N x N bias: queries carry
    ``bh / s`` and ``bw / s``, keys the one-hot of their grid row and column (raster order),
    values zeros there; padded to a multiple of 8 dimensions for the fused kernels."""
    b, h, n, c = q.shape
    scale = c ** -0.5
    idx = torch.arange(n, device=q.device)
    rows = F.one_hot(idx // gw, gh).to(q.dtype).expand(b, h, n, gh)
    cols = F.one_hot(idx % gw, gw).to(q.dtype).expand(b, h, n, gw)
    pad = (-(c + gh + gw)) % 8
    zeros = q.new_zeros(b, h, n, pad)
    q2 = torch.cat([q, bh / scale, bw / scale, zeros], -1)
    k2 = torch.cat([k, rows, cols, zeros], -1)
    v2 = torch.cat([v, v.new_zeros(b, h, n, gh + gw + pad)], -1)
    return F.scaled_dot_product_attention(q2, k2, v2, scale=scale)[..., :c]


class Block(nn.Module):
    """Pre-norm transformer block (timm ``Block``): attention then MLP, each residual."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0, eps: float = 1e-6,
                 rel_pos_size: Optional[tuple[int, int]] = None):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = Attention(dim, heads, rel_pos_size)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor, grid: Optional[tuple[int, int]] = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), grid)
        return x + self.mlp(self.norm2(x))
