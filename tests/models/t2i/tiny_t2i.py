"""Tiny random generators and judges, built with the real diffusers / transformers classes and
their official parameter names, saved as real ``from_pretrained`` folders. Test-only: nothing
here is downloaded.

- Stable Diffusion: the layout of the runwayml/stable-diffusion-v1-5 release
  (``model_index.json``, ``unet/ vae/ text_encoder/ tokenizer/ scheduler/``; the tokenizer as
  CLIP's ``vocab.json`` + ``merges.txt``; the release's PNDM scheduler settings, read from its
  ``scheduler/scheduler_config.json``), with tiny UNet / VAE / CLIP text encoder widths.
- Janus: ``JanusForConditionalGeneration`` + ``JanusProcessor`` as transformers'
  ``models/janus/convert_janus_weights_to_hf.py`` writes them (its chat template, the
  ``<image_placeholder>`` / ``<begin_of_image>`` / ``<end_of_image>`` tokens, generation config
  ``guidance_scale=5``, ``temperature=1``,
  ``generation_kwargs["boi_token_id"]``), at 64 px with 16 image tokens
  (the official 384 px / 16 px patches / 576 tokens ratio of VQ downsampling 16).
- CLIP / SigLIP: ``CLIPModel`` / ``SiglipModel`` with their processors.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch

from icl.data.seeds import derive_seed

# runwayml/stable-diffusion-v1-5 scheduler/scheduler_config.json (PNDMScheduler)
SD15_SCHEDULER = dict(beta_end=0.012, beta_schedule="scaled_linear", beta_start=0.00085, clip_sample=False,
                      num_train_timesteps=1000, set_alpha_to_one=False, skip_prk_steps=True, steps_offset=1,
                      trained_betas=None)


def _init(cls_or_fn, seed: int, what: str, *args, **kwargs):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "tiny-t2i", "*", "*", what) % (1 << 63))
        return cls_or_fn(*args, **kwargs)


def clip_tokenizer_files(folder: Path, max_length: int = 16) -> Path:
    """CLIP's tokenizer folder as the SD 1.5 release ships it: ``vocab.json`` (byte-level
    symbols and ``</w>`` word ends, the two specials last), ``merges.txt`` with its
    ``#version`` header, ``tokenizer_config.json`` and ``special_tokens_map.json``; lower-case
    letters, digits and punctuation, no merges (every word splits into characters)."""
    chars = list(string.ascii_lowercase + string.digits + ".,:;'?!-")
    vocab: dict[str, int] = {}
    for c in chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"]:
        vocab.setdefault(c, len(vocab))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "CLIPTokenizer", "model_max_length": max_length, "do_lower_case": True,
         "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
         "unk_token": "<|endoftext|>"}))
    (folder / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
         "unk_token": "<|endoftext|>"}))
    return folder


def clip_tokenizer(folder: Path, max_length: int = 16):
    from transformers import CLIPTokenizer

    return CLIPTokenizer.from_pretrained(clip_tokenizer_files(folder, max_length))


def build_sd(path: Path, seed: int = 0, sample_size: int = 8) -> Path:
    """A Stable Diffusion 1.5-layout folder: 16 x 16 px images by default (latent 8, VAE x2)."""
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    tok = clip_tokenizer(path / "_bpe")
    unet = _init(UNet2DConditionModel, seed, "unet", sample_size=sample_size, in_channels=4, out_channels=4,
                 down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), block_out_channels=(8, 16),
                 layers_per_block=1, cross_attention_dim=16, attention_head_dim=2, norm_num_groups=4)
    vae = _init(AutoencoderKL, seed, "vae", in_channels=3, out_channels=3,
                down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
                up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), block_out_channels=(8, 8),
                latent_channels=4, norm_num_groups=4, sample_size=2 * sample_size, layers_per_block=1)
    specials = tok.convert_tokens_to_ids(["<|startoftext|>", "<|endoftext|>"])
    text = CLIPTextConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                          num_attention_heads=2, max_position_embeddings=16, projection_dim=16,
                          bos_token_id=specials[0], eos_token_id=specials[1], pad_token_id=specials[1])
    encoder = _init(CLIPTextModel, seed, "text", text)
    pipe = StableDiffusionPipeline(unet=unet, vae=vae, text_encoder=encoder, tokenizer=tok,
                                   scheduler=PNDMScheduler.from_config(SD15_SCHEDULER), safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(path)
    # the release ships CLIP's vocab.json + merges.txt, not a tokenizers JSON
    (path / "tokenizer" / "tokenizer.json").unlink(missing_ok=True)
    clip_tokenizer_files(path / "tokenizer")
    return path


# transformers src/transformers/models/janus/convert_janus_weights_to_hf.py: CHAT_TEMPLATE
JANUS_CHAT_TEMPLATE = (
    "{%set seps=['\n\n','<\uff5cend\u2581of\u2581sentence\uff5c>']%}"
    "{%set i=0%}"
    "{%for message in messages%}"
    "{%if message['role']|lower=='user'%}"
    "<|User|>: "
    "{%elif message['role']|lower=='assistant'%}"
    "<|Assistant|>:{%if not (loop.last and not add_generation_prompt and message['content'][0]['type']=='text' "
    "and message['content'][0]['text']=='')%} {%endif%}"
    "{%else%}"
    "{{message['role'].capitalize()}}: "
    "{%endif%}"
    "{%for content in message['content']%}"
    "{%if content['type']=='image'%}"
    "{%if not loop.first%}{{'\n'}}{%endif%}"
    "<image_placeholder>"
    "{%if not loop.last%}{{'\n'}}{%endif%}"
    "{%elif content['type']=='text'%}"
    "{%set text=content['text']%}"
    "{%if loop.first%}{%set text=text.lstrip()%}{%endif%}"
    "{%if loop.last%}{%set text=text.rstrip()%}{%endif%}"
    "{%if not loop.first and message['content'][loop.index0-1]['type']=='text'%}"
    "{{' '+text}}"
    "{%else%}"
    "{{text}}"
    "{%endif%}"
    "{%endif%}"
    "{%endfor%}"
    "{%if not loop.last or add_generation_prompt%}"
    "{%if message['role']|lower=='user'%}"
    "{{seps[0]}}"
    "{%else%}"
    "{{seps[1]}}"
    "{%endif%}"
    "{%endif%}"
    "{%endfor%}"
    "{%if add_generation_prompt%}<|Assistant|>:{%endif%}"
)
JANUS_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
JANUS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
JANUS_PAD = "<\uff5c\u2581pad\u2581\uff5c>"
JANUS_WORDS = tuple(("a the red blue green yellow star stars circle circles square squares triangle two three one "
                     "on sand grass background image picture of and with is what shows like this dax blicket "
                     "you are helpful language vision assistant able to understand visual content that user "
                     "provides assist variety tasks using natural yes no").split())


def janus_tokenizer():
    """A word-level stand-in for Janus' LlamaTokenizerFast: its special tokens (BOS added in
    front like the release's tokenizer, pad ``<｜▁pad▁｜>``, the role tags, the image tokens
    named ``image_token`` / ``boi_token`` / ``eoi_token`` as the conversion script names them)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = [JANUS_BOS, JANUS_EOS, JANUS_PAD, "<unk>", "<|User|>", "<|Assistant|>", "<image_placeholder>",
                "<begin_of_image>", "<end_of_image>"]
    punct = [":", "?", ".", ",", "!", "'", "-"] + [str(d) for d in range(10)]
    vocab = {t: i for i, t in enumerate(specials + list(JANUS_WORDS) + punct)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                     pre_tokenizers.Digits(individual_digits=True)])
    backend.decoder = decoders.WordPiece(prefix="##")
    backend.post_processor = processors.TemplateProcessing(single=f"{JANUS_BOS} $A", pair=f"{JANUS_BOS} $A $B",
                                                           special_tokens=[(JANUS_BOS, 0)])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=JANUS_BOS, eos_token=JANUS_EOS,
                                  pad_token=JANUS_PAD, unk_token="<unk>", padding_side="left",
                                  extra_special_tokens={"image_token": "<image_placeholder>",
                                                        "boi_token": "<begin_of_image>",
                                                        "eoi_token": "<end_of_image>"})
    tok.add_special_tokens({"additional_special_tokens": ["<|User|>", "<|Assistant|>"]})
    return tok


