"""The taming-transformers VQGAN (Esser et al. 2021) as used by MAE-VQGAN, LVM and DeLVM.

Module and parameter names follow taming's ``VQModel`` (``encoder``, ``decoder``,
``quantize.embedding``, ``quant_conv``, ``post_quant_conv``; inside the coders ``conv_in``,
``down.{i}.block.{j}``, ``down.{i}.attn.{j}``, ``down.{i}.downsample.conv``, ``mid.block_1``,
``mid.attn_1``, ``mid.block_2``, ``up.{i}.block.{j}``, ``up.{i}.upsample.conv``, ``norm_out``,
``conv_out``), which open-muse's ``VQGANModel`` (LVM's and DeLVM's tokenizer) shares, so both
families' checkpoints load into this one definition. They differ in three places, each a
config field: pixel range (taming's ``imagenet_f16_1024`` works on [-1, 1], the muse tokenizer
on [0, 1]: ``pixel_range``); open-muse's ``no_attn_mid_block`` (the middle blocks without
``mid.attn_1``, as in LVM's published tokenizer ``Emma02/vqvae_ckpts``: channel_mult
[1, 2, 2, 4, 6], attn_resolutions [], z 64, 8192 codes); and open-muse's level attention,
applied only when a level has more than one attention block (``if len(self.attn) > 1`` in
``DownsamplingBlock.forward`` / ``UpsamplingBlock.forward``, ytongbai/LVM
``evaluation/vqlm_demo/vqvae_muse.py``), where taming applies every one (``attn_min_blocks``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, cast

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class VQGANConfig:
    """Architecture of a taming/muse VQGAN. Defaults: taming ``vqgan_imagenet_f16_1024``
    (``model.yaml``: ch 128, ch_mult 1,1,2,2,4, 2 res blocks, attention at 16 px, z 256)."""

    resolution: int = 256
    in_channels: int = 3
    out_ch: int = 3
    ch: int = 128
    ch_mult: tuple[int, ...] = (1, 1, 2, 2, 4)
    num_res_blocks: int = 2
    attn_resolutions: tuple[int, ...] = (16,)
    z_channels: int = 256
    n_embed: int = 1024
    embed_dim: int = 256
    pixel_range: str = "minus_one_one"  # or "zero_one" (open-muse)
    norm_groups: int = 32
    mid_attention: bool = True  # False: open-muse's no_attn_mid_block
    attn_min_blocks: int = 1  # a level's attention runs when it has at least this many (open-muse: 2)

    @property
    def factor(self) -> int:
        """Downsampling factor (16 for the f16 models)."""
        return 2 ** (len(self.ch_mult) - 1)


def _norm(channels: int, groups: int) -> nn.GroupNorm:
    return nn.GroupNorm(num_groups=groups, num_channels=channels, eps=1e-6, affine=True)


class ResnetBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.norm1 = _norm(in_channels, groups)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm2 = _norm(out_channels, groups)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        if in_channels != out_channels:
            self.nin_shortcut = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        skip = self.nin_shortcut(x) if hasattr(self, "nin_shortcut") else x
        return skip + h


class AttnBlock(nn.Module):
    """Single-head self-attention over the pixels (1x1 convolutions q, k, v, proj_out)."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = _norm(channels, groups)
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)
        self.proj_out = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        n = self.norm(x)
        q, k, v = (t.reshape(b, 1, c, h * w).transpose(2, 3) for t in (self.q(n), self.k(n), self.v(n)))
        out = F.scaled_dot_product_attention(q, k, v)  # scale c ** -0.5, as taming
        return x + self.proj_out(out.transpose(2, 3).reshape(b, c, h, w))


class Downsample(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 0, 1)))  # taming pads right and bottom only


