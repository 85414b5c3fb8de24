"""Activation memory of one request, estimated from a model's configuration alone (never its
weights): what :meth:`icl.models.base.Adapter.activation_memory` returns and ``--check``'s
``peak(B) = W + B x A`` (:func:`icl.run.planning.check.memory_estimate`, docs/runs.md "Before a long run")
adds to the weights.

Each family counts the values that are alive at once at its peak, phase by phase (text encoder,
encoder, denoiser, decoder, ...: the phases run one after the other, so a request's estimate is
the largest phase plus what outlives the phases), with these shared building blocks:

- :func:`causal_lm_values`: a decoder language model generating with a key/value cache;
- :func:`block_values`: one pre-norm transformer block (ViT, CLIP, T5, DiT) at its peak;
- :func:`conv_pyramid_values`: a convolutional encoder or decoder (VQGAN, VAE, UNet levels).

Sizes are counted in values; the caller multiplies by the bytes of a value at the precision the
part runs at. The formulas target a CUDA device (fused attention kernels: no tokens x tokens
score matrix unless the model builds one itself); tests/run/planning/test_check_memory.py holds them
against the measured peak of each tiny family.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

CONTEXT_TOKENS = 4096  # the tokens per request assumed for a language model (a long ICL prompt), at most its own
# a convolution block at its peak holds its input, two intermediate maps (norm, activation, conv) and its
# output (the tiny VQGAN / VAE decoders measure 4-5.5 maps of their widest level)
CONV_LIVE_MAPS = 4


@dataclass(frozen=True)
class ActivationMemory:
    """One request's activation bytes at the precision asked (``bytes_per_request``), how they
    were counted (``basis``: the formula's inputs, one line) and, for language models, the
    tokens of a request the count assumes."""

    bytes_per_request: int
    basis: str
    tokens: Optional[int] = None


def read_config(path: Path) -> Optional[dict[str, Any]]:
    """The JSON object in ``path``, or None (absent, unreadable or not an object)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def first_int(config: dict[str, Any], *names: str) -> Optional[int]:
    """The first of ``names`` that ``config`` holds as a positive int (None when none)."""
    for n in names:
        v = config.get(n)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def causal_lm_values(tokens: int, hidden: int, layers: int, kv_hidden: int, intermediate: int) -> int:
    """A decoder LM over ``tokens`` positions: the key/value cache of every layer (``2 L h_kv``
    values per token) and one layer's working set (hidden state, its norm, the attention output
    and query: ``4 h``; the MLP's gate and up projections: ``2 I``):
    ``T x (2 L h_kv + 4 h + 2 I)``."""
    return tokens * (2 * layers * kv_hidden + 4 * hidden + 2 * intermediate)


def lm_config_values(text: dict[str, Any], tokens: int) -> Optional[tuple[int, str]]:
    """:func:`causal_lm_values` from a transformers text ``config.json`` (``hidden_size``,
    ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``,
    ``intermediate_size``; GPT-2 style names too): the values and the basis, or None when the
    configuration names no width and depth."""
    h = first_int(text, "hidden_size", "d_model", "n_embd")
    layers = first_int(text, "num_hidden_layers", "n_layer", "num_layers")
    if not (h and layers):
        return None
    heads = first_int(text, "num_attention_heads", "n_head") or 1
    kv = first_int(text, "num_key_value_heads") or heads
    inter = first_int(text, "intermediate_size", "n_inner") or 4 * h
    basis = f"T={tokens} tokens, h={h}, L={layers}, I={inter}"
    return causal_lm_values(tokens, h, layers, h * kv // heads, inter), basis


def block_values(tokens: int, width: int, mlp_width: int, heads: int = 0, score_copies: int = 0) -> int:
    """One pre-norm transformer block at its peak: the residual stream and its norm (``2 w``),
    then either the attention's query, key, value and output (``4 w``) or the MLP's hidden map
    and its activation (``2 m``): ``T x (2 w + max(4 w, 2 m))``. A block that builds its
    attention scores itself (eager attention) adds ``score_copies`` maps of ``heads x T x T``."""
    return tokens * (2 * width + max(4 * width, 2 * mlp_width)) + score_copies * heads * tokens * tokens


def conv_pyramid_values(channels: Sequence[int], height: int, width: int, decoder: bool) -> int:
    """A convolutional encoder or decoder whose level ``i`` runs at ``1 / 2^i`` of ``height x
    width`` with ``channels[i]`` channels: :data:`CONV_LIVE_MAPS` maps of its widest level. A
    level's maps also carry the channels of the level it is fed from (an encoder's level
    ``i - 1``, downsampled; a decoder's level ``i + 1``, upsampled), so level ``i`` counts
    ``max(c_i, c_from) x h_i x w_i``."""
    widest = 0
    for i, c in enumerate(channels):
        fed = channels[i + 1] if decoder and i + 1 < len(channels) else channels[i - 1] if not decoder and i else c
        widest = max(widest, max(c, fed) * max(height >> i, 1) * max(width >> i, 1))
    return CONV_LIVE_MAPS * widest


# --- diffusers components (config.json of a from_pretrained folder's subfolders) ----------------
def vae_values(vae: dict[str, Any], height: int, width: int, encode_images: int, decode_images: int) -> int:
    """A diffusers VAE (``vae/config.json``) encoding and decoding images of ``height x width``:
    the larger of its encoder and decoder phases, per image, plus the images. An
    ``AutoencoderKL`` (``block_out_channels``, encoder order) counts :func:`conv_pyramid_values`;
    Qwen-Image's causal 3D VAE (``base_dim x dim_mult``, ``num_res_blocks`` n) keeps a one-frame
    copy of every causal convolution's input until the image is done (its feature cache: two
    convolutions per residual block, n blocks a level encoding, n + 1 decoding) and pads each
    input to three frames, so it counts those copies, level by level, plus
    ``CONV_LIVE_MAPS + 2`` maps of its widest level."""
    channels = vae_channels(vae)
    pixels = 3 * height * width
    if not isinstance(vae.get("temperal_downsample"), list):
        encode = conv_pyramid_values(channels, height, width, decoder=False)
        decode = conv_pyramid_values(channels, height, width, decoder=True)
    else:
        blocks = first_int(vae, "num_res_blocks") or 2
        maps = [c * max(height >> i, 1) * max(width >> i, 1) for i, c in enumerate(channels)]
        def widest(decoder: bool) -> int:
            return (CONV_LIVE_MAPS + 2) * conv_pyramid_values(channels, height, width, decoder) // CONV_LIVE_MAPS

        encode = 2 * blocks * sum(maps) + widest(False)
        decode = 2 * (blocks + 1) * sum(maps) + widest(True)
    return max(encode_images * (encode + pixels), decode_images * (decode + pixels))


def vae_channels(vae: dict[str, Any]) -> list[int]:
    """The channels of a VAE's levels, full resolution first (AutoencoderKL's
    ``block_out_channels``; AutoencoderKLQwenImage's ``base_dim x dim_mult``)."""
    if isinstance(vae.get("block_out_channels"), list):
        return [int(c) for c in vae["block_out_channels"]]
    base, mult = first_int(vae, "base_dim") or 96, vae.get("dim_mult") or [1, 2, 4, 4]
    return [base * int(m) for m in mult]


def vae_scale(vae: dict[str, Any]) -> int:
    """Pixels per latent position along a side: ``2^(levels - 1)`` (AutoencoderKL); the number of
    spatial downsamplings for Qwen-Image's VAE (``len(temperal_downsample)``)."""
    if isinstance(vae.get("temperal_downsample"), list):
        return 2 ** len(vae["temperal_downsample"])
    return 2 ** (len(vae_channels(vae)) - 1)


def unet_values(unet: dict[str, Any], latent_h: int, latent_w: int, rows: int, controlnet: bool = False) -> int:
    """A diffusers ``UNet2DConditionModel`` (``unet/config.json``: ``block_out_channels``,
    ``layers_per_block``) on ``rows`` latent rows of ``latent_h x latent_w``: the skip
    connections the down path keeps for the up path (``layers_per_block + 1`` maps per level)
    plus the widest of a level's convolution (:data:`CONV_LIVE_MAPS` maps) and its transformer
    block (:func:`block_values` with GEGLU's doubled feed-forward, ``8 c``) at the level's
    tokens; a ControlNet keeps a second set of skips (its residuals)."""
    channels = [int(c) for c in unet.get("block_out_channels") or [320, 640, 1280, 1280]]
    per_level = (first_int(unet, "layers_per_block") or 2) + 1
    skips, work = 0, 0
    for i, c in enumerate(channels):
        tokens = max(latent_h >> i, 1) * max(latent_w >> i, 1)
        skips += per_level * c * tokens
        work = max(work, CONV_LIVE_MAPS * c * tokens, block_values(tokens, c, 8 * c))
    return rows * ((2 if controlnet else 1) * skips + work)


def dit_values(transformer: dict[str, Any], image_tokens: int, text_tokens: int) -> tuple[int, int]:
    """A diffusers MM-DiT (Flux, Qwen-Image: ``transformer/config.json`` ``num_attention_heads``
    x ``attention_head_dim`` = width ``w``): every token of the joint sequence through one
    block's working set (:func:`block_values`, MLP ``4 w``) plus the single-stream blocks'
    concatenation of attention and MLP outputs (``5 w``) and the rotary tables; returns
    ``(values, width)``."""
    heads = first_int(transformer, "num_attention_heads") or 24
    width = heads * (first_int(transformer, "attention_head_dim") or 128)
    tokens = image_tokens + text_tokens
    return block_values(tokens, width, 4 * width) + tokens * 5 * width, width


def t5_bytes(t5: dict[str, Any], tokens: int, bytes_per_value: int) -> int:
    """A T5 encoder (``text_encoder_2/config.json``: ``d_model``, ``d_ff``, ``num_heads``) over
    ``tokens`` T, the larger of its two peaks: the relative-position buckets, int64 and float32
    ``T x T`` maps whatever the dtype (about 13 four-byte values per pair at once, measured), and a
    block (:func:`block_values`, the gated feed-forward's ``d_ff`` maps counted twice) whose eager
    attention keeps three ``heads x T x T`` maps (the position bias, the scores, their softmax)."""
    d = first_int(t5, "d_model") or 4096
    heads = first_int(t5, "num_heads") or 64
    block = block_values(tokens, d, 2 * (first_int(t5, "d_ff") or 10240), heads, score_copies=3)
    return max(4 * 13 * tokens * tokens, bytes_per_value * block)
