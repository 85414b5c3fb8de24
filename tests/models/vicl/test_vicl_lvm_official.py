"""LVM's published tokenizer and DeLVM's InternLM decoder, written under their official key
names (see ``_official.py`` for the sources), load through ``icl``'s real path and match
independent reference forwards; strict loads; LVM/DeLVM preprocessing and decoding defaults
as the official scripts (ytongbai/LVM ``evaluation/vqlm_demo/utils.py`` and ``inference.py``;
ggjy/DeLVM ``InternLM/tools/utils.py`` and ``demo.ipynb``)."""

import numpy as np
import pytest
import torch
from PIL import Image

from _official import (PUBLISHED_MUSE, TINY_INTERNLM, TINY_PUBLISHED_MUSE, internlm_folder, internlm_logits,
                       internlm_state, muse_decode_codes, muse_encode_codes, muse_folder, muse_shapes)
from _tiny import four_requests
from icl.models import get_model
from icl.models.requests import AnalogyRequest
from icl.models.vicl._vqgan import VQGAN, config_from_muse
from icl.models.vicl.canvas import resize_pil
from icl.models.vicl.lvm import load_llm, load_muse_vqgan
from icl.models.weights import WeightsError


def test_published_tokenizer_config_builds_the_published_size():
    """585 MB published weight file = 146,244,675 fp32 parameters; the key set is open-muse's."""
    with torch.device("meta"):
        net = VQGAN(config_from_muse(PUBLISHED_MUSE))
    shapes = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    assert shapes == muse_shapes(PUBLISHED_MUSE)
    assert sum(v.numel() for v in net.state_dict().values()) == 146_244_675
    assert not any("attn" in k for k in shapes)


@pytest.fixture(scope="module")
def vq_dir(tmp_path_factory):
    return muse_folder(tmp_path_factory.mktemp("vq") / "vqgan", TINY_PUBLISHED_MUSE)


def test_published_tokenizer_matches_reference_forward(vq_dir):
    net = load_muse_vqgan(vq_dir)
    sd = torch.load(vq_dir / "pytorch_model.bin", weights_only=True)
    x = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = muse_encode_codes(sd, TINY_PUBLISHED_MUSE, x)
        codes = net.encode_codes(x).flatten(1)
        assert len(set(ref.flatten().tolist())) >= 3  # the codes are informative
        assert torch.equal(codes, ref)
        torch.testing.assert_close(net.decode_codes(codes.reshape(3, 2, 2)),
                                   muse_decode_codes(sd, TINY_PUBLISHED_MUSE, ref).clamp(0, 1), atol=1e-5, rtol=0)


def test_tokenizer_missing_or_extra_key_is_refused(tmp_path):
    folder = muse_folder(tmp_path / "vq", TINY_PUBLISHED_MUSE)
    sd = torch.load(folder / "pytorch_model.bin", weights_only=True)
    sd["encoder.mid.attn_1.q.weight"] = torch.zeros(1)
    torch.save(sd, folder / "pytorch_model.bin")
    with pytest.raises(WeightsError, match="unexpected.*encoder.mid.attn_1.q.weight"):
        load_muse_vqgan(folder)
    del sd["encoder.mid.attn_1.q.weight"], sd["decoder.up.3.block.1.conv2.bias"]
    torch.save(sd, folder / "pytorch_model.bin")
    with pytest.raises(WeightsError, match=r"vq/pytorch_model.bin.*missing \(decoder.up.3.block.1.conv2.bias"):
        load_muse_vqgan(folder)


