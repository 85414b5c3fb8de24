"""Prompt Diffusion (Wang et al., NeurIPS 2023; Zhendong-Wang/Prompt-Diffusion) as an adapter.

Stable Diffusion 1.5 with a ControlNet that takes the example pair (context input and output,
stacked along channels) and the query image, plus a text prompt. Every image is resized to
``resolution`` squared (512, the training size), scaled to [-1, 1] as in the official training
and inference code, and the generated image is resized back to the query's size.

K-shot: the ControlNet takes one example pair; only the first context pair is used.

Defaults follow the official inference notebook (DDIM, 100 steps, eta 0, guidance 9.0,
control strength 1.0, its negative prompt); the prompt itself is empty because the visual
benchmark prompts models with images only (paper, section 4.1), and so is the notebook's added
text (``a_prompt`` ", best quality, extremely detailed"): ``added_prompt=official`` (or any
text) turns it on.

Batched along the UNet batch dimension: each request draws its initial latents from its own
generator seeded with ``request.seed`` (stochastic schedulers draw their step noise from the
same generator), so an answer does not depend on its batch or order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from icl.models.base import PRECISIONS, Adapter
from icl.models.memory import (CONV_LIVE_MAPS, ActivationMemory, read_config, unet_values, vae_channels, vae_scale,
                               vae_values)
from icl.models.vicl._torch import compile_option, compiled, dtype_option
from icl.models.requests import AnalogyRequest
from icl.models.vicl import _diffusion_sd as sd
from icl.models.hub import is_hub_ref
from icl.models.weights import PathLike, WeightsError, resolve_weights

OFFICIAL_ADDED_PROMPT = "best quality, extremely detailed"
OFFICIAL_NEGATIVE_PROMPT = ("longbody, lowres, bad anatomy, bad hands, missing fingers, extra digit, fewer digits, "
                            "cropped, worst quality, low quality")


# "signed": [-1, 1], as the official training data loader and notebook feed the ControlNet;
# "unit": [0, 1], as the diffusers port's pipeline does
CONDITION_RANGES = ("signed", "unit")


class PromptDiffusion(Adapter):
    """Prompt Diffusion: ``weights`` is a Stable Diffusion 1.5 ``from_pretrained`` folder (the
    official ``zhendongw/prompt-diffusion-diffusers`` holds it), ``controlnet`` the Prompt
    Diffusion ControlNet folder (default: ``<weights>/controlnet``). Answers float32
    ``[h, w, 3]`` tensors in [0, 1] on the model's device, at the query's size."""

    name = "prompt-diffusion"
    version = "2"

    def __init__(self, weights: Optional[PathLike] = None, controlnet: Optional[PathLike] = None,
                 steps: int = 100, guidance_scale: float = 9.0, scheduler: str = "ddim", eta: float = 0.0,
                 prompt: str = "", added_prompt: str = "",
                 negative_prompt: str = OFFICIAL_NEGATIVE_PROMPT, control_strength: float = 1.0,
                 condition_range: str = "signed", resolution: int = 512, precision: str = "fp32",
                 batch_size: int = 4, dtype: Optional[str] = None, compile: Any = False) -> None:
        if added_prompt == "official":
            added_prompt = OFFICIAL_ADDED_PROMPT
        self.dtype_arg = dtype_option(self.name, dtype)  # wins over precision, as on every neural adapter
        self.compile = compile_option(compile)
        self.weights, self.controlnet = weights, controlnet
        self.steps, self.guidance_scale, self.eta = int(steps), float(guidance_scale), float(eta)
        self.scheduler, self.control_strength, self.resolution = str(scheduler), float(control_strength), int(resolution)
        self.prompt, self.added_prompt, self.negative_prompt = str(prompt), str(added_prompt), str(negative_prompt)
        self.precision, self.batch_size = str(precision), int(batch_size)
        self.condition_range = str(condition_range)
        if self.condition_range not in CONDITION_RANGES:
            raise ValueError(f"model argument condition_range: expected one of {', '.join(CONDITION_RANGES)}, "
                             f"got {condition_range!r}")
        sd.check_range("steps", self.steps, 1, 1000)
        sd.check_range("guidance_scale", self.guidance_scale, 0.0)
        sd.check_range("eta", self.eta, 0.0, 1.0)
        sd.check_range("batch_size", self.batch_size, 1)
        if self.resolution < 64 or self.resolution % 64:
            raise ValueError(f"model argument resolution: expected a multiple of 64, got {resolution!r}")
        if self.scheduler not in sd.SCHEDULERS:
            raise ValueError(f"model argument scheduler: expected one of {', '.join(sd.SCHEDULERS)}, got {scheduler!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"model argument precision: expected one of {PRECISIONS}, got {precision!r}")

    # --- weights -----------------------------------------------------------------------------
    def _folders(self) -> tuple[Path, Path]:
        base = sd.resolve_sd_folder(self.name, self.weights)
        if self.controlnet is None:
            control = base / "controlnet"
        elif is_hub_ref(self.controlnet):  # its own Hub reference, resolved like any weights
            found = resolve_weights(self.name, str(self.controlnet), "config.json", argument="controlnet")  # one model folder
            control = found.parent if found.is_file() else found
        else:
            control = Path(self.controlnet).expanduser()
        if not (control / "config.json").is_file():
            raise WeightsError(f"{self.name}: no Prompt Diffusion ControlNet folder at {control} (config.json "
                               f"missing); pass --model-arg controlnet=DIR (the official folder 'controlnet/' of "
                               f"zhendongw/prompt-diffusion-diffusers, see docs/models-diffusion.md; or "
                               f"controlnet=hf:ORG/NAME[@REVISION]/controlnet)")
        return base, control

    def weight_files(self) -> Sequence[Path]:
        return self._folders()

    def architectures(self) -> Sequence[Any]:
        from icl.models.base import Architecture
        from icl.models.vicl._diffusion_controlnet import PromptDiffusionControlNetModel

        base, control = self._folders()
        return sd.sd_architectures(base) + [Architecture(control, PromptDiffusionControlNetModel)]

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From ``unet/``, ``vae/`` and the ControlNet's ``config.json`` (``block_out_channels``,
        ``layers_per_block``, ``attention_head_dim``; ``conditioning_embedding_out_channels`` c0)
        at ``resolution`` S, latent ``l = S / 2^(VAE levels - 1)``, ``r`` UNet rows per request (2
        with classifier-free guidance, else 1):
        ``A = b x max(r x (9 S^2 + 4 c0 S^2 + unet(l) with the ControlNet's residuals), vae_dec(S))``:
        the example pair and query conditions with the conditioning embeddings' widest maps, the
        ControlNet and UNet step (:func:`icl.models.memory.unet_values`: skips, twice with the
        residuals, and a level's widest work), or the VAE decoding the answer
        (:func:`icl.models.memory.vae_values`), which is the peak at SD 1.5's sizes."""
        try:
            base, control = self._folders()
        except (OSError, ValueError):
            return None
        configs, controlnet = sd.sd_configs(base), read_config(control / "config.json")
        if configs is None or controlnet is None:
            return None
        unet, vae = configs
        size = self.resolution
        latent = size // vae_scale(vae)
        text = f"{self.prompt}, {self.added_prompt}" if self.added_prompt else self.prompt  # as load() joins it
        rows = 2 if self.guidance_scale != 1.0 and text != self.negative_prompt else 1
        embedding = (controlnet.get("conditioning_embedding_out_channels") or [16])[0]
        denoise = rows * (9 * size * size + CONV_LIVE_MAPS * embedding * size * size) \
            + unet_values(unet, latent, latent, rows, controlnet=True)
        decode = vae_values(vae, size, size, encode_images=0, decode_images=1)
        return ActivationMemory(bytes_per_value * max(denoise, decode),
                                f"{size}px, latent {latent}, {rows} UNet+ControlNet rows per request, VAE "
                                f"{vae_channels(vae)}")

    def load(self, device: str) -> None:
        self.device = device
        dtype = sd.TORCH_DTYPES[self.dtype_arg or self.precision]
        base, control = self._folders()
        self._parts = sd.load_sd(base, device, dtype)
        from icl.models.vicl._diffusion_controlnet import PromptDiffusionControlNetModel

        from icl.models.vicl._load import load_pretrained

        cn = load_pretrained(PromptDiffusionControlNetModel, control, "Prompt Diffusion ControlNet", dtype=dtype)
        if cn.config.conditioning_channels != 6:
            raise WeightsError(f"{self.name}: {control} is not a Prompt Diffusion ControlNet "
                               f"(conditioning_channels {cn.config.conditioning_channels}, expected 6: the example pair)")
        from diffusers.models.attention_processor import AttnProcessor2_0

        cn.set_attn_processor(AttnProcessor2_0())
        self._controlnet = compiled(cn.to(device).eval().requires_grad_(False), self.compile)
        self._parts["unet"] = compiled(self._parts["unet"], self.compile)
        self._dtype = dtype
        # joined exactly as the official notebook does, a leading ", " included when the prompt is empty
        text = f"{self.prompt}, {self.added_prompt}" if self.added_prompt else self.prompt
        embeds = sd.encode_text(self._parts["tokenizer"], self._parts["text_encoder"], [text, self.negative_prompt],
                                device)
        self._cond, self._uncond = embeds[:1], embeds[1:]
        # identical texts make the guided prediction equal the conditional one: skip the second half
        self._guided = self.guidance_scale != 1.0 and text != self.negative_prompt

    # --- inference ---------------------------------------------------------------------------
    def _conditions(self, requests: Sequence[AnalogyRequest]) -> tuple[torch.Tensor, torch.Tensor]:
        """Example pairs ``[B, 6, S, S]`` (source, then target) and queries ``[B, 3, S, S]``, in
        [-1, 1] (or [0, 1] with ``condition_range="unit"``)."""
        size, dev = self.resolution, self.device
        src = sd.images_to_tensor([r.context_inputs[0] for r in requests], size, dev, torch.float32)
        tgt = sd.images_to_tensor([r.context_outputs[0] for r in requests], size, dev, torch.float32)
        query = sd.images_to_tensor([r.query for r in requests], size, dev, torch.float32)
        pair = torch.cat([src, tgt], dim=1)
        if self.condition_range == "signed":
            pair, query = pair * 2 - 1, query * 2 - 1
        return pair.to(self._dtype), query.to(self._dtype)

    @torch.inference_mode()
    def predict(self, requests: Sequence[AnalogyRequest]) -> list[Any]:
        sd.check_requests(self.name, requests)
        if not requests:
            return []
        unet, vae = self._parts["unet"], self._parts["vae"]
        n = len(requests)
        pair, query = self._conditions(requests)
        gens = [sd.generator(r.seed) for r in requests]
        latent_hw = self.resolution // (2 ** (len(vae.config.block_out_channels) - 1))
        shape = (1, unet.config.in_channels, latent_hw, latent_hw)
        latents = torch.cat([torch.randn(shape, generator=g, dtype=torch.float32) for g in gens]).to(self.device)

        scheduler = sd.make_scheduler(self.scheduler, self._parts["scheduler_config"])
        scheduler.set_timesteps(self.steps, device=self.device)
        latents = latents * scheduler.init_noise_sigma
        step_kwargs = _step_kwargs(scheduler, self.eta, gens)

        if self._guided:  # rows: [negative prompt x B, prompt x B]
            text = torch.cat([self._uncond.expand(n, -1, -1), self._cond.expand(n, -1, -1)])
            pair, query = torch.cat([pair, pair]), torch.cat([query, query])
        else:
            text = self._cond.expand(n, -1, -1)
        for t in scheduler.timesteps:
            x = torch.cat([latents, latents]) if self._guided else latents
            x = scheduler.scale_model_input(x, t).to(self._dtype)
            down, mid = self._controlnet(x, t, text, controlnet_cond=pair, controlnet_query_cond=query,
                                         conditioning_scale=self.control_strength, return_dict=False)
            eps = unet(x, t, encoder_hidden_states=text, down_block_additional_residuals=down,
                       mid_block_additional_residual=mid, return_dict=False)[0].float()
            if self._guided:
                uncond, cond = eps.chunk(2)
                eps = uncond + self.guidance_scale * (cond - uncond)
            latents = scheduler.step(eps, t, latents, **step_kwargs, return_dict=False)[0]
        images = sd.vae_decode(vae, latents)
        return [sd.resize_back(img, tuple(r.query.shape[:2])) for img, r in zip(images, requests)]


def _step_kwargs(scheduler: Any, eta: float, gens: list[torch.Generator]) -> dict[str, Any]:
    """``eta`` and the per-request generators for the schedulers whose ``step`` takes them."""
    import inspect

    params = inspect.signature(scheduler.step).parameters
    kwargs: dict[str, Any] = {}
    if "eta" in params:
        kwargs["eta"] = eta
    if "generator" in params:
        kwargs["generator"] = gens
    return kwargs
