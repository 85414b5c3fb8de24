"""Checkpoints written with the official key names of LVM's tokenizer and DeLVM's decoder, and
independent reference forwards (plain tensor code over the state dict, written from the
official class definitions) to compare ``icl``'s loaded modules with.

Sources: ytongbai/LVM ``evaluation/vqlm_demo/vqvae_muse.py`` (open-muse ``VQGANModel``: module
names, ``no_attn_mid_block``, attention only when a level has more than one block, pad
(0, 1, 0, 1) before the stride-2 convolution, GroupNorm(32, eps 1e-6), distances
``|z|^2 + |e|^2 - 2 z.e``, argmin); ggjy/DeLVM ``InternLM/tools/convert2hf.py`` (the key names
it writes, ``bias=True``, ``rms_norm_eps=1e-06``, the per-layer ``rotary_emb.inv_freq``) and
``InternLM/tools/model_hf/modeling_internlm.py`` (``InternLMConfig``, RMSNorm, rotate-half
rotary embedding with base 10000, SiLU-gated MLP).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

# LVM's published tokenizer (Emma02/vqvae_ckpts config.json) at 1/4 width and 32 px: every
# structural setting as published (no_attn_mid_block, channel_mult, no attention, z 64, 8192 codes)
PUBLISHED_MUSE = dict(resolution=256, num_channels=3, hidden_channels=128, channel_mult=[1, 2, 2, 4, 6],
                      num_res_blocks=2, attn_resolutions=[], no_attn_mid_block=True, z_channels=64,
                      num_embeddings=8192, quantized_embed_dim=64, dropout=0.0, resample_with_conv=True,
                      commitment_cost=0.25)
TINY_PUBLISHED_MUSE = dict(PUBLISHED_MUSE, resolution=32, hidden_channels=32)


# ---- open-muse VQGANModel, reference forward ------------------------------------------------

def _gn(x, sd, p):
    return F.group_norm(x, 32, sd[p + ".weight"], sd[p + ".bias"], eps=1e-6)


def _conv(x, sd, p, stride=1, padding=1):
    return F.conv2d(x, sd[p + ".weight"], sd[p + ".bias"], stride=stride, padding=padding)


def _res(x, sd, p):
    h = _conv(F.silu(_gn(x, sd, p + ".norm1")), sd, p + ".conv1")
    h = _conv(F.silu(_gn(h, sd, p + ".norm2")), sd, p + ".conv2")
    if p + ".nin_shortcut.weight" in sd:
        x = _conv(x, sd, p + ".nin_shortcut", padding=0)
    return x + h


def muse_encode_codes(sd: dict, cfg: dict, pixels: torch.Tensor) -> torch.Tensor:
    """open-muse ``VQGANModel.get_code`` for a no-attention config: ``[B, 3, H, W]`` in [0, 1]
    -> codes ``[B, h * w]``."""
    assert not cfg["attn_resolutions"] and cfg["no_attn_mid_block"]
    h = _conv(pixels, sd, "encoder.conv_in")
    n = len(cfg["channel_mult"])
    for i in range(n):
        for j in range(cfg["num_res_blocks"]):
            h = _res(h, sd, f"encoder.down.{i}.block.{j}")
        if i != n - 1:
            h = _conv(F.pad(h, (0, 1, 0, 1)), sd, f"encoder.down.{i}.downsample.conv", stride=2, padding=0)
    h = _res(_res(h, sd, "encoder.mid.block_1"), sd, "encoder.mid.block_2")
    h = _conv(F.silu(_gn(h, sd, "encoder.norm_out")), sd, "encoder.conv_out")
    z = _conv(h, sd, "quant_conv", padding=0).permute(0, 2, 3, 1).reshape(-1, cfg["quantized_embed_dim"])
    e = sd["quantize.embedding.weight"]
    d = z.pow(2).sum(1, keepdim=True) + e.t().pow(2).sum(0, keepdim=True) - 2 * z @ e.t()
    return d.argmin(1).reshape(pixels.shape[0], -1)


def muse_decode_codes(sd: dict, cfg: dict, codes: torch.Tensor) -> torch.Tensor:
    """open-muse ``VQGANModel.decode_code``: codes ``[B, h * w]`` -> images ``[B, 3, H, W]``."""
    b, t = codes.shape
    side = int(math.isqrt(t))
    z = sd["quantize.embedding.weight"][codes].reshape(b, side, side, -1).permute(0, 3, 1, 2)
    h = _conv(_conv(z, sd, "post_quant_conv", padding=0), sd, "decoder.conv_in")
    h = _res(_res(h, sd, "decoder.mid.block_1"), sd, "decoder.mid.block_2")
    n = len(cfg["channel_mult"])
    for i in reversed(range(n)):
        for j in range(cfg["num_res_blocks"] + 1):
            h = _res(h, sd, f"decoder.up.{i}.block.{j}")
        if i != 0:
            h = _conv(F.interpolate(h, scale_factor=2.0, mode="nearest"), sd, f"decoder.up.{i}.upsample.conv")
    return _conv(F.silu(_gn(h, sd, "decoder.norm_out")), sd, "decoder.conv_out")


def muse_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every parameter of open-muse's ``VQGANModel`` for a config without attention, by its
    official name, with its shape (walked as ``Encoder``/``Decoder``/``MidBlock`` build them)."""
    out: dict[str, tuple[int, ...]] = {}

    def conv(p, cin, cout, k):
        out[p + ".weight"], out[p + ".bias"] = (cout, cin, k, k), (cout,)

    def norm(p, c):
        out[p + ".weight"], out[p + ".bias"] = (c,), (c,)

    def res(p, cin, cout):
        norm(p + ".norm1", cin), conv(p + ".conv1", cin, cout, 3), norm(p + ".norm2", cout)
        conv(p + ".conv2", cout, cout, 3)
        if cin != cout:
            conv(p + ".nin_shortcut", cin, cout, 1)

    ch, mult, nrb, z = cfg["hidden_channels"], cfg["channel_mult"], cfg["num_res_blocks"], cfg["z_channels"]
    conv("encoder.conv_in", 3, ch, 3)
    ins = [1] + list(mult)
    for i, m in enumerate(mult):
        cin = ch * ins[i]
        for j in range(nrb):
            res(f"encoder.down.{i}.block.{j}", cin, ch * m)
            cin = ch * m
        if i != len(mult) - 1:
            conv(f"encoder.down.{i}.downsample.conv", cin, cin, 3)
    top = ch * mult[-1]
    res("encoder.mid.block_1", top, top), res("encoder.mid.block_2", top, top)
    norm("encoder.norm_out", top), conv("encoder.conv_out", top, z, 3)
    conv("decoder.conv_in", z, top, 3)
    res("decoder.mid.block_1", top, top), res("decoder.mid.block_2", top, top)
    for i in reversed(range(len(mult))):
        cin = ch * (mult[-1] if i == len(mult) - 1 else mult[i + 1])
        for j in range(nrb + 1):
            res(f"decoder.up.{i}.block.{j}", cin, ch * mult[i])
            cin = ch * mult[i]
        if i != 0:
            conv(f"decoder.up.{i}.upsample.conv", cin, cin, 3)
    norm("decoder.norm_out", ch * mult[0]), conv("decoder.conv_out", ch * mult[0], 3, 3)
    out["quantize.embedding.weight"] = (cfg["num_embeddings"], cfg["quantized_embed_dim"])
    conv("quant_conv", z, cfg["quantized_embed_dim"], 1), conv("post_quant_conv", cfg["quantized_embed_dim"], z, 1)
    return out


