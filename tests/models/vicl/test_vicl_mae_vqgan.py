"""MAE-VQGAN: a tiny configuration saved as the official ``checkpoint-1000.pth`` ({"model": ...},
VQGAN under ``vae.*``, or taming's ``last.ckpt`` beside it) loads through the adapter; batch
contract, precisions, canvas and mask layout, the answer crop."""

import numpy as np
import pytest
import torch

from _tiny import MAE, check_batch_contract, four_requests, image, mae_checkpoint
from icl.models import get_model
from icl.models.requests import AnalogyRequest
from icl.models.vicl.mae_vqgan import MAEVQGAN, MAEVQGANConfig, MAEVQGANNet
from icl.models.weights import WeightsError


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return mae_checkpoint(tmp_path_factory.mktemp("mae"))


def test_official_names_and_shapes():
    with torch.device("meta"):
        state = MAEVQGANNet(MAEVQGANConfig()).state_dict()
    assert state["pos_embed"].shape == (1, 197, 1024) and state["decoder_pos_embed"].shape == (1, 197, 512)
    assert state["decoder_pred.weight"].shape == (1024, 512)
    assert state["vae.quantize.embedding.weight"].shape == (1024, 256)
    for key in ("cls_token", "mask_token", "blocks.23.attn.qkv.weight", "decoder_blocks.7.mlp.fc2.bias",
                "vae.encoder.down.4.block.1.norm2.weight", "vae.encoder.down.3.downsample.conv.weight",
                "vae.encoder.down.4.attn.0.q.weight", "vae.decoder.up.4.attn.2.proj_out.weight",
                "vae.decoder.up.1.upsample.conv.weight", "vae.decoder.mid.attn_1.k.weight",
                "vae.decoder.up.3.block.0.nin_shortcut.weight",
                "vae.quant_conv.weight", "vae.post_quant_conv.bias"):
        assert key in state, key
    assert not any(".attn." in k for k in state if k.startswith("vae.encoder.down.3."))  # attention at 16 px only


def test_batch_of_four_two_sizes_fp32(ckpt):
    model = get_model("mae-vqgan", weights=str(ckpt), config=MAE)
    model.load("cpu")
    check_batch_contract(model, four_requests(), atol=1e-5)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precisions(ckpt, precision):
    model = MAEVQGAN(weights=str(ckpt), config=MAE)
    model.precision = precision
    model.load("cpu")
    check_batch_contract(model, four_requests(1), atol=5e-2)


def test_vqgan_from_taming_last_ckpt(tmp_path):
    path = mae_checkpoint(tmp_path, seed=3, with_vae=False)
    model = MAEVQGAN(weights=str(path), config=MAE)
    assert model.weight_files() == (path, tmp_path / "last.ckpt")
    model.load("cpu")
    torch.manual_seed(3)
    ref = MAEVQGANNet(MAEVQGANConfig.from_overrides(MAE))
    assert torch.equal(model.net.vae.quantize.embedding.weight, ref.vae.quantize.embedding.weight)
    (tmp_path / "last.ckpt").unlink()
    with pytest.raises(WeightsError, match="no vae.* tensors"):
        MAEVQGAN(weights=str(path), config=MAE).load("cpu")


def test_canvas_and_mask_layout():
    model = MAEVQGAN(config=MAE)
    rng = np.random.default_rng(4)
    colours = [(250, 0, 0), (0, 250, 0), (0, 0, 250)]
    c_in, c_out, q = (np.full((40, 50, 3), c, np.uint8) for c in colours)
    req = AnalogyRequest("t", "d", "q", [c_in, image(rng, 9, 9)], [c_out, image(rng, 9, 9)], q, (40, 50))
    canvas = model.canvas(req)  # 64 x 64, quadrants of 31 with a 2 px white gap
    expect = np.full((64, 64, 3), 255, np.uint8)
    expect[:31, :31], expect[:31, 33:], expect[33:, :31] = colours
    np.testing.assert_array_equal(canvas, expect)
    vis = model.visible()
    grid = np.ones((4, 4), bool)
    grid[2:, 2:] = False
    np.testing.assert_array_equal(vis.numpy(), np.flatnonzero(grid))


def test_answer_is_the_decoded_bottom_right_quadrant(ckpt, monkeypatch):
    model = MAEVQGAN(weights=str(ckpt), config=MAE)
    model.load("cpu")
    decoded = torch.zeros(1, 3, 64, 64)
    decoded[:, 1, 33:, 33:] = 1.0  # green exactly on the answer quadrant
    monkeypatch.setattr(model.net.vae, "decode_codes", lambda codes: decoded.expand(codes.shape[0], -1, -1, -1))
    out = model.predict([four_requests()[1]])[0]
    assert out.shape == (40, 22, 3)
    torch.testing.assert_close(out[..., 1], torch.ones(40, 22), atol=1e-6, rtol=0)
    assert torch.all(out[..., 0] == 0)


def _lightning_classes():
    """Classes as a pytorch-lightning 1.x / OmegaConf install defines them, in a module that is
    removed again: the checkpoint then names classes that cannot be imported."""
    import sys
    import types

    mod = types.ModuleType("pytorch_lightning_model_checkpoint_stub")
    exec("class ModelCheckpoint:\n    pass\n"
         "class DictConfig:\n    def __init__(self, content):\n        self._content = content\n", mod.__dict__)
    sys.modules[mod.__name__] = mod
    return mod


@pytest.mark.parametrize("zipped", [True, False])
def test_vqgan_from_a_lightning_last_ckpt_with_pickled_objects(tmp_path, zipped):
    """taming-transformers' ``vqgan_imagenet_f16_1024/checkpoints/last.ckpt`` is a Lightning
    checkpoint: ``callbacks`` keyed by the ModelCheckpoint class, hyper-parameters as OmegaConf
    objects, beside ``state_dict`` (and, saved by torch < 1.6, in the legacy non-zip format).
    Its tensors load without importing or running any of those classes."""
    import sys

    path = mae_checkpoint(tmp_path, seed=3, with_vae=False)
    plain = torch.load(tmp_path / "last.ckpt", weights_only=True)
    mod = _lightning_classes()
    try:
        ckpt = {"epoch": 3, "global_step": 1000, "pytorch-lightning_version": "1.0.8",
                "callbacks": {mod.ModelCheckpoint: {"best_model_score": torch.tensor(0.5)}},
                "hyper_parameters": mod.DictConfig({"embed_dim": 256}), "optimizer_states": [{"state": {}}],
                "state_dict": plain["state_dict"]}
        torch.save(ckpt, tmp_path / "last.ckpt", _use_new_zipfile_serialization=zipped)
    finally:
        del sys.modules[mod.__name__]
    model = MAEVQGAN(weights=str(path), config=MAE)
    model.load("cpu")
    torch.manual_seed(3)
    ref = MAEVQGANNet(MAEVQGANConfig.from_overrides(MAE))
    assert torch.equal(model.net.vae.quantize.embedding.weight, ref.vae.quantize.embedding.weight)
    assert "pytorch_lightning_model_checkpoint_stub" not in sys.modules


def test_a_checkpoint_that_calls_code_is_refused(tmp_path):
    import os

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = mae_checkpoint(tmp_path, seed=3, with_vae=False)
    plain = torch.load(tmp_path / "last.ckpt", weights_only=True)
    torch.save({"state_dict": plain["state_dict"], "x": Payload()}, tmp_path / "last.ckpt")
    with pytest.raises(WeightsError, match=r"last.ckpt: .*(refused|cannot read)"):
        MAEVQGAN(weights=str(path), config=MAE).load("cpu")
    assert not marker.exists()
