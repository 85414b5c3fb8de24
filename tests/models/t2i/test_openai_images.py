"""``openai-images`` against a real images server on 127.0.0.1 (images_server.py). Request
shapes follow the OpenAI API reference for ``/v1/images/generations`` (JSON: model, prompt,
n, size, response_format) and ``/v1/images/edits`` (multipart/form-data, the images as files,
``image[]`` for several as openai-python sends arrays)."""

import numpy as np
import pytest
from images_server import ImagesServer, answer_image

from icl.models.requests import GenerationRequest
from icl.models.t2i.common import to_size
from icl.models.t2i.openai_images import OpenAIImages
from icl.models.vlm.openai import ChatServerError


@pytest.fixture(scope="module")
def server():
    with ImagesServer() as s:
        yield s


@pytest.fixture(autouse=True)
def clean(server):
    server.received.clear()
    server.faults.clear()
    server.answer_url = False


def client(server, **kwargs) -> OpenAIImages:
    return OpenAIImages(model="tiny-images", base_url=server.base_url, size="64x48", backoff=0.0, **kwargs)


def images(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.integers(0, 256, (20 + i, 30 - i, 3), dtype=np.uint8) for i in range(n)]


def test_text_goes_to_generations_and_comes_back_resized(server):
    req = GenerationRequest("g", ("a red", "star"), size=(24, 30), seed=3)
    out = client(server).predict([req])[0]
    sent = server.received[0]
    assert sent["path"] == "/v1/images/generations"
    assert sent["fields"] == {"model": "tiny-images", "prompt": "a red star", "n": 1, "size": "64x48",
                              "response_format": "b64_json"}
    expected = to_size(answer_image(sent["fields"], []), (24, 30))
    assert out.dtype == np.uint8 and np.array_equal(out, expected)


def test_images_go_to_edits_as_files_in_order(server):
    one, two = images(1), images(2)
    reqs = [GenerationRequest("e1", ("make it", one[0], "blue"), size=(20, 30)),
            GenerationRequest("e2", (two[0], "and", two[1], "together"), size=None)]
    out = client(server, response_format=None, quality="low").predict(reqs)
    by_prompt = {r["fields"]["prompt"]: r for r in server.received}
    first, second = by_prompt["make it blue"], by_prompt["and together"]
    assert first["path"] == second["path"] == "/v1/images/edits"
    assert first["image_fields"] == ["image"] and second["image_fields"] == ["image[]", "image[]"]
    assert all(np.array_equal(a, b) for a, b in zip(second["images"], two))  # lossless, in order
    assert first["fields"] == {"model": "tiny-images", "prompt": "make it blue", "n": "1", "size": "64x48",
                               "quality": "low"}
    assert out[0].shape == (20, 30, 3) and out[1].shape == (48, 64, 3)  # no size asked: the server's


def test_retries_then_answers_and_failures_stay_in_their_slot(server):
    server.fail_next(429, 503)
    model = client(server, max_retries=2, concurrency=1)
    assert isinstance(model.predict([GenerationRequest("r", ("a star",), size=(8, 8))])[0], np.ndarray)
    assert len(server.received) == 3
    server.fail_next(500, 500, 500, marker="doomed")
    out = model.predict([GenerationRequest("bad", ("doomed",)), GenerationRequest("ok", ("fine",))])
    assert isinstance(out[0], ChatServerError) and "failed after 3 attempts" in str(out[0])
    assert isinstance(out[1], np.ndarray)
    server.fail_next(400)
    out = model.predict([GenerationRequest("refused", ("x",))])[0]
    assert isinstance(out, ChatServerError) and "HTTP 400" in str(out) and len(server.received) == 3 + 3 + 1 + 1


def test_a_url_answer_is_a_clear_failure(server):
    server.answer_url = True
    out = client(server).predict([GenerationRequest("u", ("a star",))])[0]
    assert isinstance(out, ChatServerError) and "no b64_json" in str(out)


def test_key_from_the_named_variable_never_stored(server, monkeypatch):
    from icl.run.planning.config import ModelSpec
    from icl.run.planning.models import make_model

    monkeypatch.setenv("ICL_TEST_IMAGES_KEY", "sk-secret-123")
    model = client(server, api_key_env="ICL_TEST_IMAGES_KEY")
    model.predict([GenerationRequest("k", ("a star",))])
    assert server.received[0]["headers"]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in repr(vars(model))
    spec = ModelSpec("openai-images", dict(model="m", base_url=server.base_url, api_key_env="ICL_TEST_IMAGES_KEY",
                                           concurrency=2))
    identity = make_model(spec, "cpu").identity
    assert "sk-secret-123" not in repr(identity) and "concurrency" not in identity["args"]


def test_records_and_arguments(server):
    model = client(server)
    model.predict([GenerationRequest("a", ("a star",), size=(10, 12), seed=9)])
    rec = model.records[-1]
    assert (rec.request_id, rec.seed, rec.steps, rec.output_size, rec.memory) == ("a", 9, None, (10, 12), None)
    with pytest.raises(ValueError, match="size"):
        OpenAIImages(model="m", size="big")
    with pytest.raises(ValueError, match="response_format"):
        OpenAIImages(model="m", response_format="url")