def build_janus(path: Path, seed: int = 0, max_positions: int = 512) -> Path:
    """A Janus-Pro-layout folder: 64 px images, 16 px patches (16 image tokens), a VQ decoder
    upsampling 16x (five channel levels, as the release's (1, 1, 2, 2, 4))."""
    from transformers import (JanusConfig, JanusForConditionalGeneration, JanusImageProcessorPil, JanusProcessor,
                              JanusVisionConfig, JanusVQVAEConfig, LlamaConfig)

    tok = janus_tokenizer()
    # the release's preprocessor_config.json: image_size 384 (here 64), mean = std = 0.5, min_size 14
    image_processor = JanusImageProcessorPil(size={"height": 64, "width": 64}, image_mean=[0.5, 0.5, 0.5],
                                             image_std=[0.5, 0.5, 0.5], min_size=14)
    processor = JanusProcessor(image_processor=image_processor, tokenizer=tok, chat_template=JANUS_CHAT_TEMPLATE,
                               use_default_system_prompt=True, num_image_tokens=16)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    vision = JanusVisionConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=64,
                               patch_size=16, projection_dim=32, depth=2, num_image_tokens=16, mlp_ratio=2.0)
    vq = JanusVQVAEConfig(embed_dim=8, num_embeddings=64, latent_channels=32, base_channels=32,
                          channel_multiplier=[1, 1, 1, 1, 1], num_res_blocks=1, projection_dim=32,
                          image_token_embed_dim=32, num_hidden_layers=2)
    config = JanusConfig(text_config=text, vision_config=vision, vq_config=vq,
                         image_token_id=tok.convert_tokens_to_ids("<image_placeholder>"))
    model = _init(JanusForConditionalGeneration, seed, "janus", config).eval()
    # as the conversion script sets the generation config
    model.generation_config._from_model_config = False
    model.generation_config.temperature = 1
    model.generation_config.guidance_scale = 5
    model.generation_config.pad_token_id = tok.convert_tokens_to_ids(JANUS_PAD)
    model.generation_config.generation_kwargs = {"boi_token_id": tok.convert_tokens_to_ids("<begin_of_image>")}
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_clip(path: Path, seed: int = 0) -> Path:
    """A CLIP folder (``CLIPModel`` + ``CLIPProcessor``: CLIP's BPE tokenizer files, its image
    processor at 16 px with the OpenAI mean and std) as openai/clip-vit-base-patch32 is laid out."""
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPProcessor

    tok = clip_tokenizer(path / "_bpe", max_length=32)
    specials = tok.convert_tokens_to_ids(["<|startoftext|>", "<|endoftext|>"])
    config = CLIPConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=32, bos_token_id=specials[0],
                         eos_token_id=specials[1], pad_token_id=specials[1]),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=16, patch_size=4),
        projection_dim=16)
    model = _init(CLIPModel, seed, "clip", config).eval()
    processor = CLIPProcessor(image_processor=CLIPImageProcessorPil(size={"shortest_edge": 16},
                                                                    crop_size={"height": 16, "width": 16}),
                              tokenizer=tok)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_siglip(path: Path, seed: int = 0) -> Path:
    """A SigLIP folder (``SiglipModel`` + ``SiglipProcessor``, 16 px images, texts padded to
    ``max_length`` 8). The release's tokenizer is SentencePiece (not installed here): a
    word-level tokenizer with its pad / eos / unk tokens stands in."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (PreTrainedTokenizerFast, SiglipConfig, SiglipImageProcessorPil, SiglipModel,
                              SiglipProcessor)

    vocab = {t: i for i, t in enumerate(["<pad>", "</s>", "<unk>"] + list(JANUS_WORDS) + ["photo", "."])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                  model_max_length=8)
    config = SiglipConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=8, projection_size=16,
                         pad_token_id=0, eos_token_id=1, bos_token_id=1),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=16, patch_size=4))
    model = _init(SiglipModel, seed, "siglip", config).eval()
    processor = SiglipProcessor(image_processor=SiglipImageProcessorPil(size={"height": 16, "width": 16}),
                                tokenizer=tok)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def t5_tokenizer(words: tuple[str, ...] = JANUS_WORDS, max_length: int = 48):
    """A T5 (SentencePiece Unigram) tokenizer with ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2 and
    ``▁``-prefixed word pieces, built from a vocabulary list (no SentencePiece model file)."""
    from transformers import T5Tokenizer

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    pieces += [(f"\u2581{w}", -1.0) for w in words] + [(c, -3.0) for c in string.ascii_lowercase + ".,'"]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=max_length)


def build_flux_kontext(path: Path, seed: int = 0) -> Path:
    """A FLUX.1 Kontext [dev]-layout folder (``FluxKontextPipeline.save_pretrained``: CLIP and T5
    encoders and tokenizers, the Flux transformer, the VAE, the flow-matching scheduler), with
    the widths of diffusers' own tests/pipelines/flux/test_pipeline_flux_kontext.py."""
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxKontextPipeline, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    transformer = _init(FluxTransformer2DModel, seed, "flux", patch_size=1, in_channels=4, num_layers=1,
                        num_single_layers=1, attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                        pooled_projection_dim=32, axes_dims_rope=[4, 4, 8])
    tok = clip_tokenizer(path / "_bpe", max_length=77)
    specials = tok.convert_tokens_to_ids(["<|startoftext|>", "<|endoftext|>"])
    clip = _init(CLIPTextModel, seed, "clip", CLIPTextConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=4,
        max_position_embeddings=77, projection_dim=32, bos_token_id=specials[0], eos_token_id=specials[1],
        pad_token_id=specials[1]))
    tok2 = t5_tokenizer()
    t5 = _init(T5EncoderModel, seed, "t5", T5Config(vocab_size=len(tok2), d_model=32, d_kv=8, d_ff=37, num_layers=1,
                                                  num_heads=4, relative_attention_num_buckets=8,
                                                  pad_token_id=0, eos_token_id=1, decoder_start_token_id=0))
    vae = _init(AutoencoderKL, seed, "vae", sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,),
                layers_per_block=1, latent_channels=1, norm_num_groups=1, use_quant_conv=False,
                use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035)
    pipe = FluxKontextPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=clip, tokenizer=tok,
                               text_encoder_2=t5, tokenizer_2=tok2, transformer=transformer, image_encoder=None,
                               feature_extractor=None)
    pipe.save_pretrained(path)
    return path


