"""Tiny random vision-language models, built from configurations with the official parameter
names and saved as real ``from_pretrained`` folders (tokenizer, processor, chat template,
weights). Nothing here is downloaded. The LLaVA builder lives in the package
(``icl.models.vlm.tiny``: the built-in ``tiny-chat-judge`` uses it); the others are test-only.

Three families: LLaVA (CLIP vision tower + Llama decoder; the processor expands each ``<image>``
to the patch count; images as one flat list), Idefics3 (SigLIP-style tower, pixel shuffle,
``<fake_token_around_image><global-img><image>...`` blocks; images nested per prompt) and
Gemma 3 (SigLIP tower pooled to ``mm_tokens_per_image``, ``<start_of_image>`` markers,
bidirectional attention over image tokens via ``token_type_ids``; images nested per prompt).
"""

from __future__ import annotations

from pathlib import Path

import torch

from icl.data.seeds import derive_seed
from icl.models.vlm.tiny import build_llava, llama_config, random_init, save_chat_model, tokenizer

# Idefics3's "User:<image>...<end_of_utterance>" layout.
IDEFICS3_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] | capitalize }} :"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>"
    "{% else %} {{ part['text'] }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant :{% endif %}"
)

# Gemma 3's turn layout; like Gemma's own template it folds a system turn into the first user turn.
GEMMA3_TEMPLATE = (
    "{% set ns = namespace(system='') %}{% for message in messages %}{% if message['role'] == 'system' %}"
    "{% set ns.system = message['content'][0]['text'] + ' ' %}{% endif %}{% endfor %}"
    "{% for message in messages if message['role'] != 'system' %}"
    "<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if loop.first %}{{ ns.system }}{% endif %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<start_of_image>"
    "{% else %}{{ part['text'] }} {% endif %}{% endfor %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def _generator(seed: int, purpose: str) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, "tiny-vlm", "*", "*", purpose) % (1 << 63))


def build_idefics3(path: Path, *, max_positions: int = 256, seed: int = 0) -> Path:
    """An Idefics3 model (16 px images, pixel shuffle by 2: 4 image tokens each, no splitting)
    saved under ``path``."""
    from transformers import (Idefics3Config, Idefics3ForConditionalGeneration, Idefics3ImageProcessorPil,
                              Idefics3Processor, Idefics3VisionConfig)

    grid = tuple(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7))
    specials = ("<unk>", "<pad>", "<s>", "</s>", "<fake_token_around_image>", "<image>", "<end_of_utterance>",
                "<global-img>") + grid
    tok = tokenizer(specials, pad="<pad>", eos="<end_of_utterance>", unk="<unk>", bos="<s>")
    image_processor = Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": 16},
                                                max_image_size={"longest_edge": 16})
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tok, image_seq_len=4,
                                  chat_template=IDEFICS3_TEMPLATE)
    vision = Idefics3VisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  image_size=16, patch_size=4)
    config = Idefics3Config(vision_config=vision, text_config=llama_config(tok, max_positions), scale_factor=2,
                            image_token_id=tok.convert_tokens_to_ids("<image>"), pad_token_id=tok.pad_token_id)
    return save_chat_model(random_init(Idefics3ForConditionalGeneration, config, seed), processor, tok, path)


def build_gemma3(path: Path, *, max_positions: int = 256, seed: int = 0) -> Path:
    """A Gemma 3 model (16 px images pooled to 4 image tokens each) saved under ``path``."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessorPil, Gemma3Processor

    specials = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
                "<end_of_image>", "<image_soft_token>")
    tok = tokenizer(specials, pad="<pad>", eos="<end_of_turn>", unk="<unk>", bos="<bos>",
                     extra={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                            "image_token": "<image_soft_token>"})
    image_processor = Gemma3ImageProcessorPil(size={"height": 16, "width": 16})
    processor = Gemma3Processor(image_processor=image_processor, tokenizer=tok, chat_template=GEMMA3_TEMPLATE,
                                image_seq_length=4)
    ids = tok.convert_tokens_to_ids
    config = Gemma3Config(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                         max_position_embeddings=max_positions, sliding_window=64, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=16, patch_size=4),
        mm_tokens_per_image=4, boi_token_index=ids("<start_of_image>"), eoi_token_index=ids("<end_of_image>"),
        image_token_index=ids("<image_soft_token>"))
    model = random_init(Gemma3ForConditionalGeneration, config, seed)
    with torch.no_grad():  # transformers starts the image projection at zero: images would not count
        projection = model.model.multi_modal_projector.mm_input_projection_weight
        projection.copy_(torch.randn(projection.shape, generator=_generator(seed, "projection")) * 0.5)
    return save_chat_model(model, processor, tok, path)


BUILDERS = {"llava": build_llava, "idefics3": build_idefics3, "gemma3": build_gemma3}
