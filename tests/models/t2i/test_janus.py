"""``janus`` on a tiny Janus-Pro-layout folder (tiny_t2i.build_janus: the processor, chat
template, special tokens and generation config as transformers'
``models/janus/convert_janus_weights_to_hf.py`` writes them), loaded through
``AutoModelForImageTextToText`` / ``AutoProcessor``.

The reference for the sampling loop is transformers' own
``JanusForConditionalGeneration.generate(generation_mode="image")`` (itself checked against
deepseek-ai/Janus ``generation_inference.py``): greedy, text-only, one prompt, the tokens must be
equal. Batch and order invariance: image tokens are integers and must be equal; decoded images
within 1 uint8 level (fp32: the batched VQ decoder rounds in another order).
"""

import numpy as np
import pytest
import torch

from icl.models import get_model
from icl.models.requests import ChatRequest, GenerationRequest
from icl.models.t2i.janus import Janus

SIZES = [(24, 30), (40, 22), (24, 30), (40, 22)]


def requests(seed0: int = 11) -> list[GenerationRequest]:
    img = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    prompts = [("a red star",), ("two blue circles", img, "like this"), ("a green square on sand",), ("a star",)]
    return [GenerationRequest(f"j{i}", p, size=s, seed=seed0 + i) for i, (p, s) in enumerate(zip(prompts, SIZES))]


@pytest.fixture(scope="module")
def janus(janus_folder):
    model = get_model("janus", weights=str(janus_folder), max_batch=4)
    model.load("cpu")
    return model


def test_prompt_is_the_authors_generation_format(janus):
    # deepseek-ai/Janus generation_inference.py: sft template with system_prompt="" + image_start_tag
    text = janus.generation_text(GenerationRequest("p", ("a red star",)))
    assert text == "<|User|>: a red star\n\n<|Assistant|>:"
    enc = janus.processor(text=[text], generation_mode="image", return_tensors="pt")
    ids = enc["input_ids"][0].tolist()
    assert ids[0] == janus.tokenizer.bos_token_id and ids[-1] == janus.boi_id


def test_greedy_tokens_equal_transformers_generate(janus_folder):
    model = Janus(weights=str(janus_folder), temperature=0.0)
    model.load("cpu")
    req = GenerationRequest("p", ("two red stars on sand",), seed=0)
    enc = model.processor(text=[model.generation_text(req)], generation_mode="image", return_tensors="pt")
    ours = model._sample_tokens(enc, [0])
    with torch.no_grad():
        theirs = model.model.generate(**enc, generation_mode="image", do_sample=False, guidance_scale=5.0)
    assert torch.equal(ours, theirs)


def test_batch_of_four_at_two_sizes_is_batch_and_order_invariant(janus):
    reqs = requests()
    janus.records.clear()
    batch = janus.predict(reqs)
    for out, r in zip(batch, reqs):
        assert out.dtype == np.uint8 and out.shape == (*r.size, 3)
    singles = [janus.predict([r])[0] for r in reqs]
    backwards = janus.predict(reqs[::-1])[::-1]
    for a, b, c in zip(batch, singles, backwards):
        assert int(np.abs(a.astype(int) - b).max()) <= 1 and int(np.abs(a.astype(int) - c).max()) <= 1
    rec = janus.records[0]
    assert (rec.request_id, rec.seed, rec.steps, rec.size, rec.output_size, rec.batch) == ("j0", 11, 16, (64, 64),
                                                                                          (24, 30), 4)


def test_seed_and_images_change_the_answer(janus, janus_folder):
    reqs = requests()
    base = janus.predict([reqs[1]])[0]
    other_seed = janus.predict([GenerationRequest("x", reqs[1].prompt, size=reqs[1].size, seed=999)])[0]
    assert int(np.abs(base.astype(int) - other_seed).max()) > 8
    # greedy, so the random model's tiny logits decide, not the sampling noise
    greedy = Janus(weights=str(janus_folder), temperature=0.0)
    greedy.load("cpu")
    with_image = greedy.predict([reqs[1]])[0]
    no_image = greedy.predict([GenerationRequest("x", ("two blue circles", "like this"), size=reqs[1].size)])[0]
    assert int(np.abs(with_image.astype(int) - no_image).max()) > 8  # the image reached the model


def test_serves_chat_and_generation_in_one_call(janus):
    img = np.zeros((16, 16, 3), np.uint8)
    mixed = [ChatRequest.user("c", img, "what is this ?", max_new_tokens=3), requests()[0]]
    text, image = janus.predict(mixed)
    assert isinstance(text, str) and isinstance(image, np.ndarray) and image.shape == (24, 30, 3)
    assert text == janus.predict([mixed[0]])[0]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precisions_run_seeded(janus_folder, precision):
    model = Janus(weights=str(janus_folder), precision=precision)
    model.load("cpu")
    reqs = requests()[1:2]  # with an image (fp16 convolutions are slow on a CPU)
    first, second = model.predict(reqs), model.predict(reqs)
    for a, b, r in zip(first, second, reqs):
        assert a.shape == (*r.size, 3) and np.array_equal(a, b)


def test_overflowing_prompt_is_answered_with_an_overflow(janus_folder):
    from icl.models import ContextOverflowError

    model = Janus(weights=str(janus_folder), max_context=30)
    model.load("cpu")
    long = GenerationRequest("long", ("a red star " * 4,), seed=1)
    short = GenerationRequest("s", ("a",), seed=1)
    out = model.predict([long, short])
    assert isinstance(out[0], ContextOverflowError) and "'long'" in str(out[0])
    assert isinstance(out[1], np.ndarray)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="cfg_weight"):
        Janus(cfg_weight=-1)
    with pytest.raises(ValueError, match="temperature"):
        Janus(temperature=-0.5)