class Upsample(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class _Level(nn.Module):
    """One resolution: ``block`` (res blocks), ``attn`` (attention after each, at attention
    resolutions) and an optional ``downsample``/``upsample``."""

    def __init__(self, blocks: Sequence[nn.Module], attns: Sequence[nn.Module], attn_min_blocks: int):
        super().__init__()
        self.block = nn.ModuleList(blocks)
        self.attn = nn.ModuleList(attns)
        self.use_attn = len(attns) >= max(1, attn_min_blocks)

    def run(self, x: torch.Tensor) -> torch.Tensor:
        for i, blk in enumerate(self.block):
            x = blk(x)
            if self.use_attn:
                x = self.attn[i](x)
        return x


class _Mid(nn.Module):
    def __init__(self, channels: int, groups: int, attention: bool = True):
        super().__init__()
        self.block_1 = ResnetBlock(channels, channels, groups)
        if attention:
            self.attn_1 = AttnBlock(channels, groups)
        self.block_2 = ResnetBlock(channels, channels, groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block_1(x)
        attn = getattr(self, "attn_1", None)
        if isinstance(attn, nn.Module):
            x = attn(x)
        return self.block_2(x)


class Encoder(nn.Module):
    def __init__(self, cfg: VQGANConfig):
        super().__init__()
        g = cfg.norm_groups
        self.conv_in = nn.Conv2d(cfg.in_channels, cfg.ch, 3, padding=1)
        in_mult = (1,) + tuple(cfg.ch_mult)
        res = cfg.resolution
        self.down = nn.ModuleList()
        block_in = cfg.ch
        for i, mult in enumerate(cfg.ch_mult):
            block_in, block_out = cfg.ch * in_mult[i], cfg.ch * mult
            blocks: list[nn.Module] = []
            attns: list[nn.Module] = []
            for _ in range(cfg.num_res_blocks):
                blocks.append(ResnetBlock(block_in, block_out, g))
                block_in = block_out
                if res in cfg.attn_resolutions:
                    attns.append(AttnBlock(block_in, g))
            level = _Level(blocks, attns, cfg.attn_min_blocks)
            if i != len(cfg.ch_mult) - 1:
                level.downsample = Downsample(block_in)
                res //= 2
            self.down.append(level)
        self.mid = _Mid(block_in, g, cfg.mid_attention)
        self.norm_out = _norm(block_in, g)
        self.conv_out = nn.Conv2d(block_in, cfg.z_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for level in cast("list[_Level]", self.down):  # a ModuleList of levels
            h = level.run(h)
            down = getattr(level, "downsample", None)
            if isinstance(down, nn.Module):
                h = down(h)
        h = self.mid(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class Decoder(nn.Module):
    def __init__(self, cfg: VQGANConfig):
        super().__init__()
        g = cfg.norm_groups
        block_in = cfg.ch * cfg.ch_mult[-1]
        res = cfg.resolution // cfg.factor
        self.conv_in = nn.Conv2d(cfg.z_channels, block_in, 3, padding=1)
        self.mid = _Mid(block_in, g, cfg.mid_attention)
        levels: list[_Level] = []
        for i in reversed(range(len(cfg.ch_mult))):
            block_out = cfg.ch * cfg.ch_mult[i]
            blocks = []
            attns = []
            for _ in range(cfg.num_res_blocks + 1):
                blocks.append(ResnetBlock(block_in, block_out, g))
                block_in = block_out
                if res in cfg.attn_resolutions:
                    attns.append(AttnBlock(block_in, g))
            level = _Level(blocks, attns, cfg.attn_min_blocks)
            if i != 0:
                level.upsample = Upsample(block_in)
                res *= 2
            levels.insert(0, level)  # up[i] is resolution level i, as in taming
        self.up = nn.ModuleList(levels)
        self.norm_out = _norm(block_in, g)
        self.conv_out = nn.Conv2d(block_in, cfg.out_ch, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.mid(self.conv_in(z))
        for level in reversed(cast("list[_Level]", self.up)):  # a ModuleList of levels
            h = level.run(h)
            up = getattr(level, "upsample", None)
            if isinstance(up, nn.Module):
                h = up(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class VectorQuantizer(nn.Module):
    def __init__(self, n_embed: int, embed_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(n_embed, embed_dim)

    def codes(self, z: torch.Tensor) -> torch.Tensor:
        """Nearest codebook entry per position: ``[B, C, h, w]`` -> int64 ``[B, h, w]``.
        Squared distances in float32 (ties to the lower index, as ``argmin``)."""
        b, c, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, c).float()
        book = self.embedding.weight.float()
        d = (flat * flat).sum(1, keepdim=True) - 2 * flat @ book.t() + (book * book).sum(1)[None]
        return d.argmin(1).reshape(b, h, w)

    def entries(self, codes: torch.Tensor) -> torch.Tensor:
        """Codebook vectors of int ``[B, h, w]`` codes as ``[B, C, h, w]``."""
        return self.embedding(codes).permute(0, 3, 1, 2)


class VQGAN(nn.Module):
    """Encoder, quantizer and decoder; images in and out are float ``[B, 3, H, W]`` in [0, 1]."""

    def __init__(self, cfg: VQGANConfig = VQGANConfig()):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.quantize = VectorQuantizer(cfg.n_embed, cfg.embed_dim)
        self.quant_conv = nn.Conv2d(cfg.z_channels, cfg.embed_dim, 1)
        self.post_quant_conv = nn.Conv2d(cfg.embed_dim, cfg.z_channels, 1)

    def encode_codes(self, images: torch.Tensor) -> torch.Tensor:
        """Float ``[B, 3, H, W]`` in [0, 1] -> int64 codes ``[B, H / f, W / f]``."""
        x = images * 2 - 1 if self.config.pixel_range == "minus_one_one" else images
        return self.quantize.codes(self.quant_conv(self.encoder(x.to(self.quant_conv.weight.dtype))))

    def decode_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """Int codes ``[B, h, w]`` -> float ``[B, 3, h * f, w * f]`` in [0, 1] (clamped)."""
        x = self.decoder(self.post_quant_conv(self.quantize.entries(codes)))
        if self.config.pixel_range == "minus_one_one":
            x = (x.clamp(-1, 1) + 1) / 2
        return x.clamp(0, 1)


def vqgan_state_dict(state: dict[str, torch.Tensor], prefix: str = "") -> dict[str, torch.Tensor]:
    """The VQGAN's tensors from a checkpoint's state dict: keys under ``prefix``, without it;
    taming's training-only ``loss.*`` (discriminator, LPIPS) dropped."""
    out = {}
    for k, v in state.items():
        if not k.startswith(prefix):
            continue
        name = k[len(prefix):]
        if name.startswith("loss."):
            continue
        out[name] = v
    return out


def config_from_muse(cfg: dict[str, Any]) -> VQGANConfig:
    """A :class:`VQGANConfig` from open-muse's ``config.json`` (``VQGANModel`` arguments)."""
    names = {"resolution": "resolution", "num_channels": "in_channels", "hidden_channels": "ch",
             "channel_mult": "ch_mult", "num_res_blocks": "num_res_blocks", "attn_resolutions": "attn_resolutions",
             "z_channels": "z_channels", "num_embeddings": "n_embed", "quantized_embed_dim": "embed_dim"}
    kwargs: dict[str, Any] = {"pixel_range": "zero_one", "attn_min_blocks": 2,
                              "mid_attention": not cfg.get("no_attn_mid_block", False)}
    for src, dst in names.items():
        if src in cfg:
            value = cfg[src]
            kwargs[dst] = tuple(value) if isinstance(value, list) else value
    kwargs["out_ch"] = kwargs.get("in_channels", 3)
    # open-muse arguments with no counterpart here must keep their defaults (else refuse, never ignore)
    fixed = {"resample_with_conv": True}  # (dropout is inactive at inference)
    odd = [f"{k}={cfg[k]!r}" for k, v in fixed.items() if k in cfg and cfg[k] != v]
    if odd:
        raise ValueError(f"open-muse config: {', '.join(odd)} is not supported (expected {fixed})")
    return VQGANConfig(**kwargs)

