"""``diffusers-t2i`` on a tiny Stable Diffusion 1.5-layout folder (tiny_t2i.build_sd: the
runwayml/stable-diffusion-v1-5 release's folder layout, tokenizer files and PNDM scheduler
settings), loaded through ``AutoPipelineForText2Image.from_pretrained``.

Tolerances (uint8 levels, batch of four against four single calls and the reverse order):
fp32 2 levels (the batched UNet sums in another order); fp16 / bf16 runs are checked for
shape, range and seeded determinism only (their batched rounding differs by far more)."""

import numpy as np
import pytest

from icl.models import get_model
from icl.models.requests import GenerationRequest
from icl.models.t2i.common import RequestRefused
from icl.models.t2i.diffusers_t2i import DiffusersText2Image

FP32_LEVELS = 2
SIZES = [(24, 30), (40, 22), (24, 30), (40, 22)]


def requests(seed0: int = 7) -> list[GenerationRequest]:
    words = ["a red star", "two blue circles", "a green square on sand", "a star"]
    return [GenerationRequest(f"g{i}", (w,), size=s, seed=seed0 + i) for i, (w, s) in enumerate(zip(words, SIZES))]


@pytest.fixture(scope="module")
def sd(sd_folder):
    model = get_model("diffusers-t2i", weights=str(sd_folder), steps=2, batch_size=4)
    model.load("cpu")
    return model


def test_loads_through_auto_pipeline_with_the_class_defaults(sd_folder):
    from diffusers import StableDiffusionPipeline

    model = DiffusersText2Image(weights=str(sd_folder))
    model.load("cpu")
    assert isinstance(model.pipe, StableDiffusionPipeline)
    # StableDiffusionPipeline.__call__'s own defaults: 50 steps, guidance 7.5
    assert (model.steps_used, model.guidance_used) == (50, 7.5)
    assert model.weight_files() == (sd_folder,)


def test_batch_of_four_at_two_sizes_is_batch_and_order_invariant(sd):
    reqs = requests()
    batch = sd.predict(reqs)
    for out, r in zip(batch, reqs):
        assert out.dtype == np.uint8 and out.shape == (*r.size, 3)
    singles = [sd.predict([r])[0] for r in reqs]
    backwards = sd.predict(reqs[::-1])[::-1]
    for a, b, c in zip(batch, singles, backwards):
        assert int(np.abs(a.astype(int) - b).max()) <= FP32_LEVELS
        assert int(np.abs(a.astype(int) - c).max()) <= FP32_LEVELS
    again = sd.predict(reqs)
    assert all(np.array_equal(a, b) for a, b in zip(batch, again))  # determinism
    # the seed matters: another seed, another image
    other = sd.predict([GenerationRequest("g0", reqs[0].prompt, size=reqs[0].size, seed=999)])[0]
    assert int(np.abs(other.astype(int) - batch[0]).max()) > 8


def test_each_image_is_recorded(sd):
    sd.records.clear()
    reqs = requests()
    sd.predict(reqs)
    assert [r.request_id for r in sd.records] == [r.id for r in reqs]
    for rec, req in zip(sd.records, reqs):
        assert rec.seed == req.seed and rec.steps == 2 and rec.size == (16, 16) and rec.output_size == req.size
        assert rec.latency_s > 0 and rec.batch == 4 and rec.peak_bytes > 0 and rec.memory == "process-max-rss"


def test_images_are_refused_with_a_sentence_and_the_rest_answered(sd):
    img = np.zeros((8, 8, 3), np.uint8)
    reqs = [GenerationRequest("with-image", ("a star", img, "like this"), size=(16, 16), seed=1)] + requests()[:1]
    out = sd.predict(reqs)
    assert isinstance(out[0], RequestRefused) and "text only" in str(out[0]) and "'with-image'" in str(out[0])
    assert isinstance(out[1], np.ndarray)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precisions_run_seeded(sd_folder, precision):
    model = DiffusersText2Image(weights=str(sd_folder), precision=precision, steps=2)
    model.load("cpu")
    reqs = requests()[:2]
    first, second = model.predict(reqs), model.predict(reqs)
    for a, b, r in zip(first, second, reqs):
        assert a.shape == (*r.size, 3) and np.array_equal(a, b)
    assert str(model.pipe.unet.dtype) == {"fp16": "torch.float16", "bf16": "torch.bfloat16"}[precision]


