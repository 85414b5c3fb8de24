"""SD-VICL (Oorloff et al., ICCV 2025, "Stable Diffusion Models are Secretly Good at Visual
In-Context Learning") as a training-free adapter on a diffusers Stable Diffusion UNet.

1. Inversion. The context inputs (sources), context outputs (targets) and the query are encoded
   by the VAE and inverted with edit-friendly DDPM inversion: each image's noisy latents
   ``x_t = sqrt(a_t) x_0 + sqrt(1 - a_t) e_t`` are drawn independently per step (``e_t`` from the
   request's generator), and the query's noise maps ``z_t = (x_{t-1} - mu_t(x_t)) / sigma_t``
   are computed with the plain UNet, so that the DDPM sampler retraces the query exactly.
2. Generation. The query generation starts from the query's noisy latent after ``skip_steps``
   and is denoised with the query's noise maps, beside its sources and targets on their own
   trajectories (which those noise maps retrace exactly, so they are taken as drawn). In the
   decoder's self-attention at the full and half latent resolutions (inside their step
   ranges), the query generation attends with its own queries to the sources' keys and the
   targets' values, with a temperature and attention-map contrasting
   (:mod:`icl.models.vicl._diffusion_rewire`).
3. Swap guidance: ``eps = eps_plain + s (eps_rewired - eps_plain)``, ``s`` falling linearly from
   ``swap_guidance_scale`` to ``max(scale / 2, 1)``; a plain copy of the query generation runs in
   the same UNet batch.
4. AdaIN: inside its step range the query generation's latent takes, per channel, the mean and
   standard deviation of the targets' latents at the same noise level.

No text: the prompt is empty (the model is prompted with images only). K-shot: every pair is
used (keys of all sources and values of all targets in one softmax; AdaIN statistics pooled
over all targets). With ``rewire=False`` and ``adain=False`` the output is the query's own
reconstruction (the plain DDPM sampler retracing its inversion).

Defaults: 100 steps with 32 skipped, contrast 1.67, swap guidance 3.5, re-wiring steps
[10, 90) at full and [10, 70) at half resolution, AdaIN steps [20, 100) as in the
Cross-Image Attention code that the visual benchmark's paper cites as SD-VICL's
re-implementation; temperature 0.4 as in rogergheser/SD-VICL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

from icl._parse import parse_bool
from icl.models.base import PRECISIONS, Adapter
from icl.models.memory import ActivationMemory, first_int, unet_values, vae_channels, vae_scale, vae_values
from icl.models.requests import AnalogyRequest
from icl.models.vicl import _diffusion_rewire as rw
from icl.models.vicl import _diffusion_sd as sd
from icl.models.vicl._torch import compile_option, compiled, dtype_option
from icl.models.weights import PathLike


def posterior(eps: torch.Tensor, x: torch.Tensor, alpha_t: torch.Tensor, alpha_prev: torch.Tensor,
              eta: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of ``x_{t-1}`` given ``x_t`` and the predicted noise (DDIM's
    generalised sampler; ``eta = 1`` is the DDPM posterior). ``alpha_*`` are cumulative alphas
    broadcastable to ``x`` (float32)."""
    x0 = (x - (1 - alpha_t).sqrt() * eps) / alpha_t.sqrt()
    variance = (1 - alpha_prev) / (1 - alpha_t) * (1 - alpha_t / alpha_prev)
    sigma = eta * variance.sqrt()
    mean = alpha_prev.sqrt() * x0 + (1 - alpha_prev - sigma ** 2).clamp(min=0).sqrt() * eps
    return mean, sigma


