"""LVM (Bai et al. 2024, "Sequential Modeling Enables Scalable Learning for Large Vision
Models"), ytongbai/LVM, and DeLVM (Guo et al. 2024, "Data-efficient Large Vision Models"),
ggjy/DeLVM: a LLaMA-family decoder over visual sentences of VQGAN tokens.

Both tokenise 256 x 256 images in [0, 1] with open-muse's f16 VQGAN (``VQGANModel``: 16 x 16
= 256 codes per image, 8192 codes) and feed the codes, unshifted, to a ``LlamaForCausalLM``.
A visual sentence is ``c_in_1, c_out_1, ..., c_in_K, c_out_K, query``; the next 256 tokens
are generated (tokens outside the codebook suppressed, as ``suppress_tokens`` in LVM's
``inference.py``), decoded by the VQGAN, clamped to [0, 1] and resized (bilinear) to the
query's size. Decoding is greedy by default; with ``do_sample`` each request draws from its own
``torch.Generator`` seeded from ``derive_seed(request.seed, dataset, "*", query_id, ...)``, so
an answer does not depend on the batch. Requests with the same K are generated together with
one KV cache (all sentences then have the same length: no padding).
"""

from __future__ import annotations

from pathlib import Path
from typing import Hashable, Optional, Sequence, Union

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icl.data.seeds import ANY, derive_seed
from icl.models.base import ContextOverflowError
from icl.models.requests import AnalogyRequest
from icl.models.vicl._load import load_module, read_json, read_state_dict
from icl.models.vicl._torch import TorchAdapter, to_device_tensor
from icl.models.vicl._vqgan import VQGAN, config_from_muse
from icl.models.vicl.canvas import host_image
from icl.models.weights import WeightsError, resolve_weights

LLM_DIR = "llm"
VQGAN_DIR = "vqgan"
VQGAN_WEIGHT_NAMES = ("model.safetensors", "diffusion_pytorch_model.safetensors", "pytorch_model.bin",
                      "diffusion_pytorch_model.bin")


def load_muse_vqgan(folder: Path) -> VQGAN:
    """open-muse ``VQGANModel.from_pretrained`` layout: ``config.json`` plus one weight file."""
    cfg = config_from_muse(read_json(folder / "config.json"))
    for name in VQGAN_WEIGHT_NAMES:
        path = folder / name
        if path.is_file():
            net = VQGAN(cfg)
            load_module(net, read_state_dict(path), path, "open-muse VQGAN")
            return net
    raise WeightsError(f"{folder}: no VQGAN weights ({', '.join(VQGAN_WEIGHT_NAMES)}) beside config.json")


class SentenceModel(nn.Module):
    """The decoder (``llm``) and the tokenizer (``vqgan``) as one module (moved and cast together)."""

    def __init__(self, llm: nn.Module, vqgan: VQGAN):
        super().__init__()
        self.llm = llm
        self.vqgan = vqgan