# Qwen2's special tokens in the release's order (Qwen/Qwen2.5-VL tokenizer_config.json
# ``added_tokens_decoder``: <|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645, ...,
# <|vision_start|> 151652, <|vision_end|> 151653, <|vision_pad|> 151654, <|image_pad|> 151655,
# <|video_pad|> 151656), here right after a byte-level alphabet instead of 151,643 merges.
QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")


def qwen_tokenizer():
    """A byte-level BPE ``Qwen2Tokenizer`` without merges (every byte one token) and Qwen2's
    special tokens: the pipeline's prompt template and image placeholders tokenise as in the
    release, only longer."""
    from transformers import Qwen2Tokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {c: i for i, c in enumerate([*bytes_to_unicode().values(), *QWEN_SPECIALS])}
    tok = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token="<|endoftext|>", eos_token="<|im_end|>",
                         pad_token="<|endoftext|>")
    tok.add_special_tokens({"additional_special_tokens": list(QWEN_SPECIALS[1:])})
    return tok


def build_qwen_image_edit(path: Path, seed: int = 0) -> Path:
    """A Qwen-Image-Edit-2509-layout folder (``model_index.json`` naming
    ``QwenImageEditPlusPipeline`` and its parts ``transformer/ vae/ text_encoder/ tokenizer/
    processor/ scheduler/``; ``processor/`` as the release ships it: ``preprocessor_config.json``
    of a ``Qwen2VLImageProcessor`` plus the tokenizer files, declared
    ``["transformers", "Qwen2VLProcessor"]``). Widths from diffusers'
    tests/pipelines/qwenimage/test_qwenimage_edit_plus.py ``get_dummy_components``, except: the
    VAE has the release's four levels (``temperal_downsample`` of length 3: 8x spatial, as
    Qwen-Image's VAE) at ``base_dim`` 8, so a reference, which the pipeline always resizes to
    1024 x 1024 for the VAE, is 4,096 transformer tokens rather than 16,384; one transformer
    layer; the text encoder's vocabulary is the tiny tokenizer's."""
    from diffusers import (AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImageEditPlusPipeline,
                           QwenImageTransformer2DModel)
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    transformer = _init(QwenImageTransformer2DModel, seed, "qwen-transformer", patch_size=2, in_channels=16,
                        out_channels=4, num_layers=1, attention_head_dim=16, num_attention_heads=3,
                        joint_attention_dim=16, guidance_embeds=False, axes_dims_rope=(8, 4, 4))
    z_dim = 4
    vae = _init(AutoencoderKLQwenImage, seed, "qwen-vae", base_dim=z_dim * 2, z_dim=z_dim, dim_mult=[1, 2, 2, 2],
                num_res_blocks=1, temperal_downsample=[False, True, True], latents_mean=[0.0] * z_dim,
                latents_std=[1.0] * z_dim)
    tok = qwen_tokenizer()
    ids = dict(zip(QWEN_SPECIALS, tok.convert_tokens_to_ids(list(QWEN_SPECIALS))))
    config = Qwen2_5_VLConfig(
        text_config={"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "num_key_value_heads": 2, "vocab_size": len(tok), "rope_theta": 1000000.0,
                     "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
                     "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
                     "pad_token_id": ids["<|endoftext|>"]},
        vision_config={"depth": 2, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16},
        hidden_size=16, vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        vision_token_id=ids["<|vision_pad|>"], image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"])
    text_encoder = _init(Qwen2_5_VLForConditionalGeneration, seed, "qwen-text", config)
    pipe = QwenImageEditPlusPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=text_encoder,
                                     tokenizer=tok, processor=None, transformer=transformer)
    pipe.save_pretrained(path)
    Qwen2VLImageProcessorPil().save_pretrained(path / "processor")  # preprocessor_config.json
    tok.save_pretrained(path / "processor")
    index = json.loads((path / "model_index.json").read_text())
    index["processor"] = ["transformers", "Qwen2VLProcessor"]
    (path / "model_index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return path
