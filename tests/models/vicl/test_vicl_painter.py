"""Painter: a tiny configuration saved as the official ``painter_vit_large.pth`` ({"model": ...})
loads through the adapter; batch contract, precisions, canvas layout, weight errors."""

import numpy as np
import pytest
import torch

from _tiny import PAINTER, check_batch_contract, four_requests, image, painter_checkpoint
from icl.models import get_model
from icl.models.requests import AnalogyRequest
from icl.models.vicl.painter import Painter, PainterConfig, PainterNet
from icl.models.weights import WeightsError


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return painter_checkpoint(tmp_path_factory.mktemp("painter"))


def test_official_names_and_shapes():
    with torch.device("meta"):  # the full ViT-L, shapes only
        state = PainterNet(PainterConfig()).state_dict()
    assert state["pos_embed"].shape == (1, 197, 1024)
    assert state["blocks.0.attn.rel_pos_h"].shape == (111, 64)  # global attention on 56 x 28 tokens
    assert state["blocks.23.attn.rel_pos_w"].shape == (55, 64)
    assert state["decoder_embed.weight"].shape == (16 * 16 * 64, 4096)
    for key in ("mask_token", "segment_token_x", "segment_token_y", "patch_embed.proj.weight",
                "blocks.5.mlp.fc1.weight", "norm.weight", "decoder_pred.0.weight", "decoder_pred.1.weight",
                "decoder_pred.3.bias"):
        assert key in state


def test_batch_of_four_two_sizes_fp32(ckpt):
    model = get_model("painter", weights=str(ckpt), config=PAINTER)
    model.load("cpu")
    # tolerance: float32 batched vs single matmuls differ by rounding only
    check_batch_contract(model, four_requests(), atol=1e-5)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precisions(ckpt, precision):
    ref = Painter(weights=str(ckpt), config=PAINTER)
    ref.load("cpu")
    model = Painter(weights=str(ckpt), config=PAINTER)
    model.precision = precision
    model.load("cpu")
    assert next(model.net.parameters()).dtype == {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    reqs = four_requests(1)
    outs = check_batch_contract(model, reqs, atol=2e-2)
    for o, r in zip(outs, ref.predict(reqs)):
        assert float((o - r).abs().mean()) < 0.02


def test_dtype_argument_overrides_precision(ckpt):
    model = Painter(weights=str(ckpt), config=PAINTER, dtype="bf16")
    model.load("cpu")
    assert next(model.net.parameters()).dtype == torch.bfloat16


def test_canvas_layout_against_hand_built(ckpt):
    model = Painter(weights=str(ckpt), config=PAINTER)
    rng = np.random.default_rng(2)
    c_in, c_out = image(rng, 32, 32), image(rng, 64, 64)
    q = np.full((16, 20, 3), (10, 200, 30), np.uint8)  # constant: any resize keeps it exactly
    req = AnalogyRequest("t", "d", "q", [c_in, image(rng, 8, 8)], [c_out, image(rng, 8, 8)], q, (16, 20))
    imgs, tgts = model.canvas(req)
    assert imgs.shape == (64, 32, 3) and tgts.shape == (64, 32, 3)
    np.testing.assert_array_equal(imgs[:32], c_in)  # already 32 x 32: untouched, on top
    assert (imgs[32:] == (10, 200, 30)).all()  # the query below it
    # PIL bicubic 2x down, as the official eval scripts resize colour targets (Image.resize default)
    from PIL import Image

    ref = np.asarray(Image.fromarray(c_out).resize((32, 32), Image.BICUBIC)).astype(int)
    assert np.abs(tgts[:32].astype(int) - ref).max() <= 1
    np.testing.assert_array_equal(tgts[32:], tgts[:32])  # the masked half carries the context target
    mask = model.mask()
    assert mask.shape == (8, 4) and mask[4:].all() and not mask[:4].any()


def test_answer_is_the_bottom_half_resized_nearest(ckpt, monkeypatch):
    model = Painter(weights=str(ckpt), config=PAINTER)
    model.load("cpu")
    canvas = torch.zeros(1, 3, 64, 32)
    canvas[:, 0, 32:, :16] = 5.0  # bottom half, left columns: red saturates after un-normalising
    monkeypatch.setattr(model, "net", lambda imgs, tgts, masked: canvas.expand(imgs.shape[0], -1, -1, -1))
    req = four_requests()[0]
    out = model.predict([req])[0]  # query 24 x 30
    assert out.shape == (24, 30, 3)
    assert torch.all(out[:, :15, 0] == 1) and torch.all(out[:, 15:, 0] < 0.5)


def test_missing_and_wrong_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_WEIGHTS_DIR", str(tmp_path))
    with pytest.raises(WeightsError, match="painter_vit_large.pth.*ICL_WEIGHTS_DIR/painter"):
        Painter(config=PAINTER).load("cpu")
    (tmp_path / "painter").mkdir()
    torch.save({"model": {"pos_embed": torch.zeros(1, 5, 32)}}, tmp_path / "painter" / "painter_vit_large.pth")
    with pytest.raises(WeightsError, match="not a Painter checkpoint.*missing"):
        Painter(config=PAINTER).load("cpu")
    assert Painter(config=PAINTER).weight_files() == (tmp_path / "painter" / "painter_vit_large.pth",)


def test_bad_config():
    with pytest.raises(ValueError, match="unknown config fields"):
        Painter(config={"depht": 3})


def test_sha256_sidecar_is_checked(tmp_path):
    path = painter_checkpoint(tmp_path)
    (tmp_path / "painter_vit_large.pth.sha256").write_text("0" * 64 + "  painter_vit_large.pth\n")
    with pytest.raises(WeightsError, match="does not match"):
        Painter(weights=str(tmp_path), config=PAINTER).load("cpu")
    import hashlib

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "painter_vit_large.pth.sha256").write_text(digest + "  painter_vit_large.pth\n")
    model = Painter(weights=str(tmp_path), config=PAINTER)  # a folder holding the official name
    model.load("cpu")
    assert model.weight_files() == (path,)


