"""``flux-kontext`` on a tiny FLUX.1 Kontext [dev]-layout folder (tiny_t2i.build_flux_kontext:
``FluxKontextPipeline.save_pretrained`` with the component widths of diffusers'
tests/pipelines/flux/test_pipeline_flux_kontext.py), loaded through
``FluxKontextPipeline.from_pretrained``. The reference image goes in as ``image=`` (the
pipeline's docstring, black-forest-labs/flux docs/image-editing.md); Kontext's automatic
resizing to its preferred resolutions (>= 672 px) is switched off through ``call_args`` to keep
the test tiny. fp32 tolerance: 2 uint8 levels, batch of four against singles."""

import functools

import numpy as np
import pytest
from tiny_t2i import build_flux_kontext

from icl.models import get_model
from icl.models.requests import GenerationRequest
from icl.models.t2i.common import RequestRefused

SMALL = {"max_area": 256, "_auto_resize": False, "max_sequence_length": 48}


@pytest.fixture(scope="module")
def kontext(tmp_path_factory):
    folder = build_flux_kontext(tmp_path_factory.mktemp("tiny-kontext") / "kontext")
    model = get_model("flux-kontext", weights=str(folder), steps=2, height=16, width=16, call_args=SMALL)
    model.load("cpu")
    return model


def requests(seed0: int = 5) -> list[GenerationRequest]:
    rng = np.random.default_rng(1)
    sizes = [(24, 30), (40, 22), (24, 30), (40, 22)]
    return [GenerationRequest(f"k{i}", ("make it red", rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)),
                              size=s, seed=seed0 + i) for i, s in enumerate(sizes)]


def test_class_defaults_and_batch_invariance(kontext):
    assert type(kontext.pipe).__name__ == "FluxKontextPipeline" and kontext.guidance_used == 3.5
    reqs = requests()
    batch = kontext.predict(reqs)
    singles = [kontext.predict([r])[0] for r in reqs]
    for a, b, r in zip(batch, singles, reqs):
        assert a.shape == (*r.size, 3) and int(np.abs(a.astype(int) - b).max()) <= 2


def test_the_reference_image_reaches_the_model(kontext):
    r = requests()[0]
    other = GenerationRequest("k", ("make it red", 255 - r.images[0]), size=r.size, seed=r.seed)
    assert int(np.abs(kontext.predict([r])[0].astype(int) - kontext.predict([other])[0]).max()) > 0


def test_one_image_exactly(kontext):
    img = requests()[0].images[0]
    out = kontext.predict([GenerationRequest("none", ("a star",)), GenerationRequest("two", ("a", img, img))])
    assert all(isinstance(o, RequestRefused) for o in out) and "'none'" in str(out[0])
    with pytest.raises(ValueError, match="set by the adapter"):
        get_model("flux-kontext", call_args={"guidance_scale": 2.0})
    with pytest.raises(ValueError, match="JSON object"):
        get_model("flux-kontext", call_args="{max_area: 4}")
    assert get_model("flux-kontext", call_args='{"max_area": 4}').call_args == {"max_area": 4}


def test_the_requested_size_is_the_generated_size(tmp_path_factory):
    """diffusers' ``FluxKontextPipeline.__call__`` (installed 0.42) takes ``max_area: int = 1024**2``
    and ``_auto_resize: bool = True`` and rescales ``height`` x ``width`` to ``max_area``: without
    ``max_area`` a 64 x 64 request would be generated at 1024 x 1024 and shrunk. The adapter passes
    ``height``, ``width`` and ``max_area = height * width`` from the request (``--size 64`` -> 64 x 64
    generated, as the recorder's generated shape shows); a side that is no multiple of
    ``2 * vae_scale_factor`` is rounded down for generation and the image resized (logged).
    ``_auto_resize`` (the input image's preferred-resolution resize) is switched off only to keep
    this tiny test fast."""
    import inspect

    from diffusers import FluxKontextPipeline

    params = inspect.signature(FluxKontextPipeline.__call__).parameters
    assert params["max_area"].default == 1024 ** 2 and "_auto_resize" in params
    folder = build_flux_kontext(tmp_path_factory.mktemp("tiny-kontext-size") / "kontext")
    model = get_model("flux-kontext", weights=str(folder), steps=1,
                      call_args={"_auto_resize": False, "max_sequence_length": 48})
    model.load("cpu")
    img = np.random.default_rng(2).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    reqs = [GenerationRequest("s64", ("make it red", img), size=(64, 64), seed=1),
            GenerationRequest("s32x48", ("make it red", img), size=(32, 48), seed=2)]
    out = model.predict(reqs)
    assert [o.shape for o in out] == [(64, 64, 3), (32, 48, 3)]
    assert {r.request_id: (r.size, r.output_size) for r in model.records} == {
        "s64": ((64, 64), (64, 64)), "s32x48": ((32, 48), (32, 48))}
    assert model.size_kwargs((64, 64)) == {"height": 64, "width": 64, "max_area": 64 * 64}
    m = 2 * model.pipe.vae_scale_factor
    assert model.size_kwargs((65, 64))["height"] == 65 // m * m
    # the model's own height / width, or call_args' max_area, take precedence as given
    fixed = get_model("flux-kontext", weights=str(folder), height=16, width=16, call_args={"max_area": 256})
    assert fixed.size_kwargs((64, 64)) == {"height": 16, "width": 16}