def muse_folder(folder: Path, cfg: dict, seed: int = 0) -> Path:
    """An open-muse ``from_pretrained`` folder (config.json + pytorch_model.bin) with random
    weights under the official names and shapes (:func:`muse_shapes`)."""
    g = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    state = {}
    for name, shape in muse_shapes(cfg).items():
        if "norm" in name:
            state[name] = (1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(shape, generator=g)
        else:
            fan_in = math.prod(shape[1:]) if len(shape) > 1 else 1
            state[name] = torch.randn(shape, generator=g) * (0.02 if "embedding" in name else fan_in ** -0.5)
    (folder / "config.json").write_text(json.dumps({"_class_name": "VQGANModel", **cfg}))
    torch.save(state, folder / "pytorch_model.bin")
    return folder


# ---- DeLVM's InternLM checkpoint and its reference forward ----------------------------------

TINY_INTERNLM = dict(vocab_size=48, hidden_size=32, intermediate_size=96, num_hidden_layers=2,
                     num_attention_heads=4, hidden_act="silu", max_position_embeddings=256, rms_norm_eps=1e-6,
                     tie_word_embeddings=False, bias=True)


def internlm_state(cfg: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """The tensors ``convert2hf.py`` writes, under its key names (random values)."""
    g = torch.Generator().manual_seed(seed)
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = d // cfg["num_attention_heads"]

    def r(*shape):
        return torch.randn(*shape, generator=g) * 0.2

    sd = {"model.embed_tokens.weight": r(v, d), "model.norm.weight": 1 + r(d), "lm_head.weight": r(v, d)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            sd[p + f"self_attn.{name}.weight"] = r(d, d)
            sd[p + f"self_attn.{name}.bias"] = r(d)
        sd[p + "mlp.gate_proj.weight"] = r(f, d)
        sd[p + "mlp.down_proj.weight"] = r(d, f)
        sd[p + "mlp.up_proj.weight"] = r(f, d)
        sd[p + "input_layernorm.weight"] = 1 + r(d)
        sd[p + "post_attention_layernorm.weight"] = 1 + r(d)
        sd[p + "self_attn.rotary_emb.inv_freq"] = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
    return sd


def internlm_folder(folder: Path, cfg: dict = TINY_INTERNLM, seed: int = 0,
                    state: dict | None = None) -> Path:
    """A folder as DeLVM's converter leaves it: ``InternLMConfig.save_pretrained`` (model_type
    internlm, auto_map) and ``pytorch_model.bin``."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["InternLMForCausalLM"], "model_type": "internlm",
              "auto_map": {"AutoConfig": "configuration_internlm.InternLMConfig",
                           "AutoModel": "modeling_internlm.InternLMForCausalLM"},
              "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float16", **cfg}
    (folder / "config.json").write_text(json.dumps(config))
    torch.save(internlm_state(cfg, seed) if state is None else state, folder / "pytorch_model.bin")
    return folder


def _rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


def internlm_logits(sd: dict, cfg: dict, ids: torch.Tensor) -> torch.Tensor:
    """``InternLMForCausalLM`` logits ``[B, L, V]`` (causal attention with q/k/v/o biases)."""
    d, nh, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["rms_norm_eps"]
    hd = d // nh
    b, n = ids.shape
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).double() / hd))
    ang = torch.arange(n).double()[:, None] * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    x = sd["model.embed_tokens.weight"].double()[ids]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w = {k[len(p):]: v.double() for k, v in sd.items() if k.startswith(p)}
        h = _rms(x, w["input_layernorm.weight"], eps)
        q, k, v = (F.linear(h, w[f"self_attn.{m}.weight"], w[f"self_attn.{m}.bias"]).reshape(b, n, nh, hd)
                   .transpose(1, 2) for m in ("q_proj", "k_proj", "v_proj"))
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        att = (q @ k.transpose(2, 3) / math.sqrt(hd)).masked_fill(~causal, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(b, n, d)
        x = x + F.linear(o, w["self_attn.o_proj.weight"], w["self_attn.o_proj.bias"])
        h = _rms(x, w["post_attention_layernorm.weight"], eps)
        x = x + F.linear(F.silu(F.linear(h, w["mlp.gate_proj.weight"])) * F.linear(h, w["mlp.up_proj.weight"]),
                         w["mlp.down_proj.weight"])
    x = _rms(x, sd["model.norm.weight"].double(), eps)
    return F.linear(x, sd["lm_head.weight"].double())


# ---- VisualCloze: a diffusers VisualClozePipeline folder ------------------------------------

def visualcloze_folder(folder: Path, seed: int = 0) -> Path:
    """``VisualClozePipeline.save_pretrained`` with the tiny components of diffusers' own tests
    (huggingface/diffusers ``tests/pipelines/visualcloze/test_pipeline_visualcloze_combined.py``
    ``get_dummy_components``); the tokenizers, which those tests download, are built here
    (a character-level CLIP BPE vocabulary and a word-level T5 tokenizer)."""
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel, VisualClozePipeline
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer, T5Config, T5EncoderModel, T5TokenizerFast

    raw = folder.parent / (folder.name + "-vocab")
    raw.mkdir(parents=True, exist_ok=True)
    chars = "abcdefghijklmnopqrstuvwxyz0123456789.,[]-"
    words = ["<|startoftext|>", "<|endoftext|>"] + [c + "</w>" for c in chars] + list(chars)
    (raw / "vocab.json").write_text(json.dumps({w: i for i, w in enumerate(words)}))
    (raw / "merges.txt").write_text("#version: 0.2\n")
    clip_tok = CLIPTokenizer(str(raw / "vocab.json"), str(raw / "merges.txt"), model_max_length=77)
    text = ("in each row a logical task is demonstrated to achieve image based on grid layout with rows and columns "
            "displaying images arranged side by high-quality depth map sam generated colorful segmentation masks")
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + [("\u2581" + w, -1.0) for w in dict.fromkeys(text.split())]
    pieces += [(c, -5.0) for c in chars + "\u2581"]
    unigram = Tokenizer(models.Unigram(pieces, unk_id=2))
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    t5_tok = T5TokenizerFast(tokenizer_object=unigram, eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
                             extra_ids=0)
    vocab = pieces
    torch.manual_seed(seed)
    pipe = VisualClozePipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=AutoencoderKL(sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                          latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                          shift_factor=0.0609, scaling_factor=1.5035),
        text_encoder=CLIPTextModel(CLIPTextConfig(bos_token_id=0, eos_token_id=1, hidden_size=32, intermediate_size=37,
                                                  num_attention_heads=4, num_hidden_layers=2, pad_token_id=1,
                                                  vocab_size=len(words), projection_dim=32)),
        tokenizer=clip_tok,
        text_encoder_2=T5EncoderModel(T5Config(vocab_size=len(vocab), d_model=32, d_kv=8, d_ff=37, num_layers=2,
                                               num_heads=4)),
        tokenizer_2=t5_tok,
        transformer=FluxTransformer2DModel(patch_size=1, in_channels=12, out_channels=4, num_layers=1,
                                           num_single_layers=1, attention_head_dim=6, num_attention_heads=2,
                                           joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=[2, 2, 2]),
        resolution=32)
    pipe.save_pretrained(str(folder))
    return folder
