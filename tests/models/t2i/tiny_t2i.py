"""Tiny random generators and judges, built with the real diffusers / transformers classes and
their official parameter names, saved as real ``from_pretrained`` folders. Test-only: nothing
here is downloaded.

- Stable Diffusion: the layout of the runwayml/stable-diffusion-v1-5 release
  (``model_index.json``, ``unet/ vae/ text_encoder/ tokenizer/ scheduler/``; the tokenizer as
  CLIP's ``vocab.json`` + ``merges.txt``; the release's PNDM scheduler settings, read from its
  ``scheduler/scheduler_config.json``), with tiny UNet / VAE / CLIP text encoder widths.
- Janus: ``JanusForConditionalGeneration`` + ``JanusProcessor`` as transformers'
  ``models/janus/convert_janus_weights_to_hf.py`` writes them (its chat template, the
  ``<image_placeholder>`` / ``<begin_of_image>`` / ``<end_of_image>`` tokens, generation config
  ``guidance_scale=5``, ``temperature=1``, ``boi_token_id``), at 64 px with 16 image tokens
  (the official 384 px / 16 px patches / 576 tokens ratio of VQ downsampling 16).
- CLIP / SigLIP: ``CLIPModel`` / ``SiglipModel`` with their processors.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch

from icl.data.seeds import derive_seed

# runwayml/stable-diffusion-v1-5 scheduler/scheduler_config.json (PNDMScheduler)
SD15_SCHEDULER = dict(beta_end=0.012, beta_schedule="scaled_linear", beta_start=0.00085, clip_sample=False,
                      num_train_timesteps=1000, set_alpha_to_one=False, skip_prk_steps=True, steps_offset=1,
                      trained_betas=None)


def _init(cls_or_fn, seed: int, what: str, *args, **kwargs):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "tiny-t2i", "*", "*", what) % (1 << 63))
        return cls_or_fn(*args, **kwargs)


def clip_tokenizer_files(folder: Path, max_length: int = 16) -> Path:
    """CLIP's tokenizer folder as the SD 1.5 release ships it: ``vocab.json`` (byte-level
    symbols and ``</w>`` word ends, the two specials last), ``merges.txt`` with its
    ``#version`` header, ``tokenizer_config.json`` and ``special_tokens_map.json``; lower-case
    letters, digits and punctuation, no merges (every word splits into characters)."""
    chars = list(string.ascii_lowercase + string.digits + ".,:;'?!-")
    vocab: dict[str, int] = {}
    for c in chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"]:
        vocab.setdefault(c, len(vocab))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "CLIPTokenizer", "model_max_length": max_length, "do_lower_case": True,
         "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
         "unk_token": "<|endoftext|>"}))
    (folder / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
         "unk_token": "<|endoftext|>"}))
    return folder


def clip_tokenizer(folder: Path, max_length: int = 16):
    from transformers import CLIPTokenizer

    return CLIPTokenizer.from_pretrained(clip_tokenizer_files(folder, max_length))


def build_sd(path: Path, seed: int = 0, sample_size: int = 8) -> Path:
    """A Stable Diffusion 1.5-layout folder: 16 x 16 px images by default (latent 8, VAE x2)."""
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    tok = clip_tokenizer(path / "_bpe")
    unet = _init(UNet2DConditionModel, seed, "unet", sample_size=sample_size, in_channels=4, out_channels=4,
                 down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), block_out_channels=(8, 16),
                 layers_per_block=1, cross_attention_dim=16, attention_head_dim=2, norm_num_groups=4)
    vae = _init(AutoencoderKL, seed, "vae", in_channels=3, out_channels=3,
                down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
                up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), block_out_channels=(8, 8),
                latent_channels=4, norm_num_groups=4, sample_size=2 * sample_size, layers_per_block=1)
    specials = tok.convert_tokens_to_ids(["<|startoftext|>", "<|endoftext|>"])
    text = CLIPTextConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                          num_attention_heads=2, max_position_embeddings=16, projection_dim=16,
                          bos_token_id=specials[0], eos_token_id=specials[1], pad_token_id=specials[1])
    encoder = _init(CLIPTextModel, seed, "text", text)
    pipe = StableDiffusionPipeline(unet=unet, vae=vae, text_encoder=encoder, tokenizer=tok,
                                   scheduler=PNDMScheduler.from_config(SD15_SCHEDULER), safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(path)
    # the release ships CLIP's vocab.json + merges.txt, not a tokenizers JSON
    (path / "tokenizer" / "tokenizer.json").unlink(missing_ok=True)
    clip_tokenizer_files(path / "tokenizer")
    return path