def pick_tokens(logits: torch.Tensor, n_codes: int, do_sample: bool, temperature: float, top_k: int,
                top_p: float, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """Next token per row of ``logits`` ``[B, V]``, among the first ``n_codes`` entries:
    argmax, or a draw (temperature, then top-k, then top-p nucleus) from each row's generator."""
    logits = logits[:, :n_codes].float()
    if not do_sample:
        return logits.argmax(-1)
    logits = logits / temperature
    if 0 < top_k < n_codes:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= top_p  # keep the smallest prefix reaching top_p
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    probs = logits.softmax(-1)
    return torch.cat([torch.multinomial(p, 1, generator=g) for p, g in zip(probs, generators)])


class LVM(TorchAdapter):
    """LVM: visual sentences of VQGAN tokens continued by a LLaMA decoder (module docstring).

    K-shot: a longer visual sentence with all K pairs (``c_in_1, c_out_1, ..., query``); a
    sentence that does not fit ``max_position_embeddings`` with the 256 generated tokens raises
    ``ContextOverflowError`` for that request (never truncated).

    Weights: ``weights`` is the ``LlamaForCausalLM`` folder (``config.json`` and safetensors or
    ``pytorch_model*.bin``; default ``$ICL_WEIGHTS_DIR/<name>/llm``), ``vqgan_weights`` the
    open-muse VQGAN folder (default ``$ICL_WEIGHTS_DIR/<name>/vqgan``). Sampling: ``do_sample``,
    ``temperature``, ``top_k`` (0: off), ``top_p``.
    """

    name = "lvm"
    version = "1"
    batch_size = 8
    shots_policy = "all K pairs as one visual sentence (c_in, c_out, ..., query), then 256 generated tokens"

    def __init__(self, weights: Optional[str] = None, vqgan_weights: Optional[str] = None,
                 dtype: Optional[str] = None, compile: Union[bool, str] = False, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
        super().__init__(weights, dtype, compile, None)
        if temperature <= 0 or not 0 < top_p <= 1 or top_k < 0:
            raise ValueError(f"{self.name}: need temperature > 0, 0 < top_p <= 1, top_k >= 0; "
                             f"got {temperature}, {top_p}, {top_k}")
        self.vqgan_weights = vqgan_weights
        self.do_sample = bool(do_sample)
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)

    def weight_files(self) -> Sequence[Path]:
        return (resolve_weights(self.name, self.weights, LLM_DIR),
                resolve_weights(self.name, self.vqgan_weights, VQGAN_DIR))

    def build(self) -> nn.Module:
        from transformers import LlamaForCausalLM

        llm_dir, vq_dir = self.weight_files()
        if not (llm_dir / "config.json").is_file():
            raise WeightsError(f"{llm_dir}: not a transformers model folder (no config.json)")
        llm = LlamaForCausalLM.from_pretrained(str(llm_dir), torch_dtype=torch.float32, local_files_only=True,
                                               attn_implementation="sdpa")
        return SentenceModel(llm, load_muse_vqgan(vq_dir))

    def load(self, device: str) -> None:
        super().load(device)
        self.image_size = self.net.vqgan.config.resolution
        self.tokens_per_image = (self.image_size // self.net.vqgan.config.factor) ** 2
        self.n_codes = self.net.vqgan.config.n_embed
        self.max_positions = int(getattr(self.net.llm.config, "max_position_embeddings", 1 << 30))

    def group_key(self, req: AnalogyRequest) -> Hashable:
        return req.shots

    def sentence_images(self, req: AnalogyRequest) -> list[np.ndarray]:
        """The images of the visual sentence, in order, resized to the tokenizer's size (bicubic)."""
        s = self.image_size
        images = []
        for x, y in zip(req.context_inputs, req.context_outputs):
            images += [host_image(x), host_image(y)]
        images.append(host_image(req.query))
        return [cv2.resize(im, (s, s), interpolation=cv2.INTER_CUBIC) for im in images]

    def tokenize(self, images: list[np.ndarray]) -> torch.Tensor:
        """uint8 images -> int64 codes ``[len(images), tokens_per_image]`` (raster order)."""
        dev = torch.device(self.device)
        x = to_device_tensor(images, dev, self.torch_dtype)
        return self.net.vqgan.encode_codes(x).flatten(1)

    def generators(self, requests: Sequence[AnalogyRequest]) -> list[torch.Generator]:
        gens = []
        for req in requests:
            g = torch.Generator(device=self.device)
            g.manual_seed(derive_seed(req.seed, req.dataset, ANY, req.query_id, f"{self.name}/sample") & ((1 << 63) - 1))
            gens.append(g)
        return gens

    def generate(self, prompt: torch.Tensor, generators: Sequence[torch.Generator]) -> torch.Tensor:
        """Continue ``prompt`` ``[B, L]`` by ``tokens_per_image`` tokens with a KV cache: ``[B, T]``."""
        llm = self.net.llm
        out = llm(input_ids=prompt, use_cache=True, logits_to_keep=1)
        past, logits = out.cache, out.logits[:, -1]
        new = []
        for t in range(self.tokens_per_image):
            nxt = pick_tokens(logits, self.n_codes, self.do_sample, self.temperature, self.top_k, self.top_p,
                              generators)
            new.append(nxt)
            if t + 1 < self.tokens_per_image:
                out = llm(input_ids=nxt[:, None], cache=past, use_cache=True)
                past, logits = out.cache, out.logits[:, -1]
        return torch.stack(new, 1)

    def run_group(self, requests: Sequence[AnalogyRequest]) -> list[torch.Tensor]:
        shots = requests[0].shots
        need = (2 * shots + 2) * self.tokens_per_image
        if need > self.max_positions:
            raise ContextOverflowError(f"{self.name}: {shots} shots need {need} positions (2K + 2 images of "
                                       f"{self.tokens_per_image} tokens), the model has {self.max_positions}; "
                                       f"first request {requests[0].task}/{requests[0].dataset}/{requests[0].query_id}")
        images = [im for r in requests for im in self.sentence_images(r)]
        codes = self.tokenize(images).reshape(len(requests), -1)
        new = self.generate(codes, self.generators(requests))
        side = self.image_size // self.net.vqgan.config.factor
        decoded = self.net.vqgan.decode_codes(new.reshape(-1, side, side)).float()
        out = []
        for img, req in zip(decoded, requests):
            h, w = req.query.shape[:2]
            out.append(F.interpolate(img[None], size=(h, w), mode="bilinear", align_corners=False)[0].permute(1, 2, 0))
        return out


class DeLVM(LVM):
    """DeLVM: the LVM formulation with the paper's 1B LLaMA (``LLaMA-1b-hf``) and the same
    open-muse VQGAN tokenizer; everything else as :class:`LVM`.

    K-shot: a longer visual sentence with all K pairs, as LVM.
    """

    name = "delvm"
    version = "1"
    batch_size = 8
    shots_policy = LVM.shots_policy

