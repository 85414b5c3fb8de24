"""Tiny random vision-language models, built from configurations with the official parameter
names and saved as real ``from_pretrained`` folders (tokenizer, processor, chat template,
weights). Test-only: nothing here is downloaded.

Three families: LLaVA (CLIP vision tower + Llama decoder; the processor expands each ``<image>``
to the patch count; images as one flat list), Idefics3 (SigLIP-style tower, pixel shuffle,
``<fake_token_around_image><global-img><image>...`` blocks; images nested per prompt) and
Gemma 3 (SigLIP tower pooled to ``mm_tokens_per_image``, ``<start_of_image>`` markers,
bidirectional attention over image tokens via ``token_type_ids``; images nested per prompt).
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from icl.data.seeds import derive_seed

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


def _tokenizer(specials: tuple[str, ...], pad: str, eos: str, unk: str, bos: str | None,
               extra: dict[str, str] | None = None):
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


def _generator(seed: int, purpose: str) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, "tiny-vlm", "*", "*", purpose) % (1 << 63))


def _random_init(cls, config, seed: int):
    """``cls(config)`` in eval mode, initialised from its own seed without touching the caller's
    global torch generator (transformers initialises weights from the global one)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "tiny-vlm", "*", config.model_type, "init") % (1 << 63))
        return cls(config).eval()


def build_llava(path: Path, *, max_positions: int = 256, seed: int = 0) -> Path:
    """A LLaVA model (16 px images, 16 image tokens each) saved under ``path``."""
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    tok = _tokenizer(("<unk>", "<pad>", "<s>", "</s>", "<image>"), pad="<pad>", eos="</s>", unk="<unk>", bos="<s>")
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok, patch_size=4,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               chat_template=LLAVA_TEMPLATE)
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                              image_size=16, patch_size=4, projection_dim=16)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids("<image>"),
                         vision_feature_select_strategy="default", vision_feature_layer=-1, image_seq_length=16)
    model = _random_init(LlavaForConditionalGeneration, config, seed)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_idefics3(path: Path, *, max_positions: int = 256, seed: int = 0) -> Path:
    """An Idefics3 model (16 px images, pixel shuffle by 2: 4 image tokens each, no splitting)
    saved under ``path``."""
    from transformers import (Idefics3Config, Idefics3ForConditionalGeneration, Idefics3ImageProcessorPil,
                              Idefics3Processor, Idefics3VisionConfig, LlamaConfig)

    grid = tuple(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7))
    specials = ("<unk>", "<pad>", "<s>", "</s>", "<fake_token_around_image>", "<image>", "<end_of_utterance>",
                "<global-img>") + grid
    tok = _tokenizer(specials, pad="<pad>", eos="<end_of_utterance>", unk="<unk>", bos="<s>")
    image_processor = Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": 16},
                                                max_image_size={"longest_edge": 16})
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tok, image_seq_len=4,
                                  chat_template=IDEFICS3_TEMPLATE)
    vision = Idefics3VisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  image_size=16, patch_size=4)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    config = Idefics3Config(vision_config=vision, text_config=text, scale_factor=2,
                            image_token_id=tok.convert_tokens_to_ids("<image>"), pad_token_id=tok.pad_token_id)
    model = _random_init(Idefics3ForConditionalGeneration, config, seed)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_gemma3(path: Path, *, max_positions: int = 256, seed: int = 0) -> Path:
    """A Gemma 3 model (16 px images pooled to 4 image tokens each) saved under ``path``."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessorPil, Gemma3Processor

    specials = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
                "<end_of_image>", "<image_soft_token>")
    tok = _tokenizer(specials, pad="<pad>", eos="<end_of_turn>", unk="<unk>", bos="<bos>",
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
    model = _random_init(Gemma3ForConditionalGeneration, config, seed)
    with torch.no_grad():  # transformers starts the image projection at zero: images would not count
        projection = model.model.multi_modal_projector.mm_input_projection_weight
        projection.copy_(torch.randn(projection.shape, generator=_generator(seed, "projection")) * 0.5)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


BUILDERS = {"llava": build_llava, "idefics3": build_idefics3, "gemma3": build_gemma3}
