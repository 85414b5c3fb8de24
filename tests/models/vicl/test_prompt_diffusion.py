"""Prompt Diffusion on a tiny randomly initialised SD + ControlNet folder, loaded the real way.

Tolerances (outputs are float images in [0, 1]): a batch of 4 equals four singles within
1e-4 (max abs) in fp32 and 2e-2 in bf16 (bf16 rounds differently in other batch shapes).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from icl.models import AnalogyRequest, get_model
from icl.models.vicl._diffusion_random import write_random_sd_folder
from icl.models.vicl.prompt_diffusion import PromptDiffusion
from icl.models.weights import WeightsError

RES = 64  # 8 x 8 latents
pytestmark = pytest.mark.usefixtures("one_thread")
FAST = dict(steps=3, resolution=RES)




@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_random_sd_folder(tmp_path_factory.mktemp("pd") / "sd", "tiny", controlnet=True)


@pytest.fixture(scope="module")
def models(folder):
    loaded = {}
    for precision in ("fp32", "bf16"):
        m = PromptDiffusion(weights=folder, precision=precision, **FAST)
        m.load("cpu")
        loaded[precision] = m
    return loaded


def _request(rng, i, seed, shots=1, hw=(40, 52)):
    def im(h, w):
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)

    q_hw = (hw[0] + i, hw[1] - i)
    return AnalogyRequest("colorization", "ds", f"q{i}", [im(*hw) for _ in range(shots)],
                          [im(*hw) for _ in range(shots)], im(*q_hw), q_hw, seed=seed)


def _requests(n=4, seed0=7):
    rng = np.random.default_rng(3)
    return [_request(rng, i, seed0 + i) for i in range(n)]


# diffusers is imported inside the tests: at collection it would import Triton before the GPU
# tests choose its interpreter mode
def test_controlnet_forward_matches_diffusers_controlnet(folder):
    from diffusers import ControlNetModel

    from icl.models.vicl._diffusion_controlnet import PromptDiffusionControlNetModel

    cn = PromptDiffusionControlNetModel.from_pretrained(folder / "controlnet").eval()
    assert cn.config.conditioning_channels == 6
    keys = cn.state_dict().keys()
    assert any(k.startswith("controlnet_query_cond_embedding.conv_in.") for k in keys)
    assert any(k.startswith("controlnet_cond_embedding.conv_in.") for k in keys)
    g = torch.Generator().manual_seed(1)
    x, text = torch.randn(2, 4, 8, 8, generator=g), torch.randn(2, 77, 16, generator=g)
    pair, query = torch.randn(2, 6, 64, 64, generator=g), torch.randn(2, 3, 64, 64, generator=g)
    with torch.no_grad():
        ours_down, ours_mid = cn(x, 500, text, pair, query, return_dict=False)
        # a zero query embedding reduces Prompt Diffusion's ControlNet to diffusers' own
        cn.controlnet_query_cond_embedding.conv_out.weight.zero_()
        cn.controlnet_query_cond_embedding.conv_out.bias.zero_()
        zero_down, zero_mid = cn(x, 500, text, pair, query, return_dict=False)
        ref_down, ref_mid = ControlNetModel.forward(cn, x, 500, text, pair, return_dict=False)
    for a, b in zip([*zero_down, zero_mid], [*ref_down, ref_mid]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert (ours_mid - zero_mid).abs().max() > 1e-3  # the query conditioning is used


def test_conditions_layout_and_range(models):
    m = models["fp32"]
    black, white = np.zeros((10, 12, 3), np.uint8), np.full((20, 8, 3), 255, np.uint8)
    grey = np.full((7, 9, 3), 51, np.uint8)
    req = AnalogyRequest("t", "d", "q", [black], [white], grey, (7, 9))
    pair, query = m._conditions([req])
    assert pair.shape == (1, 6, RES, RES) and query.shape == (1, 3, RES, RES)
    assert torch.all(pair[:, :3] == -1) and torch.all(pair[:, 3:] == 1)  # source first, then target
    torch.testing.assert_close(query, torch.full_like(query, 2 * 51 / 255 - 1))
    unit = PromptDiffusion(condition_range="unit", resolution=RES)
    unit.device, unit._dtype = "cpu", torch.float32
    pair, query = unit._conditions([req])
    assert torch.all(pair[:, :3] == 0) and torch.all(pair[:, 3:] == 1)
    torch.testing.assert_close(query, torch.full_like(query, 51 / 255))


def test_batch_of_four_fp32_bf16_invariant_to_batching(models):
    reqs = _requests()
    for precision, tol in (("fp32", 1e-4), ("bf16", 2e-2)):
        m = models[precision]
        out = m.predict(reqs)
        assert len(out) == 4
        for o, r in zip(out, reqs):
            assert tuple(o.shape) == (*r.query.shape[:2], 3) and o.dtype == torch.float32
            assert torch.isfinite(o).all() and o.min() >= 0 and o.max() <= 1
        singles = [m.predict([r])[0] for r in reqs]
        diff = max((a - b).abs().max().item() for a, b in zip(out, singles))
        assert diff <= tol, f"{precision}: batch of 4 vs singles differ by {diff}"
        assert (out[0][:40, :50] - out[1][:40, :50]).abs().mean() > 1e-3  # requests differ


def test_determinism_and_seed(models):
    m = models["fp32"]
    reqs = _requests(2)
    a, b = m.predict(reqs), m.predict(reqs[::-1])[::-1]
    for x, y in zip(a, b):
        assert torch.equal(x, y)  # same seed, same output, whatever the order
    other = [AnalogyRequest(**{**r.__dict__, "seed": r.seed + 1}) for r in reqs]
    for x, y in zip(a, m.predict(other)):
        assert (x - y).abs().mean() > 1e-3


def test_example_pair_and_query_condition_the_output_first_pair_only(models):
    m = models["fp32"]
    rng = np.random.default_rng(5)
    base = _request(rng, 0, 11)
    other_out = AnalogyRequest(**{**base.__dict__, "context_outputs": [255 - base.context_outputs[0]]})
    other_query = AnalogyRequest(**{**base.__dict__, "query": 255 - base.query})
    more_shots = AnalogyRequest(**{**base.__dict__, "context_inputs": base.context_inputs * 2,
                                   "context_outputs": base.context_outputs + [base.context_inputs[0]]})
    out = m.predict([base, other_out, other_query, more_shots])
    # the random tiny ControlNet is weak; batch effects are below 1e-5, so 1e-4 is a real change
    assert (out[0] - out[1]).abs().mean() > 1e-4
    assert (out[0] - out[2]).abs().mean() > 1e-4
    torch.testing.assert_close(out[0], out[3], atol=1e-4, rtol=0)  # K-shot: the first pair only


def test_stochastic_scheduler_draws_from_the_request_generator(folder):
    m = PromptDiffusion(weights=folder, scheduler="ddpm", **FAST)
    m.load("cpu")
    reqs = _requests(3)
    out = m.predict(reqs)
    for o, r in zip(out, reqs):
        torch.testing.assert_close(o, m.predict([r])[0], atol=1e-4, rtol=0)
    assert torch.equal(out[1], m.predict(reqs)[1])


def test_unguided_when_prompts_match_equals_guidance_one(folder):
    reqs = _requests(2)
    same = PromptDiffusion(weights=folder, prompt="abc", added_prompt="", negative_prompt="abc", **FAST)
    one = PromptDiffusion(weights=folder, prompt="abc", added_prompt="", negative_prompt="xyz", guidance_scale=1.0,
                          **FAST)
    default = PromptDiffusion(weights=folder, **FAST)
    default.load("cpu")
    assert default._guided  # "" (no added text by default) against the official negative prompt
    same.load("cpu")
    one.load("cpu")
    assert not same._guided and not one._guided
    for a, b in zip(same.predict(reqs), one.predict(reqs)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_registry_weights_and_errors(folder, tmp_path):
    m = get_model("prompt-diffusion", weights=str(folder), steps="2")
    assert isinstance(m, PromptDiffusion) and m.steps == 2
    assert [p.name for p in m.weight_files()] == [folder.name, "controlnet"]
    with pytest.raises(WeightsError, match="not found"):
        PromptDiffusion(weights=tmp_path / "absent").weight_files()
    with pytest.raises(WeightsError, match="missing unet/, vae/"):
        PromptDiffusion(weights=tmp_path).weight_files()
    with pytest.raises(WeightsError, match="controlnet"):
        PromptDiffusion(weights=folder, controlnet=tmp_path / "absent").weight_files()
    with pytest.raises(ValueError, match="scheduler"):
        PromptDiffusion(scheduler="nope")
    with pytest.raises(ValueError, match="resolution"):
        PromptDiffusion(resolution=100)


def test_bad_request_is_named(models):
    rng = np.random.default_rng(0)
    req = _request(rng, 0, 1)
    bad = AnalogyRequest(**{**req.__dict__, "query": req.query.astype(np.float32)})
    with pytest.raises(ValueError, match=r"request 1 .*query must be a uint8"):
        models["fp32"].predict([req, bad])


def test_text_suffix_is_off_by_default_and_can_be_turned_on():
    """The official notebook joins ``prompt, a_prompt`` (a_prompt ", best quality, extremely
    detailed", Zhendong-Wang/Prompt-Diffusion); the benchmark gives images only, so it is off
    unless asked for."""
    assert PromptDiffusion().added_prompt == ""
    assert PromptDiffusion(added_prompt="official").added_prompt == "best quality, extremely detailed"


def test_dtype_and_compile_arguments_like_every_neural_adapter(folder):
    m = get_model("prompt-diffusion", weights=str(folder), dtype="bf16", compile="false", **FAST)
    m.precision = "fp32"  # the runner's --dtype: the model's own dtype argument wins
    m.load("cpu")
    assert m._parts["unet"].dtype == torch.bfloat16 and m._controlnet.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="dtype"):
        PromptDiffusion(dtype="fp8")


def test_missing_unet_key_is_refused_naming_it(folder, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    broken = tmp_path / "sd"
    shutil.copytree(folder, broken)
    path = next((broken / "unet").glob("*.safetensors"))
    state = load_file(str(path))
    key = sorted(state)[0]
    state.pop(key)
    save_file(state, str(path), metadata={"format": "pt"})
    with pytest.raises(WeightsError, match=rf"sd/unet.*missing \({key}"):
        PromptDiffusion(weights=broken, **FAST).load("cpu")
