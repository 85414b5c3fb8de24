"""``janus``: DeepSeek Janus / Janus-Pro through transformers' ``JanusForConditionalGeneration``.

One checkpoint answers both directions: a :class:`~icl.models.requests.ChatRequest` as the
``hf-vlm`` adapter answers it (the checkpoint's chat template, greedy or per-request seeded
sampling, the processor's default system prompt), and a
:class:`~icl.models.requests.GenerationRequest` (interleaved text and images) with an image.

Image generation follows the authors' recipe (deepseek-ai/Janus ``generation_inference.py``
and ``demo/app_januspro.py``): the prompt is the chat template's user turn with an empty
assistant turn and no system prompt (``<|User|>: {prompt}\\n\\n<|Assistant|>:``) followed by
``<begin_of_image>``; the unconditional row is the same tokens with everything between the
first (BOS) and the last (``<begin_of_image>``) replaced by the pad token; each of the
``num_image_tokens`` (576) steps samples from ``softmax((uncond + cfg_weight * (cond - uncond))
/ temperature)`` of the generation head (``cfg_weight`` 5, ``temperature`` 1), feeds the token
back through the generation embeddings and aligner, and the VQ decoder turns the tokens into a
384 x 384 image, mapped from [-1, 1] to [0, 1].

Differences from transformers' own ``generate(generation_mode="image")``, on purpose: that
loop embeds token ids only, so the images of an interleaved prompt would enter as the embedding
of ``<image_placeholder>``; here the prompt's images go through the SigLIP encoder and aligner
exactly as in understanding (``JanusModel.forward`` with ``pixel_values``). And it samples with
``torch.multinomial`` from the global generator; here each request samples from its own CPU
generator seeded with ``request.seed`` (Gumbel-max on the guided logits, which is exact
categorical sampling), so an image never depends on its batch neighbours. Rows are left padded
with explicit position ids, so a batch equals its requests run one by one.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np
import torch

from icl.models.base import ContextOverflowError
from icl.models.memory import ActivationMemory, conv_pyramid_values, first_int, read_config
from icl.models.requests import ChatRequest, GenerationRequest, Message
from icl.models.t2i.common import Recorder, check_generation, chunks, cpu_generator, seed_of, to_size
from icl.models.vlm.hf import HFVisionLanguage


class Janus(HFVisionLanguage):
    """Janus / Janus-Pro behind ChatRequest and GenerationRequest.

    Model arguments: ``weights`` (a transformers-format Janus folder, e.g.
    deepseek-community/Janus-Pro-7B; else ``$ICL_WEIGHTS_DIR/janus/``), ``precision``,
    ``cfg_weight`` (classifier-free guidance weight, the authors' 5), ``temperature`` (the
    authors' 1; 0 takes the most likely token), ``max_batch`` (requests per call; a generation
    batch runs 2 x max_batch rows), ``attn_implementation``, ``max_context``.
    """

    name = "janus"
    version = "1"
    serves = (ChatRequest, GenerationRequest)  # type: ignore[assignment]  # the base serves ChatRequest only

    def __init__(self, weights: Optional[str] = None, precision: str = "fp32", cfg_weight: float = 5.0,
                 temperature: float = 1.0, max_batch: int = 8, attn_implementation: Optional[str] = None,
                 max_context: Optional[int] = None):
        super().__init__(weights=weights, precision=precision, max_batch=max_batch,
                         attn_implementation=attn_implementation, max_context=max_context)
        if not isinstance(cfg_weight, (int, float)) or cfg_weight < 0:
            raise ValueError(f"janus: cfg_weight must be a number >= 0, got {cfg_weight!r}")
        if not isinstance(temperature, (int, float)) or temperature < 0:
            raise ValueError(f"janus: temperature must be a number >= 0, got {temperature!r}")
        self.cfg_weight, self.temperature = float(cfg_weight), float(temperature)
        self.recorder = Recorder()

    @property
    def records(self) -> list:
        return self.recorder.records

    def load(self, device: str) -> None:
        super().load(device)
        tok = self.tokenizer
        self.boi_id = int(tok.convert_tokens_to_ids(self.processor.image_start_token))
        pad = self.model.generation_config.pad_token_id
        self.gen_pad_id = int(pad if pad is not None else tok.pad_token_id)
        self.num_image_tokens = int(self.model.config.vision_config.num_image_tokens)

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """The larger of its two directions, from ``config.json``: answering a chat request
        (hf-vlm's ``b x T x (2 L h_kv + 4 h + 2 I)``) and generating an image:
        ``max(2 x b x T x (2 L h_kv + 4 h + 2 I) + 4 n V, b x vq_dec)``: the prompt's row and its
        unconditional row over ``T`` tokens (the same T as a chat request: the image's ``n =
        vision_config.num_image_tokens`` tokens among them), each request's float32 uniform draws
        for every step and image code (``n x V``, ``V = vq_config.num_embeddings``), then the VQ
        decoder (:func:`icl.models.memory.conv_pyramid_values` over ``base_channels x
        channel_multiplier`` up to ``sqrt(n) x 2^(levels - 1)`` pixels a side)."""
        counted = self._lm_values()
        if counted is None:
            return None
        values, tokens, basis = counted
        config = read_config(self.folder / "config.json") or {}
        vision, vq = config.get("vision_config") or {}, config.get("vq_config") or {}
        steps = first_int(vision, "num_image_tokens") or 576
        base = first_int(vq, "base_channels") or 128
        channels = [base * int(m) for m in vq.get("channel_multiplier") or [1, 1, 2, 2, 4]]
        side = math.isqrt(steps) * 2 ** (len(channels) - 1)
        draws = 4 * steps * (first_int(vq, "num_embeddings") or 16384) if self.temperature > 0 else 0
        decode = conv_pyramid_values(channels, side, side, decoder=True) + 3 * side * side
        generation = max(2 * bytes_per_value * values + draws, bytes_per_value * decode)
        return ActivationMemory(max(bytes_per_value * values, generation),
                                f"{basis}; image generation: 2 rows, {steps} image tokens, VQ decoder {side}px "
                                f"ch={channels}", tokens)

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        if self.model is None:
            raise RuntimeError("janus: call load(device) before predict")
        out: list[Any] = [None] * len(requests)
        chats = [i for i, r in enumerate(requests) if isinstance(r, ChatRequest)]
        gens = [i for i in range(len(requests)) if i not in set(chats)]
        if chats:
            for i, answer in zip(chats, super().predict([requests[i] for i in chats])):
                out[i] = answer
        checked = [check_generation(requests[i], self.name) for i in gens]
        for part in chunks(list(range(len(gens))), self.batch_size):
            for k, image in zip(part, self._images([checked[k] for k in part])):
                out[gens[k]] = image
        return out

    def generation_text(self, request: GenerationRequest) -> str:
        """The prompt text before ``<begin_of_image>``: one user turn (text and image items in
        order), the generation prompt, no system prompt (the authors' ``system_prompt=""``)."""
        turn = ChatRequest(request.id, (Message("user", tuple(request.prompt)),))
        text, _ = self.render(turn)
        return text

    def _images(self, batch: list[GenerationRequest]) -> list[Any]:
        texts = [self.generation_text(r) for r in batch]
        images = [img for r in batch for img in r.images]
        enc = self.processor(text=texts, images=images or None, generation_mode="image", padding=True,
                             return_tensors="pt")
        lengths = enc["attention_mask"].sum(dim=1).tolist()
        out: list[Any] = [None] * len(batch)
        if self.context is not None:
            for i, (r, n) in enumerate(zip(batch, lengths)):
                if n + self.num_image_tokens > self.context:
                    out[i] = ContextOverflowError(
                        f"janus: request {r.id!r}: prompt of {int(n)} tokens (images included) + "
                        f"{self.num_image_tokens} image tokens exceeds the context of {self.context} tokens")
        keep = [i for i, o in enumerate(out) if o is None]
        if not keep:
            return out
        if len(keep) < len(batch):
            return [o if o is not None else self._images([batch[i]])[0] for i, o in enumerate(out)]
        seeds = [seed_of(r) for r in batch]
        with self.recorder.batch(self.device) as done:
            tokens = self._sample_tokens(enc, seeds)
            pixels = self._decode(tokens)
            for i, (r, seed) in enumerate(zip(batch, seeds)):
                out[i] = to_size(pixels[i], r.size)
                done(r, seed, self.num_image_tokens, pixels[i].shape[:2], out[i].shape[:2], self.cfg_weight)
        return out

    @torch.inference_mode()
    def _sample_tokens(self, enc: Any, seeds: list[int]) -> torch.Tensor:
        """``[B, num_image_tokens]`` image token ids (see the module docstring)."""
        model, device = self.model, self._input_device()
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
        b, n = ids.shape
        # unconditional rows: keep the first real token (BOS) and the last (<begin_of_image>)
        first = (mask.cumsum(dim=1) == 1) & (mask == 1)
        keep = first.clone()
        keep[:, -1] = True
        uncond = torch.where(keep | (mask == 0), ids, torch.full_like(ids, self.gen_pad_id))
        rows, masks = torch.cat([ids, uncond]), torch.cat([mask, mask])
        positions = (masks.cumsum(dim=1) - 1).clamp(min=0)
        pixel_values = enc.get("pixel_values")
        if pixel_values is not None:
            pixel_values = pixel_values.to(device, dtype=self.model.dtype)
        out = model.model(input_ids=rows, pixel_values=pixel_values, attention_mask=masks, position_ids=positions,
                          use_cache=True)
        cache = out.cache
        hidden = out.last_hidden_state[:, -1, :]
        steps = self.num_image_tokens
        vocab = model.model.generation_head.vision_head.out_features
        noise = None
        if self.temperature > 0:  # each request's own uniform draws, step by step
            noise = torch.stack([torch.rand((steps, vocab), generator=cpu_generator(s)) for s in seeds], dim=1)
        tokens = torch.zeros((b, steps), dtype=torch.long, device=device)
        last = positions[:, -1:]
        for i in range(steps):
            logits = model.model.generation_head(hidden).float()
            cond, unc = logits[:b], logits[b:]
            guided = unc + self.cfg_weight * (cond - unc)
            if noise is not None:
                u = noise[i].to(device).clamp_(min=1e-20)
                guided = guided / self.temperature - torch.log(-torch.log(u))
            nxt = guided.argmax(dim=-1)
            tokens[:, i] = nxt
            if i == steps - 1:
                break
            embeds = model.prepare_embeddings_for_image_generation(torch.cat([nxt, nxt]).unsqueeze(1))
            masks = torch.cat([masks, masks.new_ones((2 * b, 1))], dim=1)
            last = last + 1
            step = model.model.language_model(inputs_embeds=embeds, attention_mask=masks, position_ids=last,
                                              cache=cache, use_cache=True)
            cache = step.cache
            hidden = step.last_hidden_state[:, -1, :]
        return tokens

    @torch.inference_mode()
    def _decode(self, tokens: torch.Tensor) -> np.ndarray:
        """``[B, H, W, 3]`` float32 in [0, 1] from image tokens (VQ decoder output in [-1, 1])."""
        pixels = self.model.decode_image_tokens(tokens).float()
        return ((pixels + 1.0) / 2.0).clamp(0.0, 1.0).cpu().numpy()
