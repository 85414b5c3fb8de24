"""LVM (Bai et al. 2024, "Sequential Modeling Enables Scalable Learning for Large Vision
Models"), ytongbai/LVM, and DeLVM (Guo et al. 2024, "Data-efficient Large Vision Models"),
ggjy/DeLVM: a LLaMA-family decoder over visual sentences of VQGAN tokens.

Both tokenise 256 x 256 images in [0, 1] with open-muse's f16 VQGAN (``VQGANModel``: 16 x 16
= 256 codes per image, 8192 codes; LVM's published tokenizer has ``no_attn_mid_block``), kept
in float32 whatever ``dtype`` the decoder runs in (as LVM's ``inference.py`` does), and feed
the codes, unshifted, to a ``LlamaForCausalLM``. DeLVM's converter
(``InternLM/tools/convert2hf.py``) writes an InternLM checkpoint (``model_type: internlm``,
q/k/v/o biases); it is loaded as ``LlamaConfig(attention_bias=True)``, exact for its
attention, MLP, RMSNorm and rotary embedding (base 10000); any other ``model_type`` is refused.
Every load is strict (a missing, unexpected or mis-shaped key raises ``WeightsError``).

Preprocessing as the official scripts: LVM resizes each image to 256 x 256 with PIL's
bicubic (``read_image_to_tensor`` in ``evaluation/vqlm_demo/utils.py``); DeLVM resizes the
shorter side to 256 (PIL bilinear) and centre-crops (``encode_transform`` in
``InternLM/tools/utils.py``). A visual sentence is ``c_in_1, c_out_1, ..., c_in_K, c_out_K,
query``; the next 256 tokens are generated (tokens outside the codebook suppressed, as
``suppress_tokens`` in LVM's ``inference.py``), decoded by the VQGAN, clamped to [0, 1] and
resized (bilinear) to the query's size (DeLVM: to the crop's place, borders replicated).
Decoding (``decoding``): ``official`` is each release's own setting (LVM: sampling, T 1,
top-p 1, transformers' default top-k 50; DeLVM: greedy, its ``GenerationConfig`` has no
``do_sample``), ``greedy`` is argmax; draws come from a ``torch.Generator`` per request seeded
from ``derive_seed(request.seed, dataset, "*", query_id, ...)``, so an answer does not depend
on the batch. Requests with the same K are generated together with one KV cache.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Hashable, Optional, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icl.data.seeds import ANY, derive_seed
from icl.models.base import Architecture, ContextOverflowError
from icl.models.memory import (CONTEXT_TOKENS, ActivationMemory, conv_pyramid_values, first_int, lm_config_values,
                               read_config)
from icl.models.requests import AnalogyRequest
from icl.models.vicl._load import load_module, load_pretrained, load_streamed, read_json, read_state_dict
from icl.models.vicl._torch import TorchAdapter, checked_device, compiled, to_device_tensor
from icl.models.vicl._vqgan import VQGAN, config_from_muse
from icl.models.vicl.canvas import centre_crop, host_image, resize_pil, resize_short_side
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


# InternLMConfig arguments (DeLVM InternLM/tools/model_hf/modeling_internlm.py) -> LlamaConfig
_INTERNLM_TO_LLAMA = {"vocab_size": "vocab_size", "hidden_size": "hidden_size",
                      "intermediate_size": "intermediate_size", "num_hidden_layers": "num_hidden_layers",
                      "num_attention_heads": "num_attention_heads", "hidden_act": "hidden_act",
                      "max_position_embeddings": "max_position_embeddings", "rms_norm_eps": "rms_norm_eps",
                      "tie_word_embeddings": "tie_word_embeddings", "bias": "attention_bias",
                      "pad_token_id": "pad_token_id", "bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id"}
# InternLMConfig defaults for what a config.json may leave out
_INTERNLM_DEFAULTS = {"vocab_size": 103168, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                      "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
                      "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "bias": True}


def llm_config(folder: Path) -> Any:
    """The ``LlamaConfig`` of a decoder folder: its own for ``model_type: llama``; InternLM's
    (DeLVM) mapped to ``LlamaConfig(attention_bias=True, rope_theta=10000, no GQA)``, which
    computes what ``InternLMForCausalLM`` computes; anything else refused."""
    from transformers import LlamaConfig

    cfg = read_json(folder / "config.json")
    model_type = cfg.get("model_type")
    if model_type == "llama":
        return LlamaConfig.from_pretrained(str(folder), local_files_only=True)
    if model_type == "internlm":
        rotary = cfg.get("rotary")
        if rotary not in (None, {"base": 10000, "type": "origin"}):
            raise WeightsError(f"{folder}/config.json: InternLM rotary {rotary!r} is not mapped (only base 10000)")
        kw = {dst: cfg.get(src, _INTERNLM_DEFAULTS.get(src)) for src, dst in _INTERNLM_TO_LLAMA.items()
              if src in cfg or src in _INTERNLM_DEFAULTS}
        return LlamaConfig(**kw, num_key_value_heads=kw["num_attention_heads"], mlp_bias=False,
                           rope_theta=10000.0)  # type: ignore[call-arg]  # transformers 4.x's name; 5.x maps it
    raise WeightsError(f"{folder}/config.json: model_type {model_type!r} is not a decoder this adapter maps "
                       f"(llama, internlm); refusing to load it as LLaMA")


def load_llm(folder: Path, dtype: torch.dtype, device_map: Optional[str] = None) -> nn.Module:
    """The decoder at ``dtype``, strictly. Without ``device_map`` its tensors are read one at a
    time and cast (``load_streamed``): peak host memory about the ``dtype`` weights' size, also
    from LVM's float16 release (transformers' memory-mapped load holds the file's pages beside
    the cast copy: 2.9x). With ``device_map`` (accelerate placement) transformers loads it."""
    from transformers import LlamaForCausalLM

    if not (folder / "config.json").is_file():
        raise WeightsError(f"{folder}: not a transformers model folder (no config.json)")
    config = llm_config(folder)
    config._attn_implementation = "sdpa"
    # InternLM checkpoints carry each layer's rotary inv_freq buffer; LLaMA recomputes it
    ignore = ("rotary_emb.inv_freq",)
    if device_map is None:
        return load_streamed(LlamaForCausalLM, config, folder, "LLaMA/InternLM decoder", dtype, ignore)
    return load_pretrained(LlamaForCausalLM, folder, "LLaMA/InternLM decoder", dtype=dtype, ignore=ignore,
                           config=config, attn_implementation="sdpa", device_map=device_map).eval()


def _cache_name(llm: nn.Module) -> str:
    """The KV-cache argument of this transformers' forward: ``cache`` (newer) or ``past_key_values``."""
    params = inspect.signature(getattr(llm, "_orig_mod", llm).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class SentenceModel(nn.Module):
    """The decoder (``llm``, at the run's dtype) and the tokenizer (``vqgan``, float32)."""

    def __init__(self, llm: nn.Module, vqgan: VQGAN):
        super().__init__()
        self.llm: nn.Module = llm
        self.vqgan: VQGAN = vqgan


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


# decoding presets: (do_sample, temperature, top_k, top_p)
DECODING = {"greedy": (False, 1.0, 0, 1.0),
            # LVM inference.py: generate(do_sample=True, temperature=1.0, top_p=1.0); top_k is not set,
            # so transformers' GenerationConfig default (50) applies
            "lvm-official": (True, 1.0, 50, 1.0)}


class LVM(TorchAdapter):
    """LVM: visual sentences of VQGAN tokens continued by a LLaMA decoder (module docstring).

    K-shot: a longer visual sentence with all K pairs (``c_in_1, c_out_1, ..., query``); a
    sentence that does not fit ``max_position_embeddings`` with the 256 generated tokens raises
    ``ContextOverflowError`` for that request (never truncated).

    Weights: ``weights`` is the decoder folder (``config.json`` and safetensors or
    ``pytorch_model*.bin``; default ``$ICL_WEIGHTS_DIR/<name>/llm``), ``vqgan_weights`` the
    open-muse VQGAN folder (default ``$ICL_WEIGHTS_DIR/<name>/vqgan``). Decoding:
    ``decoding`` (``official`` or ``greedy``), each of ``do_sample``, ``temperature``,
    ``top_k`` (0: off), ``top_p`` overriding the preset when given. ``device_map`` (e.g.
    ``auto``) spreads the decoder over devices with accelerate (models larger than one device).
    """

    name = "lvm"
    version = "2"
    batch_size = 8
    shots_policy = "all K pairs as one visual sentence (c_in, c_out, ..., query), then 256 generated tokens"
    official_decoding = "lvm-official"
    crop = False  # DeLVM: centre crop
    execution_args = frozenset({"device_map"})

    def __init__(self, weights: Optional[str] = None, vqgan_weights: Optional[str] = None,
                 dtype: Optional[str] = None, compile: Union[bool, str] = False, decoding: str = "official",
                 do_sample: Optional[bool] = None, temperature: Optional[float] = None, top_k: Optional[int] = None,
                 top_p: Optional[float] = None, device_map: Optional[str] = None):
        super().__init__(weights, dtype, compile, None)
        if decoding not in ("official", "greedy"):
            raise ValueError(f"{self.name}: decoding must be 'official' or 'greedy', got {decoding!r}")
        preset = DECODING[self.official_decoding if decoding == "official" else "greedy"]
        asked: tuple[Any, ...] = (do_sample, temperature, top_k, top_p)
        chosen = [preset[i] if v is None else v for i, v in enumerate(asked)]
        sample, temp, k, p = chosen
        if temp <= 0 or not 0 < p <= 1 or k < 0:
            raise ValueError(f"{self.name}: need temperature > 0, 0 < top_p <= 1, top_k >= 0; "
                             f"got {temp}, {p}, {k}")
        self.vqgan_weights = vqgan_weights
        self.decoding = decoding
        self.do_sample = bool(sample)
        self.temperature = float(temp)
        self.top_k = int(k)
        self.top_p = float(p)
        self.device_map = device_map

    def model_files(self) -> Sequence[Path]:
        return (resolve_weights(self.name, self.weights, LLM_DIR),
                resolve_weights(self.name, self.vqgan_weights, VQGAN_DIR, argument="vqgan_weights"))

    def architectures(self) -> Sequence[Architecture]:
        from transformers import LlamaForCausalLM

        llm_dir = self.model_files()[0]
        return (Architecture(llm_dir, LlamaForCausalLM, llm_config(llm_dir)),)

    def build(self) -> SentenceModel:
        llm_dir, vq_dir = self.model_files()
        return SentenceModel(load_llm(llm_dir, self.torch_dtype, self.device_map), load_muse_vqgan(vq_dir))

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From the decoder's ``config.json`` (LLaMA's names; InternLM's with its defaults) and the
        VQGAN's (open-muse: ``resolution`` s, ``hidden_channels x channel_mult``, the factor f
        from the levels), for the longest visual sentence the context holds: ``T =
        min(max_position_embeddings,`` :data:`~icl.models.memory.CONTEXT_TOKENS` ``)`` positions of
        ``n = T / (s / f)^2`` images, the prompt being ``n - 1`` of them (``K = n / 2 - 1`` shots):
        ``A = max(b x T x (2 L h_kv + 4 h + 2 I), 4 x (n - 1) x (vqgan_enc + 3 s^2), 4 x vqgan_dec)``:
        the decoder generating with its key/value cache (:func:`icl.models.memory.causal_lm_values`)
        or the VQGAN, in float32 whatever the dtype, tokenising the prompt's images or decoding the
        answer (:func:`icl.models.memory.conv_pyramid_values`)."""
        try:
            llm_dir, vq_dir = self.model_files()
        except (OSError, ValueError):
            return None
        llm, muse = read_config(llm_dir / "config.json"), read_config(vq_dir / "config.json")
        if llm is None or muse is None:
            return None
        if llm.get("model_type") == "internlm":  # InternLMConfig's defaults for what it leaves out
            llm = {**_INTERNLM_DEFAULTS, **llm}
        try:
            vq = config_from_muse(muse)
        except (TypeError, ValueError):
            return None
        tokens_per_image = (vq.resolution // vq.factor) ** 2
        positions = first_int(llm, "max_position_embeddings") or CONTEXT_TOKENS
        images = max(min(positions, CONTEXT_TOKENS) // tokens_per_image, 2)
        tokens = images * tokens_per_image
        counted = lm_config_values(llm, tokens)
        if counted is None:
            return None
        channels = [vq.ch * m for m in vq.ch_mult]
        side = vq.resolution
        encode = (images - 1) * (conv_pyramid_values(channels, side, side, decoder=False) + 3 * side * side)
        decode = conv_pyramid_values(channels, side, side, decoder=True) + 3 * side * side
        total = max(bytes_per_value * counted[0], 4 * encode, 4 * decode)  # the VQGAN runs in float32
        return ActivationMemory(total, f"{images} images of {tokens_per_image} tokens (K={images // 2 - 1} shots), "
                                       f"{counted[1]}; VQGAN {side}px ch={channels} in fp32", tokens)

    def load(self, device: str) -> None:
        dev = checked_device(self.name, device, self.torch_dtype)
        net = self.build()
        if self.device_map is None:
            net.llm.to(device=dev, dtype=self.torch_dtype)  # already at dtype when read from files
        net.vqgan.to(device=dev, dtype=torch.float32).eval()  # the tokenizer stays fp32, as the official code
        net.llm = compiled(net.llm, self.compile)
        self.net = net
        self.device = str(dev)
        self.llm_device = next(net.llm.parameters()).device
        self.cache_arg = _cache_name(net.llm)
        self.image_size = net.vqgan.config.resolution
        self.tokens_per_image = (self.image_size // net.vqgan.config.factor) ** 2
        self.n_codes = net.vqgan.config.n_embed
        self.max_positions = int(getattr(net.llm.config, "max_position_embeddings", 1 << 30))

    def group_key(self, req: AnalogyRequest) -> Hashable:
        return req.shots

    def prepare(self, image: Any) -> np.ndarray:
        """One image as the official script feeds the tokenizer: uint8 ``[s, s, 3]``."""
        s = self.image_size
        im = host_image(image)
        if not self.crop:
            return resize_pil(im, (s, s), "bicubic")
        h, w = im.shape[:2]
        return centre_crop(resize_pil(im, resize_short_side(h, w, s), "bilinear"), s)

    def sentence_images(self, req: AnalogyRequest) -> list[np.ndarray]:
        """The images of the visual sentence, in order, prepared for the tokenizer."""
        images = []
        for x, y in zip(req.context_inputs, req.context_outputs):
            images += [x, y]
        images.append(req.query)
        return [self.prepare(im) for im in images]

    def tokenize(self, images: list[np.ndarray]) -> torch.Tensor:
        """uint8 images -> int64 codes ``[len(images), tokens_per_image]`` (raster order), fp32."""
        x = to_device_tensor(images, torch.device(self.device), torch.float32)
        return self.net.vqgan.encode_codes(x).flatten(1)

    def generators(self, requests: Sequence[AnalogyRequest]) -> list[torch.Generator]:
        gens = []
        for req in requests:
            g = torch.Generator(device=self.llm_device)
            g.manual_seed(derive_seed(req.seed, req.dataset, ANY, req.query_id, f"{self.name}/sample") & ((1 << 63) - 1))
            gens.append(g)
        return gens

    def generate(self, prompt: torch.Tensor, generators: Sequence[torch.Generator]) -> torch.Tensor:
        """Continue ``prompt`` ``[B, L]`` by ``tokens_per_image`` tokens with a KV cache: ``[B, T]``."""
        llm = self.net.llm
        out = llm(input_ids=prompt.to(self.llm_device), use_cache=True, logits_to_keep=1)
        new = []
        for t in range(self.tokens_per_image):
            nxt = pick_tokens(out.logits[:, -1], self.n_codes, self.do_sample, self.temperature, self.top_k,
                              self.top_p, generators)
            new.append(nxt)
            if t + 1 < self.tokens_per_image:
                past = getattr(out, "cache", None) if self.cache_arg == "cache" else out.past_key_values
                out = llm(input_ids=nxt[:, None], use_cache=True, **{self.cache_arg: past})
        return torch.stack(new, 1).to(self.device)

    def place(self, img: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """A decoded ``[3, s, s]`` image as the answer ``[h, w, 3]`` for a query of ``size``."""
        h, w = size
        if not self.crop:
            return F.interpolate(img[None], size=(h, w), mode="bilinear", align_corners=False)[0].permute(1, 2, 0)
        side = min(h, w)  # the crop in the query's own pixels; outside it the nearest crop pixel
        top, left = int(round((h - side) / 2.0)), int(round((w - side) / 2.0))
        sq = F.interpolate(img[None], size=(side, side), mode="bilinear", align_corners=False)
        full = F.pad(sq, (left, w - side - left, top, h - side - top), mode="replicate")
        return full[0].permute(1, 2, 0)

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
        return [self.place(img, tuple(req.query.shape[:2])) for img, req in zip(decoded, requests)]


class DeLVM(LVM):
    """DeLVM: the LVM formulation with the paper's 1B InternLM/LLaMA decoder (converted by
    ``InternLM/tools/convert2hf.py``) and the same open-muse VQGAN tokenizer; its own
    preprocessing (shorter side to 256, centre crop) and decoding (greedy).

    K-shot: a longer visual sentence with all K pairs, as LVM.
    """

    name = "delvm"
    version = "2"
    batch_size = 8
    shots_policy = LVM.shots_policy
    official_decoding = "greedy"  # GenerationConfig(temperature=0.1, top_p=0.75, num_beams=1): no do_sample
    crop = True
