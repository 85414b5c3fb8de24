"""``flux-kontext`` on a tiny FLUX.1 Kontext [dev]-layout folder (tiny_t2i.build_flux_kontext:
``FluxKontextPipeline.save_pretrained`` with the component widths of diffusers'
tests/pipelines/flux/test_pipeline_flux_kontext.py), loaded through
``FluxKontextPipeline.from_pretrained``. The reference image goes in as ``image=`` (the
pipeline's docstring, black-forest-labs/flux docs/image-editing.md); Kontext's automatic
resizing to its preferred resolutions (>= 672 px) is switched off through ``call_args`` to keep
the test tiny. fp32 tolerance: 2 uint8 levels, batch of four against singles."""

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
