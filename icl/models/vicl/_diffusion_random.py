"""Randomly initialised Stable Diffusion folders (``from_pretrained`` layout) for tests and benchmarks.

``write_random_sd_folder(path, scale)`` writes ``unet/``, ``vae/``, ``text_encoder/``,
``tokenizer/``, ``scheduler/`` and ``model_index.json`` (and ``controlnet/`` with the Prompt
Diffusion ControlNet when asked), so the adapters load it through their real loading path.
``scale="tiny"`` is a few-channel model that runs in milliseconds on a CPU; ``scale="full"`` has
the Stable Diffusion 1.5 (and Prompt Diffusion ControlNet) shapes, for throughput on a GPU.
Weights are drawn from a generator seeded by ``derive_seed`` (never a global RNG).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

import torch

from icl.data.seeds import derive_seed

PathLike = Union[str, Path]

# Stable Diffusion 1.5's scheduler configuration (the folder's scheduler/scheduler_config.json)
SD15_SCHEDULER = {
    "_class_name": "PNDMScheduler",
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "trained_betas": None,
    "clip_sample": False,
}

_TOKENS = ["<|startoftext|>", "<|endoftext|>"] + [c for c in "abcdefghijklmnopqrstuvwxyz,"] + \
    [c + "</w>" for c in "abcdefghijklmnopqrstuvwxyz,"]


def _unet_config(scale: str) -> dict[str, Any]:
    if scale == "full":
        return dict(sample_size=64, in_channels=4, out_channels=4, layers_per_block=2,
                    block_out_channels=(320, 640, 1280, 1280), cross_attention_dim=768, attention_head_dim=8,
                    down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
                    up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3)
    return dict(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(8, 16),
                cross_attention_dim=16, attention_head_dim=2, norm_num_groups=4,
                # attention at both levels: the decoder has self-attention at full and half latent size
                down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
                up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D"))


def _vae_config(scale: str) -> dict[str, Any]:
    if scale == "full":
        return dict(in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2, sample_size=512,
                    block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
                    up_block_types=("UpDecoderBlock2D",) * 4)
    # four blocks: the downsampling factor 8 of Stable Diffusion, which ControlNet's conditioning
    # embedding (three stride-2 convolutions) assumes
    return dict(in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1, sample_size=64,
                block_out_channels=(8, 8, 8, 8), norm_num_groups=4, down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4)


def _text_config(scale: str) -> dict[str, Any]:
    if scale == "full":
        return dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                    num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
                    bos_token_id=0, eos_token_id=1, pad_token_id=1)
    return dict(vocab_size=len(_TOKENS), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=2, max_position_embeddings=77, hidden_act="quick_gelu",
                bos_token_id=0, eos_token_id=1, pad_token_id=1)


def _write_tokenizer(folder: Path) -> None:
    """A character-level CLIP BPE vocabulary (no merges): enough to tokenise lowercase prompts."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps({tok: i for i, tok in enumerate(_TOKENS)}), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "CLIPTokenizer", "model_max_length": 77, "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "do_lower_case": True}), encoding="utf-8")


def _randomise(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Weights ~ N(0, 1/fan_in), biases ~ N(0, 0.02^2), norms left at (1, 0): ControlNet's zero
    convolutions would otherwise make it a no-op, and no test could see the conditioning."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, (torch.nn.GroupNorm, torch.nn.LayerNorm)):
                continue
            for p in sub.parameters(recurse=False):
                noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
                scale = 1.0 / p[0].numel() ** 0.5 if p.dim() >= 2 else 0.02
                p.copy_((noise * scale).to(p.dtype))


def write_random_sd_folder(path: PathLike, scale: str = "tiny", *, controlnet: bool = False,
                           dtype: torch.dtype = torch.float32, device: str = "cpu", seed: int = 0) -> Path:
    """Write a randomly initialised Stable Diffusion folder at ``path`` and return it.

    ``controlnet=True`` adds ``controlnet/`` holding the Prompt Diffusion ControlNet (6-channel
    example-pair conditioning plus the 3-channel query conditioning). ``device`` is where the
    modules are built (a GPU builds full-size ones in seconds); files are safetensors in ``dtype``.
    """
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from icl.models.vicl._diffusion_controlnet import PromptDiffusionControlNetModel

    if scale not in ("tiny", "full"):
        raise ValueError(f"scale must be 'tiny' or 'full', got {scale!r}")
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(derive_seed(seed, "random-sd", scale, "*", "weights") % (1 << 63))
    with torch.device(device):
        unet = UNet2DConditionModel(**_unet_config(scale))
        vae = AutoencoderKL(**_vae_config(scale))
        text = CLIPTextModel(CLIPTextConfig(**_text_config(scale)))
        modules: dict[str, Any] = {"unet": unet, "vae": vae, "text_encoder": text}
        if controlnet:
            embed = (16, 32, 96, 256) if scale == "full" else (4, 8, 8, 8)
            modules["controlnet"] = PromptDiffusionControlNetModel.from_unet(
                unet, conditioning_channels=6, conditioning_embedding_out_channels=embed)
    for sub, module in modules.items():
        if scale == "tiny":
            _randomise(module, gen)
        module.to(dtype).save_pretrained(root / sub, safe_serialization=True)
    _write_tokenizer(root / "tokenizer")
    (root / "scheduler").mkdir(exist_ok=True)
    (root / "scheduler" / "scheduler_config.json").write_text(json.dumps(SD15_SCHEDULER), encoding="utf-8")
    index = {"_class_name": "StableDiffusionPipeline", "unet": ["diffusers", "UNet2DConditionModel"],
             "vae": ["diffusers", "AutoencoderKL"], "text_encoder": ["transformers", "CLIPTextModel"],
             "tokenizer": ["transformers", "CLIPTokenizer"], "scheduler": ["diffusers", "PNDMScheduler"]}
    (root / "model_index.json").write_text(json.dumps(index), encoding="utf-8")
    return root
