"""MAE-VQGAN (Bar et al. 2022, "Visual Prompting via Image Inpainting"), amirbar/visual_prompting.

An MAE ViT-L/16 (``models_mae.mae_vit_large_patch16``) whose decoder predicts, for each of the
14 x 14 patches of a 224 x 224 canvas, one of the 1024 codes of the taming VQGAN
``vqgan_imagenet_f16_1024`` (the checkpoint's ``vae.*``), which decodes them to pixels.

Canvas (``evaluate/*_dataloader.py``): white 224 x 224, four 111 x 111 quadrants with a 2 px
gap: context input top-left, context output top-right, query bottom-left, bottom-right left
white; ImageNet-normalised. The encoder sees every patch but the bottom-right 7 x 7 (as
``generate_mask_for_evaluation``); the codes predicted there (argmax) are decoded and the
bottom-right quadrant ``[113:, 113:]`` of the decoded canvas, resized (bilinear) to the query's
size, is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icl.models.memory import ActivationMemory, block_values, conv_pyramid_values
from icl.models.requests import AnalogyRequest
from icl.models.vicl._load import config_fields, read_state_dict, read_training_checkpoint
from icl.models.vicl._torch import IMAGENET_MEAN, IMAGENET_STD, CheckpointNetworkAdapter, to_device_tensor
from icl.models.vicl._vit import Block, PatchEmbed
from icl.models.vicl._vqgan import VQGAN, VQGANConfig, vqgan_state_dict
from icl.models.vicl.canvas import host_image, resize_area, resize_nearest
from icl.models.weights import WeightsError, resolve_weights

OFFICIAL_FILE = "checkpoint-1000.pth"
VQGAN_FILE = "last.ckpt"


@dataclass(frozen=True)
class MAEVQGANConfig:
    """Defaults: ``mae_vit_large_patch16`` on 224 x 224 with the f16 1024-code VQGAN."""

    img_size: int = 224
    patch_size: int = 16
    embed_dim: int = 1024
    depth: int = 24
    num_heads: int = 16
    decoder_embed_dim: int = 512
    decoder_depth: int = 8
    decoder_num_heads: int = 16
    mlp_ratio: float = 4.0
    padding: int = 1
    vqgan: VQGANConfig = VQGANConfig()

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any]) -> "MAEVQGANConfig":
        kw = config_fields(cls, overrides, "mae-vqgan")
        if "vqgan" in kw and isinstance(kw["vqgan"], dict):
            kw["vqgan"] = VQGANConfig(**config_fields(VQGANConfig, kw["vqgan"], "mae-vqgan (vqgan)"))
        cfg = cls(**kw)
        grid = cfg.img_size // cfg.patch_size
        if cfg.img_size % cfg.patch_size or grid % 2 or cfg.vqgan.factor != cfg.patch_size:
            raise ValueError(f"mae-vqgan: img_size must be an even number of patches and the VQGAN factor "
                             f"({cfg.vqgan.factor}) must equal patch_size ({cfg.patch_size})")
        return cfg

    @property
    def quadrant(self) -> int:
        return self.img_size // 2 - self.padding


class MAEVQGANNet(nn.Module):
    """``MaskedAutoencoderViT`` with the official parameter names, for inference."""

    def __init__(self, cfg: MAEVQGANConfig):
        super().__init__()
        self.cfg = cfg
        n = (cfg.img_size // cfg.patch_size) ** 2
        self.patch_embed = PatchEmbed(cfg.patch_size, 3, cfg.embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, cfg.embed_dim), requires_grad=False)
        self.blocks = nn.ModuleList(Block(cfg.embed_dim, cfg.num_heads, cfg.mlp_ratio) for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(cfg.embed_dim, eps=1e-6)
        self.vae = VQGAN(cfg.vqgan)
        self.decoder_embed = nn.Linear(cfg.embed_dim, cfg.decoder_embed_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, cfg.decoder_embed_dim))
        self.decoder_pos_embed = nn.Parameter(torch.zeros(1, n + 1, cfg.decoder_embed_dim), requires_grad=False)
        self.decoder_blocks = nn.ModuleList(Block(cfg.decoder_embed_dim, cfg.decoder_num_heads, cfg.mlp_ratio)
                                            for _ in range(cfg.decoder_depth))
        self.decoder_norm = nn.LayerNorm(cfg.decoder_embed_dim, eps=1e-6)
        self.decoder_pred = nn.Linear(cfg.decoder_embed_dim, cfg.vqgan.n_embed)

    def forward(self, canvas: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """``canvas``: normalised ``[B, 3, S, S]``; ``keep``: int64 indices of the visible
        patches (raster order). Returns the code logits of every patch, ``[B, N, n_embed]``."""
        x = self.patch_embed(canvas).flatten(1, 2) + self.pos_embed[:, 1:]
        b, n, d = x.shape
        x = x[:, keep]
        cls = (self.cls_token + self.pos_embed[:, :1]).expand(b, -1, -1)
        x = torch.cat([cls, x], 1)
        for blk in self.blocks:
            x = blk(x)
        x = self.decoder_embed(self.norm(x))
        full = self.mask_token.to(x.dtype).expand(b, n, -1).clone()
        full[:, keep] = x[:, 1:]
        x = torch.cat([x[:, :1], full], 1) + self.decoder_pos_embed
        for blk in self.decoder_blocks:
            x = blk(x)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]


class MAEVQGAN(CheckpointNetworkAdapter):
    """MAE-VQGAN on its official 2 x 2 inpainting canvas (module docstring).

    K-shot: the first context pair only (the official 224 x 224 canvas holds one pair).
    Weights: ``checkpoint-1000.pth`` (``{"model": state_dict}``); the VQGAN comes from its
    ``vae.*`` tensors, or, when the checkpoint has none, from taming's ``last.ckpt``
    (``vqgan_weights``, default ``last.ckpt`` beside the checkpoint or in
    ``$ICL_WEIGHTS_DIR/mae-vqgan/``).
    """

    name = "mae-vqgan"
    version = "1"
    batch_size = 16
    shots_policy = "first context pair only (2x2 canvas: c_in | c_out / query | masked)"

    def __init__(self, weights: Optional[str] = None, vqgan_weights: Optional[str] = None,
                 dtype: Optional[str] = None, compile: Union[bool, str] = False, config: Any = None):
        super().__init__(weights, dtype, compile, config)
        self.vqgan_weights = vqgan_weights
        self.cfg = MAEVQGANConfig.from_overrides(self.config_overrides)

    def _vqgan_file(self) -> Optional[Path]:
        if self.vqgan_weights is not None:
            return resolve_weights(self.name, self.vqgan_weights, VQGAN_FILE, argument="vqgan_weights")
        main = resolve_weights(self.name, self.weights, OFFICIAL_FILE)
        beside = main.parent / VQGAN_FILE
        return beside if beside.is_file() else None

    def model_files(self) -> Sequence[Path]:
        main = resolve_weights(self.name, self.weights, OFFICIAL_FILE)
        extra = self._vqgan_file()
        return (main,) if extra is None else (main, extra)

    checkpoint_label = "MAE-VQGAN"
    checkpoint_ignore = ("vae.loss.",)

    def network(self) -> nn.Module:
        return MAEVQGANNet(self.cfg)

    def checkpoint_state(self, mmap: bool = False) -> tuple[Path, dict[str, torch.Tensor]]:
        path = resolve_weights(self.name, self.weights, OFFICIAL_FILE)
        state = read_state_dict(path, key="model", mmap=mmap)
        if not any(k.startswith("vae.") for k in state):
            vq_path = self._vqgan_file()
            if vq_path is None:
                raise WeightsError(f"{path}: has no vae.* tensors and no VQGAN {VQGAN_FILE} was found beside it; "
                                   f"pass --model-arg vqgan_weights=PATH (taming vqgan_imagenet_f16_1024 last.ckpt)")
            # taming's Lightning last.ckpt pickles callbacks and configs beside the tensors
            vq = vqgan_state_dict(read_training_checkpoint(vq_path, key="state_dict", mmap=mmap))
            state = {**state, **{f"vae.{k}": v for k, v in vq.items()}}
        return path, state

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From :class:`MAEVQGANConfig` (the ``config`` argument over the official defaults:
        ``img_size`` S, ``patch_size`` p, ``embed_dim`` d, ``decoder_embed_dim`` d', ``mlp_ratio``,
        the VQGAN's ``ch x ch_mult`` and ``n_embed``), per request with ``g = S / p``:
        ``A = b x (3 S^2 + max(block(3 g^2 / 4 + 1, d), block(g^2 + 1, d') + (g^2 + 1) n_embed,
        vqgan))``: the canvas, then the largest of the encoder over the visible patches and the
        class token, the decoder over all patches with its code logits, and the VQGAN decoding the
        codes to the S x S canvas (:func:`icl.models.memory.conv_pyramid_values` over ``ch x
        ch_mult``)."""
        cfg, vq = self.cfg, self.cfg.vqgan
        g = cfg.img_size // cfg.patch_size
        visible = g * g - (g // 2) ** 2 + 1
        encoder = block_values(visible, cfg.embed_dim, int(cfg.mlp_ratio * cfg.embed_dim))
        decoder = (block_values(g * g + 1, cfg.decoder_embed_dim, int(cfg.mlp_ratio * cfg.decoder_embed_dim))
                   + (g * g + 1) * vq.n_embed)
        vqgan = conv_pyramid_values([vq.ch * m for m in vq.ch_mult], cfg.img_size, cfg.img_size, decoder=True)
        values = 3 * cfg.img_size ** 2 + max(encoder, decoder, vqgan)
        return ActivationMemory(bytes_per_value * values,
                                f"mae-vqgan {cfg.img_size}px canvas, {visible} visible tokens, d={cfg.embed_dim}, "
                                f"VQGAN ch={vq.ch}x{list(vq.ch_mult)}")

    def canvas(self, req: AnalogyRequest) -> np.ndarray:
        """uint8 ``[S, S, 3]``: white, c_in top-left, c_out top-right, query bottom-left."""
        s, q = self.cfg.img_size, self.cfg.quadrant
        canvas = np.full((s, s, 3), 255, np.uint8)
        canvas[:q, :q] = resize_area(host_image(req.context_inputs[0]), (q, q))
        canvas[:q, s - q:] = resize_nearest(host_image(req.context_outputs[0]), (q, q))
        canvas[s - q:, :q] = resize_area(host_image(req.query), (q, q))
        return canvas

    def visible(self) -> torch.Tensor:
        """Indices (raster order) of the patches outside the bottom-right quadrant."""
        g = self.cfg.img_size // self.cfg.patch_size
        masked = torch.zeros(g, g, dtype=torch.bool)
        masked[g // 2:, g // 2:] = True
        return (~masked).flatten().nonzero().squeeze(1)

    def run_group(self, requests: Sequence[AnalogyRequest]) -> list[torch.Tensor]:
        dev, dt = torch.device(self.device), self.torch_dtype
        mean = torch.tensor(IMAGENET_MEAN, device=dev, dtype=dt)[None, :, None, None]
        std = torch.tensor(IMAGENET_STD, device=dev, dtype=dt)[None, :, None, None]
        x = (to_device_tensor([self.canvas(r) for r in requests], dev, dt) - mean) / std
        logits = self.net(x, self.visible().to(dev))
        g = self.cfg.img_size // self.cfg.patch_size
        codes = logits.float().argmax(-1).reshape(-1, g, g)
        decoded = self.net.vae.decode_codes(codes).float()  # [B, 3, S, S] in [0, 1]
        s, q = self.cfg.img_size, self.cfg.quadrant
        out = []
        for img, req in zip(decoded[:, :, s - q:, s - q:], requests):
            h, w = req.query.shape[:2]
            out.append(F.interpolate(img[None], size=(h, w), mode="bilinear", align_corners=False)[0].permute(1, 2, 0))
        return out
