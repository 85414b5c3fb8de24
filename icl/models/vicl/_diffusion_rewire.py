"""SD-VICL's self-attention re-wiring as a diffusers attention processor.

The UNet batch holds, per request, the noisy latents of its K context inputs (sources), its K
context outputs (targets), the query generation, and optionally a plain copy of the query
generation (for swap guidance). In the decoder's self-attention layers at the active
resolutions, the query generation's attention is re-computed with its own queries against the
keys of its sources and the values of its targets (K pairs: keys and values concatenated along
the token axis, one softmax over all of them), with a temperature and attention-map contrasting:

    P = softmax(Q_gen K_src^T / (temperature * sqrt(d)));  P <- clip(mean(P) + contrast (P - mean(P)), 0, 1)
    out_gen = P V_tgt

Every other row, layer and step is plain scaled-dot-product attention (SDPA). A request's
query reads only its own request's rows, so batch elements stay apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class RowLayout:
    """Where one request's rows lie in the UNet batch."""

    sources: tuple[int, ...]
    targets: tuple[int, ...]
    generation: int


@dataclass
class RewireState:
    """Shared by every re-wiring processor of one UNet; the adapter sets it before each call.

    ``scales`` holds the active downsampling factors relative to the latent grid (1: full
    latent resolution, 64x64 at 512 px; 2: half). ``trace``, when a list, receives one record
    per re-wired call (layer, step, rows, the processor's input and the keys and values the
    query generation attended to): the hook a test uses to check what the query reads.
    """

    temperature: float
    contrast: float
    layout: list[RowLayout] = field(default_factory=list)
    scales: frozenset[int] = frozenset()
    latent_tokens: int = 0
    step: int = -1
    trace: Optional[list[dict[str, Any]]] = None


def _factor(latent_tokens: int, tokens: int) -> int:
    """The downsampling factor f with tokens * f^2 == latent_tokens, else 0."""
    if tokens <= 0 or latent_tokens % tokens:
        return 0
    f = round((latent_tokens // tokens) ** 0.5)
    return f if f * f * tokens == latent_tokens else 0


def rewired_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, temperature: float, contrast: float,
                      max_elements: int = 1 << 28) -> torch.Tensor:
    """``q`` [R, H, N, d] against ``k``, ``v`` [R, H, M, d] -> [R, H, N, d].

    Logits scaled by ``1 / (temperature sqrt(d))``; with ``contrast != 1`` the probabilities are
    contrasted around their row mean and clipped to [0, 1] (explicit softmax, computed in float32
    over query chunks of at most ``max_elements`` scores); else SDPA does it fused.
    """
    scale = 1.0 / (temperature * q.shape[-1] ** 0.5)
    if contrast == 1.0:
        return F.scaled_dot_product_attention(q, k, v, scale=scale)
    r, h, n, _ = q.shape
    chunk = max(1, min(n, max_elements // max(1, r * h * k.shape[2])))
    out = torch.empty_like(q)
    for start in range(0, n, chunk):
        logits = torch.matmul(q[:, :, start:start + chunk].float(), k.float().transpose(-1, -2)) * scale
        p = logits.softmax(dim=-1)
        mean = p.mean(dim=-1, keepdim=True)
        p = (mean + contrast * (p - mean)).clamp_(0.0, 1.0)
        out[:, :, start:start + chunk] = torch.matmul(p, v.float()).to(q.dtype)
    return out


class RewiringAttnProcessor:
    """Self-attention processor of one decoder layer (``layer`` is its module path)."""

    def __init__(self, state: RewireState, layer: str) -> None:
        self.state, self.layer = state, layer

    def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: Optional[torch.Tensor] = None,
                 attention_mask: Optional[torch.Tensor] = None, temb: Optional[torch.Tensor] = None,
                 **kwargs: Any) -> torch.Tensor:
        if encoder_hidden_states is not None or attention_mask is not None or hidden_states.ndim != 3 \
                or attn.group_norm is not None or attn.spatial_norm is not None:
            raise ValueError(f"{self.layer}: the re-wiring processor serves plain self-attention on "
                             f"[B, N, C] tokens only (got a cross-attention, mask, norm or {hidden_states.ndim}-D input)")
        residual = hidden_states
        b, n, _ = hidden_states.shape
        heads = attn.heads
        q, k, v = attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(x.shape[0], -1, heads, x.shape[-1] // heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(split(q), split(k), split(v))
        state = self.state
        factor = _factor(state.latent_tokens, n)
        if state.layout and factor in state.scales:
            gen = [lay.generation for lay in state.layout]
            keys = torch.stack([torch.cat([k[i] for i in lay.sources]) for lay in state.layout])
            values = torch.stack([torch.cat([v[i] for i in lay.targets]) for lay in state.layout])
            out[gen] = rewired_attention(split(q[gen]), split(keys), split(values), state.temperature, state.contrast)
            if state.trace is not None:
                state.trace.append({"layer": self.layer, "step": state.step, "factor": factor,
                                    "layout": list(state.layout), "hidden_states": hidden_states.detach().clone(),
                                    "keys": keys.detach().clone(), "values": values.detach().clone()})
        out = out.transpose(1, 2).reshape(b, n, -1).to(q.dtype)
        out = attn.to_out[1](attn.to_out[0](out))
        if attn.residual_connection:
            out = out + residual
        return out / attn.rescale_output_factor


def install(unet: Any, state: RewireState) -> list[str]:
    """Put a re-wiring processor on every self-attention (``attn1``) of the UNet's decoder
    (``up_blocks``); every other attention keeps SDPA. Returns the re-wired layer names."""
    from diffusers.models.attention_processor import AttnProcessor2_0

    processors: dict[str, Any] = {}
    names: list[str] = []
    for key in unet.attn_processors:
        layer = key[: -len(".processor")]
        if key.startswith("up_blocks.") and layer.endswith(".attn1"):
            processors[key] = RewiringAttnProcessor(state, layer)
            names.append(layer)
        else:
            processors[key] = AttnProcessor2_0()
    unet.set_attn_processor(processors)
    return names
