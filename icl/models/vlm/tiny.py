"""A tiny random LLaVA chat checkpoint, and ``tiny-chat-judge``: ``hf-vlm`` on one built once.

:func:`build_llava` writes a real ``from_pretrained`` folder (tokenizer, processor, chat template,
weights) from configurations with the official parameter names: the transformers classes
``LlavaForConditionalGeneration`` (CLIP vision tower + Llama decoder), ``LlavaProcessor`` (each
``<image>`` expanded to the patch count) and ``CLIPImageProcessorPil``, a WordLevel tokenizer over a
small vocabulary, weights drawn from ``derive_seed`` (never the caller's torch generator): the same
arguments write the same bytes. Nothing is downloaded. Tests and benchmarks build their tiny chat
models with it; :func:`builtin_tiny_chat` keeps one in icl's cache (``$ICL_CACHE/builtin/``, never
under a data root), built into a temporary folder and renamed into place with its completion marker
(:func:`icl.data.writer.build_once`), so a killed build is redone and never half used.

``tiny-chat-judge`` (:class:`TinyChatJudge`) has random weights: its answers are token noise that
holds no score. It is not a judge; a fast run uses it to exercise the chat judge's path (the
rubric request, the stored raw answer, the tolerant JSON parse, the unparsed count).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from icl.data.seeds import derive_seed
from icl.models.requests import ChatRequest
from icl.models.vlm.hf import HFVisionLanguage

WORDS = tuple(("the a an is are what which how many of in on to and or yes no image picture shows "
               "cat dog car tree red blue green box word answer question count objects sphere cube "
               "cylinder plus minus times equals zero one two three four five six seven eight nine "
               "ten dax blicket wug same different user assistant system User Assistant System you helpful").split())
PUNCT = (":", "?", ".", ",", "=", "+", "-", "*", "!", "'")
DIGITS = tuple(str(d) for d in range(10))

# LLaVA-1.5's template layout: a role prefix, then every image of the turn, then its text (the
# order quirk the adapter's LLaVA family works around), system text printed bare.
LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'] }} : {% endif %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'image') %}<image>\n{% endfor %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'text') %}{{ part['text'] }} {% endfor %}"
    "{% if message['role'] == 'assistant' %}</s> {% endif %}{% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)

BUILTIN_VERSION = 1  # bump when build_llava's output changes: a new cache folder
BUILTIN_MARKER = "icl_builtin.json"
BUILTIN_POSITIONS = 4096  # a VIF judge prompt (rubric and up to ~10 images of 16 tokens) plus its answer


def tokenizer(specials: tuple[str, ...], pad: str, eos: str, unk: str, bos: str | None,
              extra: dict[str, str] | None = None):
    """A WordLevel fast tokenizer over ``specials`` and a small vocabulary (left padding)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(specials + WORDS + PUNCT + DIGITS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                     pre_tokenizers.Digits(individual_digits=True)])
    backend.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    # Named extras (Gemma's boi_token, ...) and the plain special tokens go in separately: given
    # together to the constructor, the named ones replace the list.
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token=unk, pad_token=pad, eos_token=eos,
                                  bos_token=bos, padding_side="left", extra_special_tokens=extra or {})
    named = (unk, pad, eos, bos) + tuple((extra or {}).values())
    tok.add_special_tokens({"additional_special_tokens": [s for s in specials if s not in named]})
    return tok


def random_init(cls, config, seed: int):
    """``cls(config)`` in eval mode, initialised from its own seed without touching the caller's
    global torch generator (transformers initialises weights from the global one)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "tiny-vlm", "*", config.model_type, "init") % (1 << 63))
        return cls(config).eval()


def llama_config(tok, max_positions: int):
    """The tiny Llama decoder of the LLaVA and Idefics3 builders."""
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)


def save_chat_model(model, processor, tok, path: Path) -> Path:
    """``model`` (its generation config told the tokenizer's pad and end tokens) and ``processor``
    saved as one ``from_pretrained`` folder."""
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_llava(path: Path, *, max_positions: int = 256, seed: int = 0) -> Path:
    """A LLaVA model (16 px images, 16 image tokens each) saved under ``path``."""
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    tok = tokenizer(("<unk>", "<pad>", "<s>", "</s>", "<image>"), pad="<pad>", eos="</s>", unk="<unk>", bos="<s>")
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok, patch_size=4,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               chat_template=LLAVA_TEMPLATE)
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                              image_size=16, patch_size=4, projection_dim=16)
    config = LlavaConfig(vision_config=vision, text_config=llama_config(tok, max_positions),
                         image_token_index=tok.convert_tokens_to_ids("<image>"),
                         vision_feature_select_strategy="default", vision_feature_layer=-1, image_seq_length=16)
    return save_chat_model(random_init(LlavaForConditionalGeneration, config, seed), processor, tok, path)


def builtin_tiny_chat(seed: int = 0) -> Path:
    """The built-in tiny random LLaVA folder, written once under ``$ICL_CACHE/builtin/`` (a folder
    without its completion marker is rebuilt). The folder name carries the builder's version and
    the transformers version that wrote it (read without importing transformers: a run reusing its
    stored answers never loads it)."""
    from importlib.metadata import version

    from icl.data.registry import cache_root
    from icl.data.writer import build_once

    final = cache_root() / "builtin" / f"tiny-chat-v{BUILTIN_VERSION}-tf{version('transformers')}-s{seed}"
    final.parent.mkdir(parents=True, exist_ok=True)

    def build(tmp: Path) -> None:
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a --fast run prints its own progress
        try:
            build_llava(tmp, max_positions=BUILTIN_POSITIONS, seed=seed)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        marker = dict(model="tiny random LLaVA (icl.models.vlm.tiny.build_llava)", version=BUILTIN_VERSION,
                      seed=seed, max_positions=BUILTIN_POSITIONS, weights="random: not a real model")
        (tmp / BUILTIN_MARKER).write_text(json.dumps(marker, sort_keys=True) + "\n", encoding="utf-8")

    return build_once(final, build, BUILTIN_MARKER)


class TinyChatJudge(HFVisionLanguage):
    """``hf-vlm`` on the built-in tiny random LLaVA (:func:`builtin_tiny_chat`): random weights,
    answers that hold no score. It exercises the chat judge's path; it is not a judge. Its answers
    stop at ``max_new_tokens`` (fewer when a request asks for fewer): noise is as unparseable at 32
    tokens as at 512, and a fast run should not pay for the rest."""

    name = "tiny-chat-judge"
    version = "1"
    note = ("random weights (a tiny LLaVA built by icl): exercises the chat judge's JSON path, its answers hold "
            "no score; not a real judge")

    def __init__(self, max_batch: int = 8, seed: int = 0, max_new_tokens: int = 32):
        super().__init__(weights=None, max_batch=max_batch)
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"tiny-chat-judge: max_new_tokens must be a positive int, got {max_new_tokens!r}")
        self.seed, self.max_new_tokens = int(seed), max_new_tokens

    def token_answers(self, requests: Sequence[Any]) -> list[Any]:
        return super().token_answers([replace(r, max_new_tokens=min(r.max_new_tokens, self.max_new_tokens))
                                      if isinstance(r, ChatRequest) else r for r in requests])

    @property
    def folder(self) -> Path:
        return builtin_tiny_chat(self.seed)
