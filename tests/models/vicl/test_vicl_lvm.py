"""LVM and DeLVM: a tiny LlamaForCausalLM (save_pretrained) and an open-muse VQGAN folder
(config.json + pytorch_model.bin) load through the adapters; batch contract, greedy and seeded
sampling, precisions, the visual-sentence layout, context overflow."""

import numpy as np
import pytest
import torch

from _tiny import check_batch_contract, four_requests, image, lvm_folders
from icl.models import ContextOverflowError, get_model
from icl.models.requests import AnalogyRequest
from icl.models.vicl.lvm import LVM, pick_tokens
from icl.models.weights import WeightsError


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return lvm_folders(tmp_path_factory.mktemp("lvm"))


def loaded(folders, name="lvm", **kw):
    llm, vq = folders
    model = get_model(name, weights=str(llm), vqgan_weights=str(vq), **kw)
    model.load("cpu")
    return model


@pytest.mark.parametrize("name", ["lvm", "delvm"])
def test_batch_of_four_two_sizes_mixed_shots(folders, name):
    model = loaded(folders, name)
    assert model.tokens_per_image == 16 and model.n_codes == 24
    check_batch_contract(model, four_requests(shots=(1, 2, 1, 2)), atol=1e-4)


def test_sampling_is_seeded_per_request(folders):
    model = loaded(folders, do_sample=True, temperature=1.5, top_k=10, top_p=0.95)
    reqs = four_requests(2)
    outs = check_batch_contract(model, reqs, atol=1e-4)  # draws do not depend on the batch
    greedy = loaded(folders, decoding="greedy").predict(reqs)
    assert any(not torch.allclose(a, b) for a, b in zip(outs, greedy))


def test_pick_tokens_masks_non_codes_and_top_k():
    logits = torch.tensor([[0.0, 1.0, 5.0, 9.0], [3.0, 0.0, 0.0, 9.0]])
    assert pick_tokens(logits, 3, False, 1.0, 0, 1.0, []).tolist() == [2, 0]  # token 3 is not a code
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    for _ in range(20):
        assert pick_tokens(logits, 3, True, 1.0, 1, 1.0, gens).tolist() == [2, 0]  # top-1 sampling is greedy
    draws = {tuple(pick_tokens(logits, 3, True, 100.0, 0, 1.0, gens).tolist()) for _ in range(50)}
    assert len(draws) > 1


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precisions(folders, precision):
    model = loaded(folders, dtype=precision)
    assert next(model.net.llm.parameters()).dtype == {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    check_batch_contract(model, four_requests(3)[:2], atol=5e-2)


def test_visual_sentence_layout(folders, monkeypatch):
    model = loaded(folders)
    rng = np.random.default_rng(5)
    colours = [(200, 0, 0), (0, 200, 0), (0, 0, 200), (90, 90, 0), (0, 90, 90)]
    ins = [np.full((12, 14, 3), colours[0], np.uint8), np.full((30, 30, 3), colours[2], np.uint8)]
    outs = [np.full((12, 14, 3), colours[1], np.uint8), np.full((30, 30, 3), colours[3], np.uint8)]
    q = np.full((20, 10, 3), colours[4], np.uint8)
    req = AnalogyRequest("t", "d", "q", ins, outs, q, (20, 10))
    images = model.sentence_images(req)
    assert len(images) == 5 and all(im.shape == (16, 16, 3) for im in images)
    for im, c in zip(images, colours):  # c_in_1, c_out_1, c_in_2, c_out_2, query
        assert (im == c).all()
    seen = {}

    def fake_generate(prompt, gens):
        seen["prompt"] = prompt.clone()
        return torch.zeros(prompt.shape[0], model.tokens_per_image, dtype=torch.long)

    monkeypatch.setattr(model, "generate", fake_generate)
    model.predict([req])
    expect = model.tokenize(images).reshape(1, -1)  # 5 images x 16 tokens, in sentence order
    assert seen["prompt"].shape == (1, 80)
    assert torch.equal(seen["prompt"], expect)
    assert image(rng, 1, 1).shape == (1, 1, 3)


def test_context_overflow_is_per_request(folders):
    model = loaded(folders)  # max_position_embeddings 256 = 16 images of 16 tokens
    rng = np.random.default_rng(6)
    fits = AnalogyRequest("t", "d", "ok", [image(rng, 8, 8)] * 7, [image(rng, 8, 8)] * 7, image(rng, 8, 8), (8, 8))
    assert model.predict([fits])[0].shape == (8, 8, 3)  # 2 * 7 + 2 = 16 images
    big = AnalogyRequest("t", "d", "big", [image(rng, 8, 8)] * 8, [image(rng, 8, 8)] * 8, image(rng, 8, 8), (8, 8))
    with pytest.raises(ContextOverflowError, match="8 shots need 288 positions.*t/d/big"):
        model.predict([big])


def test_missing_weights_name_the_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_WEIGHTS_DIR", str(tmp_path))
    with pytest.raises(WeightsError, match="ICL_WEIGHTS_DIR/delvm/llm"):
        get_model("delvm").load("cpu")
    with pytest.raises(ValueError, match="temperature"):
        LVM(temperature=0)
