"""SD-VICL on a tiny randomly initialised Stable Diffusion folder, loaded the real way.

Tolerances (outputs are float images in [0, 1]): a batch equals its singles within 1e-4
(max abs) in fp32; in bf16 within a mean abs difference of 2.5e-2, which is below bf16's own
distance to fp32 on this model (different batch shapes round differently, and the re-wired,
contrasted attention and AdaIN amplify it on a random model).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from icl.models import AnalogyRequest, get_model
from icl.models.vicl import _diffusion_rewire as rw
from icl.models.vicl import _diffusion_sd as sd
from icl.models.vicl._diffusion_random import SD15_SCHEDULER, write_random_sd_folder
from icl.models.vicl.sd_vicl import SDVICL, adain, posterior

RES = 64  # 8 x 8 latents
# few steps, every mechanism active from the first generated step
pytestmark = pytest.mark.usefixtures("one_thread")
FAST = dict(steps=5, skip_steps=1, resolution=RES, rewire_full_start=0, rewire_half_start=0, adain_start=0)




@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_random_sd_folder(tmp_path_factory.mktemp("sdvicl") / "sd", "tiny")


def _load(folder, **kwargs):
    m = SDVICL(weights=folder, **{**FAST, **kwargs})
    m.load("cpu")
    return m


@pytest.fixture(scope="module")
def model(folder):
    return _load(folder)


def _request(rng, i, seed, shots=1, hw=(36, 44)):
    def im(h, w):
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)

    q_hw = (hw[0] + i, hw[1] - i)
    return AnalogyRequest("edges", "ds", f"q{i}", [im(*hw) for _ in range(shots)], [im(*hw) for _ in range(shots)],
                          im(*q_hw), q_hw, seed=seed)


def _requests(n=4, shots=1, seed0=21):
    rng = np.random.default_rng(8)
    return [_request(rng, i, seed0 + i, shots) for i in range(n)]


def _reconstruction(m, query):
    """The plain pipeline's answer with nothing re-wired: the VAE round trip of the query."""
    x = sd.images_to_tensor([query], RES, "cpu", m._dtype)
    return sd.resize_back(sd.vae_decode(m._parts["vae"], sd.vae_encode(m._parts["vae"], x))[0], query.shape[:2])


def test_posterior_step_matches_diffusers_ddim():
    # diffusers is imported inside the tests: at collection it would import Triton before the
    # GPU tests choose its interpreter mode
    from diffusers import DDIMScheduler

    sched = DDIMScheduler.from_config(SD15_SCHEDULER)
    sched.set_timesteps(10)
    g = torch.Generator().manual_seed(0)
    x, eps, z = (torch.randn(2, 4, 8, 8, generator=g) for _ in range(3))
    for t in (sched.timesteps[0], sched.timesteps[5], sched.timesteps[-1]):
        prev = int(t) - 1000 // 10
        a_t = sched.alphas_cumprod[int(t)]
        a_prev = sched.alphas_cumprod[prev] if prev >= 0 else sched.final_alpha_cumprod
        mean, sigma = posterior(eps, x, a_t, a_prev)
        ref = sched.step(eps, t, x, eta=1.0, variance_noise=z).prev_sample
        torch.testing.assert_close(mean + sigma * z, ref, atol=1e-5, rtol=1e-5)


def test_adain_takes_the_pooled_target_statistics():
    g = torch.Generator().manual_seed(1)
    content = torch.randn(4, 8, 8, generator=g) * 3 + 1
    style = torch.randn(2, 4, 8, 8, generator=g) * 0.5 - 2
    out = adain(content, style)
    pooled = style.transpose(0, 1).reshape(4, -1)
    torch.testing.assert_close(out.reshape(4, -1).mean(1), pooled.mean(1), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.reshape(4, -1).std(1), pooled.std(1), atol=1e-3, rtol=1e-3)
    # per channel an increasing affine map of the content: the spatial pattern is the content's
    for c in range(4):
        assert torch.corrcoef(torch.stack([out[c].flatten(), content[c].flatten()]))[0, 1] > 0.9999


@pytest.mark.parametrize("contrast", [1.0, 1.67])
def test_rewired_attention_against_float64_reference(contrast):
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(3, 2, 10, 4, generator=g), torch.randn(3, 2, 20, 4, generator=g), \
        torch.randn(3, 2, 20, 4, generator=g)
    tau = 0.4
    p = ((q.double() @ k.double().transpose(-1, -2)) / (tau * 2.0)).softmax(-1)
    p = (p.mean(-1, keepdim=True) + contrast * (p - p.mean(-1, keepdim=True))).clamp(0, 1)
    ref = (p @ v.double()).float()
    torch.testing.assert_close(rw.rewired_attention(q, k, v, tau, contrast), ref, atol=1e-5, rtol=1e-5)
    # query chunking (a memory bound) does not change the result
    torch.testing.assert_close(rw.rewired_attention(q, k, v, tau, contrast, max_elements=64), ref,
                               atol=1e-5, rtol=1e-5)