def test_sizes_as_model_arguments_and_on_the_request_reach_the_pipeline(tmp_path_factory, monkeypatch):
    """Issue 45.2: ``flux-kontext:height=H,width=W`` generated at 1024 x 1024 (``max_area``'s
    default). The real ``FluxKontextPipeline.__call__`` is wrapped to record its arguments: the
    model's ``height`` / ``width`` and, without them, the request's size both arrive with
    ``max_area = height * width``, and the generated image (the recorder's size, read off the
    pipeline's output) has that size."""
    from diffusers import FluxKontextPipeline

    seen: list[dict] = []
    original = FluxKontextPipeline.__call__

    @functools.wraps(original)  # the adapter reads the real signature (its defaults, call_args' names)
    def spy(self, *args, **kwargs):
        seen.append({k: kwargs.get(k) for k in ("height", "width", "max_area")})
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FluxKontextPipeline, "__call__", spy)
    folder = build_flux_kontext(tmp_path_factory.mktemp("tiny-kontext-spy") / "kontext")
    img = np.random.default_rng(3).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    small = {"_auto_resize": False, "max_sequence_length": 48}
    # model arguments: they win over the request's size, which the image is then resized to
    by_args = get_model("flux-kontext", weights=str(folder), steps=1, height=48, width=32, call_args=small)
    by_args.load("cpu")
    out = by_args.predict([GenerationRequest("a", ("make it red", img), size=(24, 24), seed=1),
                           GenerationRequest("b", ("make it red", img), seed=2)])
    assert seen == [{"height": 48, "width": 32, "max_area": 48 * 32}]  # one call: one pipeline size for both
    assert [r.size for r in by_args.records] == [(48, 32), (48, 32)]
    assert out[0].shape == (24, 24, 3) and out[1].shape == (48, 32, 3)
    assert by_args.size_kwargs(None) == by_args.size_kwargs((64, 64)) == {"height": 48, "width": 32, "max_area": 1536}
    # the case, without generating 512 x 512 here: the arguments the pipeline gets
    big = get_model("flux-kontext", weights=str(folder), height=512, width=512)
    assert big.size_kwargs(None) == {"height": 512, "width": 512, "max_area": 512 * 512}
    # the request's size, without model arguments
    seen.clear()
    by_request = get_model("flux-kontext", weights=str(folder), steps=1, call_args=small)
    by_request.load("cpu")
    out = by_request.predict([GenerationRequest("c", ("make it red", img), size=(32, 64), seed=3)])
    assert seen == [{"height": 32, "width": 64, "max_area": 32 * 64}]
    assert by_request.records[-1].size == (32, 64) and out[0].shape == (32, 64, 3)


@pytest.mark.slow  # a run of the tiny pipeline through vlicl, about 10 s
def test_vlicl_refusals_are_not_applicable_and_the_one_image_items_run(tmp_path_factory, capsys):
    """Issue 45.1: ``vlicl --fast --tasks open_t2i_mi`` with flux-kontext (exactly one image) used
    to STOP the model on its 0-shot items (planned first, refused). Now every refused item is
    listed as not applicable and the model goes on. open_t2i_mi's 1-shot prompt holds two
    images (one support image per class, 2-way as VL-ICL's MiniImageNet task), so Kontext refuses
    it too; the cobsat task's 1-shot prompt holds one image, which it generates."""
    import json

    from icl.run.__main__ import main

    folder = build_flux_kontext(tmp_path_factory.mktemp("tiny-kontext-vlicl") / "kontext")
    out = tmp_path_factory.mktemp("kontext-vlicl") / "out"
    model = (f'flux-kontext:weights={folder},steps=1,height=16,width=16,'
             'call_args={"_auto_resize": false, "max_sequence_length": 48}')
    args = ["vlicl", "--fast", "--tasks", "open_t2i_mi,cobsat", "--models", model, "--seeds", "0", "--shots", "0,1",
            "--queries", "2", "--out", str(out), "--data-root", str(out.parent / "data"), "--no-plots",
            "--no-progress", "--device", "cpu"]
    assert main(args) == 0
    o = capsys.readouterr()
    assert "STOPPED" not in o.err and "FAILED" not in o.err, o.err[-2000:]
    lines = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    cell = {(d["group"]["task"], d["group"]["shots"]): set() for d in lines}
    for d in lines:
        cell[d["group"]["task"], d["group"]["shots"]].add(d["status"])
    assert cell == {("open_t2i_mi", 0): {"not applicable"}, ("open_t2i_mi", 1): {"not applicable"},
                    ("cobsat", 0): {"not applicable"}, ("cobsat", 1): {"ok"}}
    generated = [d for d in lines if d["status"] == "ok"]
    assert len(generated) == 2 and all("png" in d["answer"] and d["generation"]["size"] == [16, 16]
                                       for d in generated)
    refused = json.loads((out / "results.json").read_text())["refused"]
    (label,) = refused
    assert "holds 0 image(s); this pipeline takes exactly 1" in refused[label]["open_t2i_mi 0-shot"]["why"]
    assert "holds 2 image(s)" in refused[label]["open_t2i_mi 1-shot"]["why"]
    assert "2 items of open_t2i_mi 0-shot not applicable to flux-kontext" in o.out
    assert main(args) == 0 and "0 items computed, 8 already in the store" in capsys.readouterr().out