def test_delvm_internlm_loads_with_biases_and_matches_reference(tmp_path):
    folder = internlm_folder(tmp_path / "llm")
    llm = load_llm(folder, torch.float32)
    assert llm.config.attention_bias and llm.model.layers[0].self_attn.q_proj.bias is not None
    ids = torch.randint(0, 48, (2, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = llm(input_ids=ids).logits.double()
    ref = internlm_logits(internlm_state(TINY_INTERNLM), TINY_INTERNLM, ids)
    torch.testing.assert_close(got, ref, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("change, pattern", [
    ("drop", r"missing \(model.layers.1.mlp.down_proj.weight"),
    ("extra", r"unexpected \(model.layers.0.self_attn.extra.weight"),
    ("shape", r"wrong shape \(lm_head.weight"),
])
def test_decoder_load_is_strict(tmp_path, change, pattern):
    sd = internlm_state(TINY_INTERNLM)
    if change == "drop":
        del sd["model.layers.1.mlp.down_proj.weight"]
    elif change == "extra":
        sd["model.layers.0.self_attn.extra.weight"] = torch.zeros(2)
    else:
        sd["lm_head.weight"] = torch.zeros(49, 32)
    folder = internlm_folder(tmp_path / "llm", state=sd)
    with pytest.raises(WeightsError, match=pattern) as err:
        load_llm(folder, torch.float32)
    assert str(folder) in str(err.value)


def test_unmapped_model_type_and_truncated_file_are_refused(tmp_path):
    folder = internlm_folder(tmp_path / "llm")
    cfg = (folder / "config.json").read_text().replace('"internlm"', '"mistral"')
    (folder / "config.json").write_text(cfg)
    with pytest.raises(WeightsError, match="model_type 'mistral' is not"):
        load_llm(folder, torch.float32)
    from transformers import LlamaConfig, LlamaForCausalLM

    good = tmp_path / "llama"
    LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                 num_attention_heads=2)).save_pretrained(str(good))
    st = good / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    with pytest.raises(WeightsError, match=f"{good}/model.safetensors: truncated: tensor "):
        load_llm(good, torch.float32)


@pytest.fixture(scope="module")
def delvm_dirs(tmp_path_factory):
    from _tiny import MUSE

    root = tmp_path_factory.mktemp("delvm")
    vq = muse_folder(root / "vqgan", dict(MUSE, attn_resolutions=[], no_attn_mid_block=True))
    cfg = dict(TINY_INTERNLM, max_position_embeddings=128)
    return internlm_folder(root / "llm", cfg), vq


def test_delvm_adapter_runs_internlm_and_keeps_tokenizer_fp32(delvm_dirs):
    llm, vq = delvm_dirs
    model = get_model("delvm", weights=str(llm), vqgan_weights=str(vq), dtype="bf16")
    model.load("cpu")
    assert next(model.net.llm.parameters()).dtype == torch.bfloat16
    assert {p.dtype for p in model.net.vqgan.parameters()} == {torch.float32}
    assert not model.do_sample  # DeLVM's GenerationConfig sets no do_sample: greedy
    outs = model.predict(four_requests(shots=(1, 1, 2, 1)))
    assert [tuple(o.shape) for o in outs] == [(24, 30, 3), (40, 22, 3), (24, 30, 3), (40, 22, 3)]


def test_delvm_centre_crop_as_encode_transform(delvm_dirs):
    """torchvision Resize(s, BILINEAR) + CenterCrop(s) on a PIL image, s = 16 here."""
    llm, vq = delvm_dirs
    model = get_model("delvm", weights=str(llm), vqgan_weights=str(vq))
    model.load("cpu")
    rng = np.random.default_rng(0)
    wide = rng.integers(0, 256, (30, 75, 3), dtype=np.uint8)
    pil = Image.fromarray(wide).resize((int(16 * 75 / 30), 16), Image.BILINEAR)
    left = int(round((pil.width - 16) / 2.0))
    ref = np.asarray(pil.crop((left, 0, left + 16, 16))).astype(int)
    assert np.abs(model.prepare(wide).astype(int) - ref).max() <= 1
    # the answer fills the query's size, the generated square at the crop's place
    req = AnalogyRequest("t", "d", "q", [wide], [wide], wide, (30, 75))
    assert tuple(model.predict([req])[0].shape) == (30, 75, 3)


def test_lvm_official_decoding_preset_and_greedy(tmp_path):
    llm, vq = internlm_folder(tmp_path / "llm"), tmp_path / "vq"
    from _tiny import MUSE

    muse_folder(vq, dict(MUSE, attn_resolutions=[], no_attn_mid_block=True))
    official = get_model("lvm", weights=str(llm), vqgan_weights=str(vq))
    assert (official.do_sample, official.temperature, official.top_k, official.top_p) == (True, 1.0, 50, 1.0)
    greedy = get_model("lvm", weights=str(llm), vqgan_weights=str(vq), decoding="greedy")
    assert not greedy.do_sample
    with pytest.raises(ValueError, match="decoding"):
        get_model("lvm", decoding="beam")


@pytest.mark.parametrize("src, dst", [((480, 640), (256, 256)), ((100, 37), (256, 256)), ((256, 256), (448, 448)),
                                      ((7, 9), (64, 64)), ((300, 20), (448, 448))])
def test_resize_equals_pil_bicubic_within_one_level(src, dst):
    rng = np.random.default_rng(sum(src))
    for im in (rng.integers(0, 256, (*src, 3), dtype=np.uint8),
               ((rng.random((*src, 3)) > 0.5) * 255).astype(np.uint8)):
        ref = np.asarray(Image.fromarray(im).resize(dst[::-1], Image.BICUBIC)).astype(int)
        assert np.abs(resize_pil(im, dst).astype(int) - ref).max() <= 1


@pytest.mark.parametrize("safe", [True, False])
def test_streamed_load_of_sharded_tied_checkpoints_equals_transformers(tmp_path, safe):
    """Shards (``*.index.json``), tied embeddings (no ``lm_head.weight`` in the files) and both
    file formats load through the streaming reader as transformers' own ``from_pretrained``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      tie_word_embeddings=True)
    LlamaForCausalLM(cfg).to(torch.float16).save_pretrained(str(tmp_path / "llm"), max_shard_size="20KB",
                                                            safe_serialization=safe)
    assert len(list((tmp_path / "llm").glob("*.index.json"))) == 1
    ours = load_llm(tmp_path / "llm", torch.float32)
    ref = LlamaForCausalLM.from_pretrained(str(tmp_path / "llm"), dtype=torch.float32).eval()
    ids = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=ids).logits, ref(input_ids=ids).logits, atol=1e-5, rtol=0)
    assert ours.lm_head.weight.data_ptr() == ours.model.embed_tokens.weight.data_ptr()


def test_kv_cache_argument_under_both_spellings():
    """transformers renamed ``past_key_values`` to ``cache`` (5.18 has the old name only):
    the adapter passes whichever the decoder's forward takes."""
    from torch import nn

    from icl.models.vicl.lvm import _cache_name

    class Old(nn.Module):
        def forward(self, input_ids, past_key_values=None, use_cache=False):
            return input_ids

    class New(nn.Module):
        def forward(self, input_ids, cache=None, use_cache=False):
            return input_ids

    assert _cache_name(Old()) == "past_key_values" and _cache_name(New()) == "cache"
    assert _cache_name(torch.compile(New(), backend="eager")) == "cache"
