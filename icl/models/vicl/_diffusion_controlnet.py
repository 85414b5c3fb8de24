"""Prompt Diffusion's ControlNet: diffusers' ControlNet plus the second, query conditioning
embedding of the official port, under the official module name ``controlnet_query_cond_embedding``
so the published folder loads. Imported only when a model loads (it imports ``diffusers``)."""

from __future__ import annotations

import functools
from typing import Any, Union

import torch
from diffusers import ControlNetModel
from diffusers.models.controlnets.controlnet import ControlNetConditioningEmbedding, ControlNetOutput


class PromptDiffusionControlNetModel(ControlNetModel):
    """Prompt Diffusion's ControlNet: ``controlnet_cond_embedding`` takes the example pair
    (6 channels: source then target, each in [-1, 1]) and ``controlnet_query_cond_embedding``
    the query (3 channels); their embeddings are added to the noisy latent's ``conv_in`` output.
    Configuration and parameter names are those of the official diffusers port
    (``zhendongw/prompt-diffusion-diffusers``, folder ``controlnet/``)."""

    @functools.wraps(ControlNetModel.__init__)  # type: ignore[misc]  # keeps the config signature
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg: Any = getattr(self, "config")  # diffusers' register_to_config: untyped for mypy
        self.controlnet_query_cond_embedding = ControlNetConditioningEmbedding(
            conditioning_embedding_channels=cfg.block_out_channels[0],
            block_out_channels=cfg.conditioning_embedding_out_channels,
            conditioning_channels=3,
        )

    def forward(self, sample: torch.Tensor, timestep: Union[torch.Tensor, int], encoder_hidden_states: torch.Tensor,
                controlnet_cond: torch.Tensor, controlnet_query_cond: torch.Tensor,
                conditioning_scale: float = 1.0, return_dict: bool = True, **unused: Any) -> Any:
        """Residuals for the UNet: ``sample`` [B, 4, h, w], ``controlnet_cond`` [B, 6, 8h, 8w],
        ``controlnet_query_cond`` [B, 3, 8h, 8w]; SD 1.x configurations only (no class or
        additional embeddings, which the published checkpoint does not have)."""
        # ControlNetModel.__init__ builds these modules through diffusers' config machinery, which
        # mypy does not follow: read through an untyped name
        net: Any = self
        cfg = net.config
        if cfg.class_embed_type is not None or cfg.addition_embed_type is not None or unused:
            raise ValueError("PromptDiffusionControlNetModel supports Stable Diffusion 1.x configurations only "
                             f"(class/addition embeddings and {sorted(unused)} are not used by Prompt Diffusion)")
        if cfg.controlnet_conditioning_channel_order == "bgr":
            controlnet_cond = controlnet_cond.flip(1)
        t = torch.as_tensor(timestep, device=sample.device)
        t = t.reshape(-1).expand(sample.shape[0]) if t.numel() == 1 else t
        emb = net.time_embedding(net.time_proj(t).to(sample.dtype))
        hidden = net.conv_in(sample) + net.controlnet_cond_embedding(controlnet_cond) \
            + self.controlnet_query_cond_embedding(controlnet_query_cond)
        skips = [hidden]
        for block in net.down_blocks:
            if getattr(block, "has_cross_attention", False):
                hidden, res = block(hidden_states=hidden, temb=emb, encoder_hidden_states=encoder_hidden_states)
            else:
                hidden, res = block(hidden_states=hidden, temb=emb)
            skips.extend(res)
        if net.mid_block is not None:
            hidden = net.mid_block(hidden, emb, encoder_hidden_states=encoder_hidden_states) \
                if getattr(net.mid_block, "has_cross_attention", False) else net.mid_block(hidden, emb)
        down = tuple(proj(s) * conditioning_scale for s, proj in zip(skips, net.controlnet_down_blocks))
        mid = net.controlnet_mid_block(hidden) * conditioning_scale
        if not return_dict:
            return down, mid
        return ControlNetOutput(down_block_res_samples=down, mid_block_res_sample=mid)
