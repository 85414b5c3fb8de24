"""Painter (Wang et al. 2023, "Images Speak in Images"), baaivision/Painter.

The official ``painter_vit_large_patch16_input896x448_win_dec64_8glb_sl1``: a ViT-L/16 over a
896 x 448 canvas (two 448 x 448 images stacked vertically), relative position bias in every
block, input and target streams merged (averaged) after block 2, features of blocks 5, 11, 17
and 23 concatenated and decoded to pixels by a linear layer and a small conv head. The
official constructor's ``window_block_indexes`` is a tuple of lists, so no block index is ever
found in it: every block attends globally over the whole 56 x 28 token grid, and the released
``painter_vit_large.pth`` has the matching (111, 64) / (55, 64) relative-position tables.

Canvas (as ``util/painter_inference_demo.py``): input ``[c_in; query]``, target
``[c_out; c_out]`` with the bottom half's patches replaced by the mask token; images resized
to 448 x 448 with PIL's bicubic (targets too, as the official eval scripts), ImageNet-normalised. The answer is the bottom half of
the predicted target, un-normalised, clipped to [0, 1] and resized to the query's size with
nearest neighbour, as the official demo does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icl.models.memory import ActivationMemory, block_values
from icl.models.requests import AnalogyRequest
from icl.models.vicl._load import config_fields, read_state_dict
from icl.models.vicl._torch import IMAGENET_MEAN, IMAGENET_STD, CheckpointNetworkAdapter, to_device_tensor
from icl.models.vicl._vit import Block, PatchEmbed
from icl.models.vicl.canvas import resize_pil
from icl.models.weights import resolve_weights

OFFICIAL_FILE = "painter_vit_large.pth"


@dataclass(frozen=True)
class PainterConfig:
    """Defaults: the official ViT-L configuration."""

    img_size: tuple[int, int] = (896, 448)
    patch_size: int = 16
    embed_dim: int = 1024
    depth: int = 24
    num_heads: int = 16
    mlp_ratio: float = 4.0
    decoder_embed_dim: int = 64
    pretrain_img_size: int = 224
    merge_index: int = 2
    feature_indices: tuple[int, ...] = (5, 11, 17, 23)

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any]) -> "PainterConfig":
        cfg = cls(**config_fields(cls, overrides, "painter"))
        idx = cfg.feature_indices
        if len(idx) != 4 or max(idx) >= cfg.depth or min(idx) < cfg.merge_index:
            raise ValueError(f"painter: feature_indices must be 4 block indices in [merge_index, depth), "
                             f"got {cfg.feature_indices}, {cfg.merge_index} for depth {cfg.depth}")
        if cfg.img_size[0] != 2 * cfg.img_size[1] or cfg.img_size[1] % cfg.patch_size:
            raise ValueError(f"painter: img_size must be (2 * s, s) with s a multiple of patch_size, got {cfg.img_size}")
        return cfg


class LayerNorm2D(nn.Module):
    """LayerNorm over the channels of ``[B, C, H, W]`` (``weight``, ``bias`` as Painter's)."""

    def __init__(self, channels: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), self.weight, self.bias, self.eps).permute(0, 3, 1, 2)


