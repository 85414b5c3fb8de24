"""Shared pieces of the Stable Diffusion based adapters (Prompt Diffusion, SD-VICL).

Loading a local ``from_pretrained`` folder (never a download), text encoding, the VAE round
trip, image resizing in and out and per-request generators. ``diffusers`` is imported only when
a model loads: importing it pulls in Triton, which must not happen before a test session has
chosen Triton's interpreter mode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import cv2
import numpy as np
import torch

from icl.models.memory import read_config
from icl.models.requests import AnalogyRequest
from icl.models.hub import DIFFUSERS_PATTERNS
from icl.models.weights import PathLike, WeightsError, resolve_weights

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
SD_PARTS = ("unet", "vae", "text_encoder", "tokenizer", "scheduler")


def check_range(name: str, value: float, low: float, high: float = float("inf")) -> None:
    if not low <= value <= high:
        raise ValueError(f"model argument {name}: expected a value in [{low}, {high}], got {value!r}")


def resolve_sd_folder(model: str, weights: Optional[PathLike]) -> Path:
    """The Stable Diffusion ``from_pretrained`` folder (``model_index.json`` and the parts
    ``unet/ vae/ text_encoder/ tokenizer/ scheduler/``); a clear error names what is missing."""
    folder = resolve_weights(model, weights, "model_index.json", DIFFUSERS_PATTERNS)
    folder = folder.parent if folder.is_file() else folder
    missing = [part for part in SD_PARTS if not (folder / part).is_dir()]
    if missing:
        raise WeightsError(f"{model}: {folder} is not a Stable Diffusion from_pretrained folder: missing "
                           f"{', '.join(p + '/' for p in missing)}; docs/models-diffusion.md lists the official folders")
    return folder


def sd_architectures(folder: Path) -> list[Any]:
    """The networks :func:`load_sd` loads from ``folder`` (UNet, VAE, CLIP text encoder)."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextModel

    from icl.models.base import Architecture

    return [Architecture(folder / "unet", UNet2DConditionModel), Architecture(folder / "vae", AutoencoderKL),
            Architecture(folder / "text_encoder", CLIPTextModel)]


def load_sd(folder: Path, device: str, dtype: torch.dtype) -> dict[str, Any]:
    """UNet, VAE, CLIP text encoder and tokenizer from ``folder`` (local files only, each
    strictly: a missing or unexpected key is a ``WeightsError`` naming the subfolder), read at
    ``dtype``, in eval mode on ``device``; the scheduler configuration as a dict."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from diffusers.models.attention_processor import AttnProcessor2_0
    from transformers import CLIPTextModel, CLIPTokenizer

    from icl.models.vicl._load import load_pretrained

    unet = load_pretrained(UNet2DConditionModel, folder / "unet", "Stable Diffusion UNet", dtype=dtype)
    unet.set_attn_processor(AttnProcessor2_0())  # SDPA everywhere
    parts: dict[str, Any] = {
        "unet": unet,
        "vae": load_pretrained(AutoencoderKL, folder / "vae", "Stable Diffusion VAE", dtype=dtype),
        "text_encoder": load_pretrained(CLIPTextModel, folder / "text_encoder", "CLIP text encoder", dtype=dtype),
        "tokenizer": CLIPTokenizer.from_pretrained(folder / "tokenizer", local_files_only=True),
        "scheduler_config": scheduler_config(folder),
    }
    for key in ("unet", "vae", "text_encoder"):
        parts[key].to(device).eval().requires_grad_(False)
    return parts


def sd_configs(folder: Path) -> Optional[tuple[dict[str, Any], dict[str, Any]]]:
    """The UNet's and the VAE's ``config.json`` of a Stable Diffusion folder (None when either
    is unreadable)."""
    unet, vae = read_config(folder / "unet" / "config.json"), read_config(folder / "vae" / "config.json")
    return None if unet is None or vae is None else (unet, vae)


def unet_heads(unet: dict[str, Any]) -> int:
    """The attention heads of the UNet's full-resolution level: ``num_attention_heads``, else
    ``attention_head_dim`` (diffusers' legacy name for the head count in SD 1.x configs)."""
    value = unet.get("num_attention_heads") or unet.get("attention_head_dim") or 8
    return int(value[0] if isinstance(value, list) else value)


def scheduler_config(folder: Path) -> dict[str, Any]:
    from diffusers import DDIMScheduler

    return dict(DDIMScheduler.load_config(folder, subfolder="scheduler", local_files_only=True))


SCHEDULERS = ("ddim", "pndm", "ddpm", "unipc", "euler-ancestral")


def make_scheduler(name: str, config: dict[str, Any]) -> Any:
    """A fresh scheduler (they keep per-run state) of kind ``name`` from the folder's config."""
    import diffusers

    classes = {"ddim": diffusers.DDIMScheduler, "pndm": diffusers.PNDMScheduler, "ddpm": diffusers.DDPMScheduler,
               "unipc": diffusers.UniPCMultistepScheduler, "euler-ancestral": diffusers.EulerAncestralDiscreteScheduler}
    if name not in classes:
        raise ValueError(f"model argument scheduler: expected one of {', '.join(SCHEDULERS)}, got {name!r}")
    return classes[name].from_config(config)


@torch.inference_mode()
def encode_text(tokenizer: Any, text_encoder: Any, texts: Sequence[str], device: str) -> torch.Tensor:
    """CLIP last hidden states ``[len(texts), 77, D]`` (padded to the tokenizer's maximum length)."""
    ids = tokenizer(list(texts), padding="max_length", max_length=tokenizer.model_max_length, truncation=True,
                    return_tensors="pt").input_ids
    return text_encoder(ids.to(device))[0]


def resize_square(image: np.ndarray, size: int) -> np.ndarray:
    """uint8 ``[H, W, 3]`` -> ``[size, size, 3]`` (area when shrinking, Lanczos when enlarging,
    as ControlNet's own input resizing does)."""
    h, w = image.shape[:2]
    if (h, w) == (size, size):
        return image
    shrink = size * size < h * w
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LANCZOS4)