def test_compile_flag_wraps_the_network(ckpt):
    # the "eager" backend runs the TorchDynamo path without inductor's (minutes-long on CPU) codegen
    ref = Painter(weights=str(ckpt), config=PAINTER)
    ref.load("cpu")
    model = Painter(weights=str(ckpt), config=PAINTER, compile="eager")
    model.load("cpu")
    assert type(model.net).__name__ == "OptimizedModule"
    reqs = four_requests(4)[:2]
    for a, b in zip(model.predict(reqs), ref.predict(reqs)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert Painter(config=PAINTER, compile="true").compile is True


def test_pickled_code_is_refused(tmp_path):
    path = tmp_path / "painter_vit_large.pth"
    torch.save({"model": {}, "hook": Painter}, path)  # a class reference: not plain data
    with pytest.raises(WeightsError, match="weights_only=True"):
        Painter(weights=str(path), config=PAINTER).load("cpu")


def test_tensor_requests_answer_like_numpy(ckpt):
    model = Painter(weights=str(ckpt), config=PAINTER)
    model.load("cpu")
    reqs = four_requests(5)[:2]
    as_tensors = [AnalogyRequest(r.task, r.dataset, r.query_id, [torch.from_numpy(x) for x in r.context_inputs],
                                 [torch.from_numpy(x) for x in r.context_outputs], torch.from_numpy(r.query),
                                 r.target_size, device="cpu") for r in reqs]
    for a, b in zip(model.predict(as_tensors), model.predict(reqs)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("native", [False, True])
def test_bf16_on_a_cpu_without_native_bf16_warns(ckpt, caplog, monkeypatch, native):
    """The CPU probe (``/proc/cpuinfo`` flags avx512_bf16 / amx_bf16) is replaced: this machine
    has one answer only."""
    import logging

    from icl.models.vicl import _torch

    monkeypatch.setattr(_torch, "cpu_has_fast_bf16", lambda: native)
    with caplog.at_level(logging.WARNING, logger="icl.models.vicl._torch"):
        Painter(weights=str(ckpt), config=PAINTER, dtype="bf16").load("cpu")
    assert ("emulated and slow" in caplog.text) is (not native)