class PainterNet(nn.Module):
    """The Painter network with the official parameter names."""

    def __init__(self, cfg: PainterConfig):
        super().__init__()
        self.cfg = cfg
        d, p = cfg.embed_dim, cfg.patch_size
        self.grid = (cfg.img_size[0] // p, cfg.img_size[1] // p)
        self.patch_embed = PatchEmbed(p, 3, d)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, 1, d))
        self.segment_token_x = nn.Parameter(torch.zeros(1, 1, 1, d))
        self.segment_token_y = nn.Parameter(torch.zeros(1, 1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, (cfg.pretrain_img_size // p) ** 2 + 1, d))
        self.blocks = nn.ModuleList(Block(d, cfg.num_heads, cfg.mlp_ratio, 1e-6, self.grid) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.decoder_embed = nn.Linear(4 * d, p * p * cfg.decoder_embed_dim)
        c = cfg.decoder_embed_dim
        self.decoder_pred = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), LayerNorm2D(c), nn.GELU(), nn.Conv2d(c, 3, 1))

    def init_random(self, generator: torch.Generator) -> None:
        """Random weights (tests, throughput benchmarks): normal(0, 0.02) tokens and embeddings."""
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif "norm" in name and name.endswith("weight") or name == "decoder_pred.1.weight":
                nn.init.ones_(param)
            else:
                with torch.no_grad():
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.02)

    def abs_pos(self) -> torch.Tensor:
        """The pretraining position table (class token dropped) resized bicubically to the grid."""
        pos = self.pos_embed[:, 1:]
        side = int(round(pos.shape[1] ** 0.5))
        pos = pos.reshape(1, side, side, -1).permute(0, 3, 1, 2)
        if (side, side) != self.grid:
            pos = F.interpolate(pos.float(), size=self.grid, mode="bicubic", align_corners=False).to(pos.dtype)
        return pos.permute(0, 2, 3, 1)

    def forward(self, imgs: torch.Tensor, tgts: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """``imgs``, ``tgts``: normalised ``[B, 3, H, W]``; ``masked``: bool ``[gh, gw]`` patches
        of the target replaced by the mask token. Returns the predicted target ``[B, 3, H, W]``."""
        x = self.patch_embed(imgs)
        y = self.patch_embed(tgts)
        b, gh, gw, d = x.shape
        w = masked.to(y.dtype)[None, :, :, None]
        y = y * (1 - w) + self.mask_token * w
        pos = self.abs_pos()
        x = x + self.segment_token_x + pos
        y = y + self.segment_token_y + pos
        h = torch.cat([x, y], 0).reshape(2 * b, gh * gw, d)
        feats = []
        for i, blk in enumerate(self.blocks):
            h = blk(h, (gh, gw))
            if i == self.cfg.merge_index:
                h = (h[:b] + h[b:]) * 0.5
            if i in self.cfg.feature_indices:
                feats.append(self.norm(h))
        z = self.decoder_embed(torch.cat(feats, -1))  # [B, N, p * p * c]
        p, c = self.cfg.patch_size, self.cfg.decoder_embed_dim
        z = z.reshape(b, gh, gw, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, gh * p, gw * p)
        return self.decoder_pred(z)


class Painter(CheckpointNetworkAdapter):
    """Painter with its official 896 x 448 two-pair canvas (module docstring).

    K-shot: the first context pair only (the canvas holds one prompt pair; Painter's paper
    selects a single prompt per task).
    """

    name = "painter"
    version = "2"
    batch_size = 8
    shots_policy = "first context pair only (one prompt pair on the 896x448 canvas)"

    def __init__(self, weights: Optional[str] = None, dtype: Optional[str] = None, compile: Union[bool, str] = False,
                 config: Any = None):
        super().__init__(weights, dtype, compile, config)
        self.cfg = PainterConfig.from_overrides(self.config_overrides)

    def model_files(self) -> Sequence[Path]:
        return (resolve_weights(self.name, self.weights, OFFICIAL_FILE),)

    checkpoint_label = "Painter"

    def network(self) -> nn.Module:
        return PainterNet(self.cfg)

    def checkpoint_state(self, mmap: bool = False) -> tuple[Path, dict[str, torch.Tensor]]:
        path = self.model_files()[0]
        return path, read_state_dict(path, key="model", mmap=mmap)

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From :class:`PainterConfig` (the ``config`` argument over the official defaults:
        ``img_size`` H x W, ``patch_size`` p, ``embed_dim`` d, ``mlp_ratio``, ``num_heads``,
        ``decoder_embed_dim`` c), per request with ``N = (H / p)(W / p)`` tokens:
        ``A = b x (6 H W + 4 N d + max(2 x block(N), 5 c H W))``: the input and target canvases
        (``2 x 3 H W``), the four kept features (``4 N d``), and the larger of the encoder (its two
        streams until the merge, each :func:`icl.models.memory.block_values` with the MLP's
        ``mlp_ratio x d`` and, on CUDA, the queries, keys and values widened by the
        ``H/p + W/p`` relative-position columns of every head) and the decoder (the linear
        decoder's ``c`` channels at every pixel, held five times: its output's permuted copy, the
        head's convolution, LayerNorm2D's contiguous input and output, GELU)."""
        cfg = self.cfg
        (height, width), p, d = cfg.img_size, cfg.patch_size, cfg.embed_dim
        gh, gw = height // p, width // p
        tokens = gh * gw
        grid_bias = 3 * cfg.num_heads * (gh + gw) * tokens  # q, k, v widened by the grid bias (CUDA)
        encoder = 2 * (block_values(tokens, d, int(cfg.mlp_ratio * d)) + grid_bias)
        decoder = 5 * cfg.decoder_embed_dim * height * width
        values = 6 * height * width + len(cfg.feature_indices) * tokens * d + max(encoder, decoder)
        return ActivationMemory(bytes_per_value * values,
                                f"painter {height}x{width} canvas, N={tokens} tokens, d={d}, "
                                f"decoder c={cfg.decoder_embed_dim}")

    @property
    def side(self) -> int:
        return self.cfg.img_size[1]

    def canvas(self, req: AnalogyRequest) -> tuple[np.ndarray, np.ndarray]:
        """``(imgs, tgts)`` uint8 ``[2s, s, 3]``: ``[c_in; query]`` and ``[c_out; c_out]``."""
        s = self.side
        # PIL's Image.resize default (bicubic) for images and colour targets alike, as the official
        # eval scripts (baaivision/Painter Painter/eval/ade20k_semantic/painter_inference_segm.py)
        c_in = resize_pil(req.context_inputs[0], (s, s))
        q = resize_pil(req.query, (s, s))
        c_out = resize_pil(req.context_outputs[0], (s, s))
        return np.concatenate([c_in, q], 0), np.concatenate([c_out, c_out], 0)

    def mask(self) -> torch.Tensor:
        """Bool ``[gh, gw]``: the bottom half's patches (the query's target) are masked."""
        gh, gw = self.cfg.img_size[0] // self.cfg.patch_size, self.cfg.img_size[1] // self.cfg.patch_size
        m = torch.zeros(gh, gw, dtype=torch.bool)
        m[gh // 2:] = True
        return m

    def run_group(self, requests: Sequence[AnalogyRequest]) -> list[torch.Tensor]:
        dev, dt = torch.device(self.device), self.torch_dtype
        pairs = [self.canvas(r) for r in requests]
        mean = torch.tensor(IMAGENET_MEAN, device=dev, dtype=dt)[None, :, None, None]
        std = torch.tensor(IMAGENET_STD, device=dev, dtype=dt)[None, :, None, None]
        imgs = (to_device_tensor([p[0] for p in pairs], dev, dt) - mean) / std
        tgts = (to_device_tensor([p[1] for p in pairs], dev, dt) - mean) / std
        pred = self.net(imgs, tgts, self.mask().to(dev))
        bottom = (pred[:, :, self.side:].float() * std.float() + mean.float()).clamp(0, 1)
        out = []
        for img, req in zip(bottom, requests):
            h, w = req.query.shape[:2]
            out.append(F.interpolate(img[None], size=(h, w), mode="nearest")[0].permute(1, 2, 0))
        return out