def images_to_tensor(images: Sequence[np.ndarray], size: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """uint8 ``[H, W, 3]`` images -> float ``[N, 3, size, size]`` in [0, 1] on ``device``."""
    arr = np.stack([resize_square(im, size) for im in images])
    return torch.from_numpy(arr).to(device).permute(0, 3, 1, 2).to(dtype) / 255


@torch.inference_mode()
def vae_encode(vae: Any, images01: torch.Tensor) -> torch.Tensor:
    """[N, 3, H, W] in [0, 1] -> scaled latents (the posterior mode: no random draw)."""
    latents = vae.encode((images01 * 2 - 1).to(vae.dtype)).latent_dist.mode()
    return latents.float() * vae.config.scaling_factor


@torch.inference_mode()
def vae_decode(vae: Any, latents: torch.Tensor) -> torch.Tensor:
    """Scaled latents -> float32 ``[N, 3, H, W]`` images in [0, 1]."""
    images = vae.decode((latents / vae.config.scaling_factor).to(vae.dtype)).sample
    return ((images.float() + 1) / 2).clamp(0, 1)


def resize_back(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """float ``[3, S, S]`` -> float32 ``[h, w, 3]`` in [0, 1] at the query's size (bilinear,
    antialiased when shrinking)."""
    h, w = size
    if tuple(image.shape[-2:]) != (h, w):
        shrink = h * w < image.shape[-1] * image.shape[-2]
        image = torch.nn.functional.interpolate(image[None].float(), size=(h, w), mode="bilinear",
                                                align_corners=False, antialias=shrink)[0].clamp(0, 1)
    return image.permute(1, 2, 0).float().contiguous()


def generator(seed: int) -> torch.Generator:
    """The request's own CPU generator: draws do not depend on the device, batch or order."""
    if not 0 <= int(seed) < 1 << 64:
        raise ValueError(f"request seed must be in [0, 2**64), got {seed!r}")
    return torch.Generator("cpu").manual_seed(int(seed))


def check_requests(model: str, requests: Sequence[Any], min_shots: int = 1) -> None:
    """Every request is an AnalogyRequest with uint8 [H, W, 3] numpy images and enough shots."""
    for i, req in enumerate(requests):
        if not isinstance(req, AnalogyRequest):
            raise TypeError(f"{model}: request {i} is {type(req).__name__}, expected AnalogyRequest")
        where = f"{model}: request {i} ({req.task}/{req.dataset}/{req.query_id})"
        if req.shots < min_shots or len(req.context_outputs) != req.shots:
            raise ValueError(f"{where}: needs {min_shots}+ context pairs with as many outputs as inputs, "
                             f"got {req.shots} inputs and {len(req.context_outputs)} outputs")
        images = [("query", req.query)] + [(f"context_inputs[{k}]", im) for k, im in enumerate(req.context_inputs)] \
            + [(f"context_outputs[{k}]", im) for k, im in enumerate(req.context_outputs)]
        for label, im in images:
            if not (isinstance(im, np.ndarray) and im.dtype == np.uint8 and im.ndim == 3 and im.shape[2] == 3
                    and im.shape[0] > 0 and im.shape[1] > 0):
                desc = f"{type(im).__name__} {getattr(im, 'dtype', '')} {getattr(im, 'shape', '')}"
                raise ValueError(f"{where}: {label} must be a uint8 numpy [H, W, 3] image, got {desc}")
