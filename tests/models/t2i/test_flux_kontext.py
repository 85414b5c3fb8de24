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