def test_rewired_self_attention_reads_the_context_pair(model):
    reqs = _requests(2, shots=2)
    model.state.trace = []
    try:
        model.predict(reqs)
        trace = model.state.trace
    finally:
        model.state.trace = None
    assert trace, "no re-wired attention call was recorded"
    assert {rec["layer"] for rec in trace} == set(model.rewired_layers)
    assert all(name.startswith("up_blocks.") and name.endswith(".attn1") for name in model.rewired_layers)
    assert {rec["factor"] for rec in trace} == {1, 2}  # full and half latent resolution
    unet = model._parts["unet"]
    for rec in trace:
        attn, hidden = unet.get_submodule(rec["layer"]), rec["hidden_states"]
        rows_per_request = hidden.shape[0] // len(reqs)
        assert rows_per_request == 2 * 2 + 2  # sources, targets, generation, its plain copy
        for r, (lay, keys, values) in enumerate(zip(rec["layout"], rec["keys"], rec["values"])):
            block = range(r * rows_per_request, (r + 1) * rows_per_request)
            # each request's query generation reads only its own request's rows ...
            assert set(lay.sources) | set(lay.targets) | {lay.generation} <= set(block)
            assert len(lay.sources) == len(lay.targets) == 2 and lay.generation not in lay.sources + lay.targets
            # ... the keys of its context inputs and the values of its context outputs
            with torch.no_grad():
                want_k = torch.cat([attn.to_k(hidden[i]) for i in lay.sources])
                want_v = torch.cat([attn.to_v(hidden[i]) for i in lay.targets])
                own_k = attn.to_k(hidden[lay.generation])
            torch.testing.assert_close(keys, want_k, atol=0, rtol=0)
            torch.testing.assert_close(values, want_v, atol=0, rtol=0)
            assert (keys[: own_k.shape[0]] - own_k).abs().max() > 1e-3


def test_rewiring_follows_its_step_ranges_per_resolution(folder):
    m = _load(folder, rewire_full_start=1, rewire_full_end=3, rewire_half_start=0, rewire_half_end=2)
    m.state.trace = []
    m.predict(_requests(1))
    seen = {(rec["factor"], rec["step"]) for rec in m.state.trace}
    assert seen == {(1, 1), (1, 2), (2, 0), (2, 1)}


def test_rewiring_off_equals_the_plain_pipeline(folder):
    plain = _load(folder, rewire=False, adain=False)
    plain.state.trace = []
    reqs = _requests(2)
    out = plain.predict(reqs)
    assert plain.state.trace == []  # no processor re-wired anything
    for o, r in zip(out, reqs):
        torch.testing.assert_close(o, _reconstruction(plain, r.query), atol=1e-4, rtol=0)
    # without re-wiring the context does not matter
    swapped = [AnalogyRequest(**{**r.__dict__, "context_outputs": [255 - r.context_outputs[0]]}) for r in reqs]
    for a, b in zip(out, plain.predict(swapped)):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=0)


def test_rewiring_on_transfers_from_the_context(folder):
    m = _load(folder, adain=False)
    rng = np.random.default_rng(4)
    base = _request(rng, 0, 5)
    other = AnalogyRequest(**{**base.__dict__, "context_outputs": [255 - base.context_outputs[0]]})
    a, b = m.predict([base, other])
    assert (a - b).abs().mean() > 1e-2  # the context output's values reach the answer
    assert (a - _reconstruction(m, base.query)).abs().mean() > 1e-2


def test_batch_of_four_fp32_bf16_and_mixed_shots(folder, model):
    reqs = _requests(4)
    for precision in ("fp32", "bf16"):
        m = model if precision == "fp32" else _load(folder, precision="bf16")
        out = m.predict(reqs)
        for o, r in zip(out, reqs):
            assert tuple(o.shape) == (*r.query.shape[:2], 3) and o.dtype == torch.float32
            assert torch.isfinite(o).all() and o.min() >= 0 and o.max() <= 1
        singles = [m.predict([r])[0] for r in reqs]
        if precision == "fp32":
            diff = max((a - b).abs().max().item() for a, b in zip(out, singles))
            assert diff <= 1e-4, f"fp32 batch of 4 vs singles: {diff}"
        else:
            diff = torch.cat([(a - b).abs().flatten() for a, b in zip(out, singles)]).mean().item()
            assert diff <= 2.5e-2, f"bf16 batch of 4 vs singles: mean {diff}"
    # requests with different numbers of shots are grouped, answers stay in order
    mixed = [reqs[0], _requests(1, shots=2, seed0=99)[0], reqs[1]]
    out = model.predict(mixed)
    for o, r in zip(out, mixed):
        torch.testing.assert_close(o, model.predict([r])[0], atol=1e-4, rtol=0)


def test_determinism_and_seed(model):
    reqs = _requests(2)
    a, b = model.predict(reqs), model.predict(reqs[::-1])[::-1]
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=0)
    assert torch.equal(model.predict(reqs[:1])[0], model.predict(reqs[:1])[0])
    other = [AnalogyRequest(**{**r.__dict__, "seed": r.seed + 1}) for r in reqs]
    for x, y in zip(a, model.predict(other)):
        assert (x - y).abs().mean() > 1e-3


def test_registry_arguments_and_errors(folder, tmp_path):
    m = get_model("sd-vicl", weights=str(folder), rewire="false", steps="4", skip_steps="2")
    assert isinstance(m, SDVICL) and m.rewire is False and (m.steps, m.skip_steps) == (4, 2)
    assert [p.name for p in m.weight_files()] == [folder.name]
    with pytest.raises(ValueError, match="rewire"):
        SDVICL(rewire="maybe")
    with pytest.raises(ValueError, match="skip_steps"):
        SDVICL(steps=10, skip_steps=10)
    with pytest.raises(Exception, match="missing unet/"):
        SDVICL(weights=tmp_path).weight_files()
    rng = np.random.default_rng(0)
    req = _request(rng, 0, 1)
    no_context = AnalogyRequest(**{**req.__dict__, "context_inputs": [], "context_outputs": []})
    with pytest.raises(ValueError, match=r"request 0 .*context pairs"):
        m.predict([no_context])