def test_generation_size_and_offload_arguments(sd_folder):
    model = DiffusersText2Image(weights=str(sd_folder), steps=1, height=24, width=32, cpu_offload="true")
    model.load("cpu")  # offloading needs CUDA: runs whole on the CPU
    model.predict([GenerationRequest("g", ("a star",), size=None, seed=3)])
    assert model.records[-1].size == (24, 32) and model.records[-1].output_size == (24, 32)
    assert "cpu_offload" in DiffusersText2Image.execution_args
    with pytest.raises(ValueError, match="steps"):
        DiffusersText2Image(steps=0)
    with pytest.raises(ValueError, match="precision"):
        DiffusersText2Image(precision="fp8")


def test_missing_folder_names_where_to_put_it(tmp_path):
    from icl.models.weights import WeightsError

    with pytest.raises(WeightsError, match="model_index.json"):
        DiffusersText2Image(weights=str(tmp_path / "nowhere")).load("cpu")


def test_an_image_is_what_the_pipeline_makes_for_that_seed(sd):
    """The reference is the pipeline itself, called as its docstring shows (one prompt, a
    generator seeded with the request's seed, the class's guidance), then resized."""
    import torch

    from icl.models.t2i.common import to_size

    req = requests()[1]
    ours = sd.predict([req])[0]
    with torch.no_grad():
        ref = sd.pipe(prompt=req.prompt[0], generator=torch.Generator().manual_seed(req.seed), num_inference_steps=2,
                      output_type="np").images[0]
    assert np.array_equal(ours, to_size(ref, req.size))


def test_a_folder_of_another_pipeline_names_the_folder_and_the_class(sd_folder, tmp_path, capsys):
    """A Stable Diffusion folder (model_index.json ``_class_name`` StableDiffusionPipeline) given to
    ``qwen-image-edit`` or ``flux-kontext`` is refused naming the folder, the class it holds and the
    class expected (it used to reach huggingface_hub as a repo id: "Repo id must be in the form ..."),
    at load and, for a judge or a run, before anything runs (``check_loadable``)."""
    from icl.models.weights import WeightsError

    for name, expected in (("qwen-image-edit", "QwenImageEditPlusPipeline"), ("flux-kontext", "FluxKontextPipeline")):
        model = get_model(name, weights=str(sd_folder))
        for call in (model.check_loadable, lambda: model.load("cpu")):
            with pytest.raises(WeightsError) as err:
                call()
            msg = str(err.value)
            assert str(sd_folder) in msg and "StableDiffusionPipeline" in msg and expected in msg
            assert "Repo id" not in msg and "\n" not in msg
    get_model("diffusers-t2i", weights=str(sd_folder)).check_loadable()  # AutoPipeline takes any


def test_one_refusal_rule_known_without_weights():
    """Issue 50.6: ``would_refuse`` (what ``predict`` puts in a refused slot, and what the runner
    and ``--check`` ask) is decided from the request alone: no weights, no folder."""
    img = np.zeros((4, 4, 3), np.uint8)
    none, one, two = (GenerationRequest(name, ("a cat", *imgs)) for name, imgs in
                      (("none", ()), ("one", (img,)), ("two", (img, img))))
    sd, kontext, qwen = get_model("diffusers-t2i"), get_model("flux-kontext"), get_model("qwen-image-edit")
    assert sd.would_refuse(none) is None and "'one' holds 1 image(s), but this model generates from text only" \
        in sd.would_refuse(one)
    assert kontext.would_refuse(one) is None
    assert [kontext.would_refuse(r) for r in (none, two)] == [
        "flux-kontext: request 'none' holds 0 image(s); this pipeline takes exactly 1",
        "flux-kontext: request 'two' holds 2 image(s); this pipeline takes exactly 1"]
    assert qwen.would_refuse(two) is None and qwen.would_refuse(none) == (
        "qwen-image-edit: request 'none' holds 0 image(s); this pipeline takes at least 1 and any number")