def adain(content: torch.Tensor, style: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``content`` [C, h, w] with, per channel, the mean and std of ``style`` [K, C, h, w]
    (pooled over its K images and pixels; variance with Bessel's correction, plus ``eps``)."""
    c = content.shape[0]
    flat_style = style.transpose(0, 1).reshape(c, -1)
    flat = content.reshape(c, -1)
    s_mean, s_std = flat_style.mean(1), (flat_style.var(1) + eps).sqrt()
    c_mean, c_std = flat.mean(1), (flat.var(1) + eps).sqrt()
    return ((flat - c_mean[:, None]) / c_std[:, None] * s_std[:, None] + s_mean[:, None]).reshape(content.shape)


class SDVICL(Adapter):
    """SD-VICL on a Stable Diffusion ``from_pretrained`` folder (``weights``; SD 1.5 in the
    visual benchmark's paper). Answers float32 ``[h, w, 3]`` tensors in [0, 1] on the model's
    device, at the query's size."""

    name = "sd-vicl"
    version = "1"

    def __init__(self, weights: Optional[PathLike] = None, steps: int = 100, skip_steps: int = 32,
                 temperature: float = 0.4, contrast_strength: float = 1.67, swap_guidance_scale: float = 3.5,
                 rewire: bool = True, rewire_full_start: int = 10, rewire_full_end: int = 90,
                 rewire_half_start: int = 10, rewire_half_end: int = 70, adain: bool = True,
                 adain_start: int = 20, adain_end: int = 100, prompt: str = "", resolution: int = 512,
                 precision: str = "fp32", batch_size: int = 2, dtype: Optional[str] = None,
                 compile: Any = False) -> None:
        self.dtype_arg = dtype_option(self.name, dtype)  # wins over precision, as on every neural adapter
        self.compile = compile_option(compile)
        self.weights = weights
        self.steps, self.skip_steps = int(steps), int(skip_steps)
        self.temperature, self.contrast_strength = float(temperature), float(contrast_strength)
        self.swap_guidance_scale = float(swap_guidance_scale)
        self.rewire, self.adain = parse_bool(rewire, "model argument rewire"), parse_bool(adain, "model argument adain")
        self.rewire_full = (int(rewire_full_start), int(rewire_full_end))
        self.rewire_half = (int(rewire_half_start), int(rewire_half_end))
        self.adain_range = (int(adain_start), int(adain_end))
        self.prompt, self.resolution = str(prompt), int(resolution)
        self.precision, self.batch_size = str(precision), int(batch_size)
        sd.check_range("steps", self.steps, 1, 1000)
        sd.check_range("skip_steps", self.skip_steps, 0, self.steps - 1)
        sd.check_range("temperature", self.temperature, 1e-6)
        sd.check_range("contrast_strength", self.contrast_strength, 0.0)
        sd.check_range("swap_guidance_scale", self.swap_guidance_scale, 0.0)
        sd.check_range("batch_size", self.batch_size, 1)
        if self.resolution < 64 or self.resolution % 64:
            raise ValueError(f"model argument resolution: expected a multiple of 64, got {resolution!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"model argument precision: expected one of {PRECISIONS}, got {precision!r}")

    def weight_files(self) -> Sequence[Path]:
        return (sd.resolve_sd_folder(self.name, self.weights),)

    def architectures(self) -> Sequence[Any]:
        return sd.sd_architectures(sd.resolve_sd_folder(self.name, self.weights))

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From ``unet/`` and ``vae/config.json`` at ``resolution`` S (latent ``l``, ``C``
        channels, ``h`` heads at full latent resolution), for one-shot requests (K = 1: 2K + 1 = 3
        images; K shots cost about (2K + 2) / 4 times the UNet term and K times the scores),
        ``n = steps - skip_steps`` generated steps:
        ``A = 4 x (2n + 1)(2K + 1) C l^2 + max(b x vae_enc(3 images), b x unet(l, 4 rows),
        b x unet(l, 2K + 2 rows) + 4 x 4 h K l^4, b x vae_dec)``: the float32 trajectories (drawn
        noise and noisy latents of every image at every step, the query's noise maps), then the
        largest of the VAE encoding the request's images, the noise-map UNet batches (4 rows per
        request: ``batch_size x 4`` per call), the generation step (sources, targets, the query
        and its plain copy) whose re-wired attention builds float32 scores (logits, softmax and
        the contrast's two temporaries, ``h x l^2 x K l^2`` each; :mod:`._diffusion_rewire`
        caps them at 2^28 per chunk), and the VAE decoding the answer."""
        try:
            configs = sd.sd_configs(self.weight_files()[0])
        except (OSError, ValueError):  # weights not resolvable here: the check reports that itself
            return None
        if configs is None:
            return None
        unet, vae = configs
        size, shots = self.resolution, 1
        latent, channels = size // vae_scale(vae), first_int(unet, "in_channels") or 4
        images, steps = 2 * shots + 1, self.steps - self.skip_steps
        trajectories = (2 * steps + 1) * images * channels * latent ** 2
        rewired = shots * latent ** 4 * sd.unet_heads(unet) if self.rewire and self.contrast_strength != 1.0 else 0
        rows = 2 * shots + 2 if self.rewire and self.swap_guidance_scale > 1.0 else 2 * shots + 1
        phase = max(bytes_per_value * vae_values(vae, size, size, encode_images=images, decode_images=1),
                    bytes_per_value * unet_values(unet, latent, latent, 4),
                    bytes_per_value * unet_values(unet, latent, latent, rows) + 4 * 4 * rewired)
        return ActivationMemory(4 * trajectories + phase,
                                f"{size}px, latent {latent}, K=1 shot ({rows} UNet rows), {steps} steps, "
                                f"VAE {vae_channels(vae)}")

    def load(self, device: str) -> None:
        from diffusers import DDIMScheduler

        self.device = device
        self._dtype = sd.TORCH_DTYPES[self.dtype_arg or self.precision]
        self._parts = sd.load_sd(sd.resolve_sd_folder(self.name, self.weights), device, self._dtype)
        self.state = rw.RewireState(temperature=self.temperature, contrast=self.contrast_strength)
        self.rewired_layers = rw.install(self._parts["unet"], self.state)
        self._parts["unet"] = compiled(self._parts["unet"], self.compile)
        self._text = sd.encode_text(self._parts["tokenizer"], self._parts["text_encoder"], [self.prompt], device)
        scheduler = DDIMScheduler.from_config(self._parts["scheduler_config"])
        scheduler.set_timesteps(self.steps)
        self._timesteps = scheduler.timesteps.to(torch.int64)
        alphas = scheduler.alphas_cumprod.to(torch.float32)
        prev = self._timesteps - scheduler.config.num_train_timesteps // self.steps
        self._alpha_t = alphas[self._timesteps]
        self._alpha_prev = torch.where(prev >= 0, alphas[prev.clamp(min=0)], scheduler.final_alpha_cumprod.float())

    # --- helpers -----------------------------------------------------------------------------
    def _scales(self, i: int) -> frozenset[int]:
        if not self.rewire:
            return frozenset()
        active = set()
        if self.rewire_full[0] <= i < self.rewire_full[1]:
            active.add(1)
        if self.rewire_half[0] <= i < self.rewire_half[1]:
            active.add(2)
        return frozenset(active)

    def _unet(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        text = self._text.expand(x.shape[0], -1, -1)
        return self._parts["unet"](x.to(self._dtype), t.to(self.device), encoder_hidden_states=text,
                                   return_dict=False)[0].float()

    def _alphas(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (self._alpha_t[idx].to(self.device)[:, None, None, None],
                self._alpha_prev[idx].to(self.device)[:, None, None, None])

    # --- inference ---------------------------------------------------------------------------
    @torch.inference_mode()
    def predict(self, requests: Sequence[AnalogyRequest]) -> list[Any]:
        sd.check_requests(self.name, requests)
        out: list[Any] = [None] * len(requests)
        by_shots: dict[int, list[int]] = {}
        for i, req in enumerate(requests):
            by_shots.setdefault(req.shots, []).append(i)
        for idxs in by_shots.values():
            for i, image in zip(idxs, self._generate([requests[i] for i in idxs])):
                out[i] = image
        return out

    def _generate(self, requests: Sequence[AnalogyRequest]) -> list[torch.Tensor]:
        """One group of requests with the same number of shots K."""
        n, k = len(requests), requests[0].shots
        vae, dev = self._parts["vae"], self.device
        images = [im for r in requests for im in (*r.context_inputs, *r.context_outputs, r.query)]
        x0 = sd.vae_encode(vae, sd.images_to_tensor(images, self.resolution, dev, self._dtype))
        x0 = x0.view(n, 2 * k + 1, *x0.shape[1:])  # per request: sources, targets, query
        gen_steps = self.steps - self.skip_steps
        step_idx = torch.arange(self.skip_steps, self.steps)
        a_t, a_prev = self._alphas(step_idx)  # [S, 1, 1, 1]

        # edit-friendly noisy latents, drawn per request: [n, S + 1, 2K + 1, C, h, w] (last: x0)
        noise = torch.stack([torch.randn((gen_steps, *x0.shape[1:]), generator=sd.generator(r.seed))
                             for r in requests]).to(dev)
        xts = a_t[None, :, None].sqrt() * x0[:, None] + (1 - a_t[None, :, None]).sqrt() * noise
        xts = torch.cat([xts, x0[:, None]], dim=1)
        zs = self._query_noise_maps(xts[:, :, 2 * k], step_idx, a_t, a_prev)  # [n, S, C, h, w]

        guided = self.rewire and self.swap_guidance_scale > 1.0
        per_request, gen_row = (2 * k + 2 if guided else 2 * k + 1), 2 * k
        layout = [rw.RowLayout(tuple(r * per_request + j for j in range(k)),
                               tuple(r * per_request + k + j for j in range(k)), r * per_request + gen_row)
                  for r in range(n)]
        strengths = np.linspace(self.swap_guidance_scale, max(self.swap_guidance_scale / 2, 1.0), gen_steps)
        self.state.latent_tokens = x0.shape[-1] * x0.shape[-2]
        latents = xts[:, 0, 2 * k].clone()
        try:
            for i in range(gen_steps):
                scales = self._scales(i)
                self.state.step, self.state.scales = i, scales
                self.state.layout = layout if scales else []
                if scales:  # the context rows (and the plain copy) only matter while re-wired
                    rows = [xts[:, i, : 2 * k], latents[:, None]] + ([latents[:, None]] if guided else [])
                    batch = torch.cat(rows, dim=1).flatten(0, 1)
                else:
                    batch = latents
                eps = self._unet(batch, self._timesteps[self.skip_steps + i].expand(batch.shape[0]))
                if scales:
                    eps = eps.view(n, per_request, *eps.shape[1:])
                    eps_gen = eps[:, gen_row]
                    if guided:
                        eps_plain = eps[:, gen_row + 1]
                        eps_gen = eps_plain + float(strengths[i]) * (eps_gen - eps_plain)
                else:
                    eps_gen = eps
                mean, sigma = posterior(eps_gen, latents, a_t[i], a_prev[i])
                latents = mean + sigma * zs[:, i]
                if self.adain and self.adain_range[0] <= i < self.adain_range[1]:
                    targets = xts[:, i + 1, k: 2 * k]
                    latents = torch.stack([adain(latents[r], targets[r]) for r in range(n)])
        finally:
            self.state.layout, self.state.scales = [], frozenset()
        decoded = sd.vae_decode(vae, latents)
        return [sd.resize_back(img, tuple(r.query.shape[:2])) for img, r in zip(decoded, requests)]

    def _query_noise_maps(self, xq: torch.Tensor, step_idx: torch.Tensor, a_t: torch.Tensor,
                          a_prev: torch.Tensor) -> torch.Tensor:
        """Noise maps ``z`` [n, S, C, h, w] of the queries' trajectories ``xq`` [n, S + 1, C, h, w].

        The steps are independent given the drawn latents, so they are evaluated together in
        UNet batches (every row its own timestep), with plain attention.
        """
        n, s1 = xq.shape[:2]
        steps = s1 - 1
        x_t = xq[:, :steps].flatten(0, 1)
        x_prev = xq[:, 1:].flatten(0, 1)
        t = self._timesteps[step_idx].repeat(n)
        at, ap = a_t.repeat(n, 1, 1, 1), a_prev.repeat(n, 1, 1, 1)
        self.state.layout, self.state.scales = [], frozenset()
        chunk = max(1, self.batch_size * 4)
        maps = []
        for start in range(0, x_t.shape[0], chunk):
            sl = slice(start, start + chunk)
            eps = self._unet(x_t[sl], t[sl])
            mean, sigma = posterior(eps, x_t[sl], at[sl], ap[sl])
            maps.append((x_prev[sl] - mean) / sigma)
        return torch.cat(maps).view(n, steps, *xq.shape[2:])
