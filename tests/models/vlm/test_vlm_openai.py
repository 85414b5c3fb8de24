"""The openai client against a real chat-completions server on 127.0.0.1 that serves the tiny
hf-vlm LLaVA model: answers, images, retries on injected 429/5xx, timeouts, connection errors,
bounded concurrency, the API key's environment variable, and overflow."""

from __future__ import annotations

import email.utils
import socket
import time

import numpy as np
import pytest
from vlm_chat_server import ChatServer, chat_request

from icl.models import ChatRequest, ContextOverflowError, get_model
from icl.models.vlm.hf import HFVisionLanguage
from icl.models.vlm.openai import ChatServerError, OpenAIChat
from icl.models.vlm.prompt import decode_data_url, openai_messages


def images(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (13 + 3 * i, 17, 3), dtype=np.uint8) for i in range(n)]


def requests() -> list[ChatRequest]:
    a, b, c = images(3)
    return [ChatRequest.user("r0", a, "what is the image ?", max_new_tokens=5),
            ChatRequest.user("r1", "how many cat", system="you helpful", max_new_tokens=4),
            ChatRequest.user("r2", b, "red", c, "blue", max_new_tokens=6),
            ChatRequest.user("r3", c, "count", max_new_tokens=3, do_sample=True, temperature=2.0, seed=9)]


@pytest.fixture(scope="module")
def server(llava):
    with ChatServer(llava, lifetime_s=120) as srv:
        yield srv


@pytest.fixture(autouse=True)
def clean(server):
    """No faults, no delay, and no request of an earlier test (a timed-out one) still running."""
    server.faults.clear()
    server.delay_s = 0.0
    deadline = time.monotonic() + 10
    while server.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    yield


def client(server, **kwargs) -> OpenAIChat:
    settings = dict(model="tiny-llava", base_url=server.base_url, backoff=0.01, timeout=30.0)
    settings.update(kwargs)
    return get_model("openai", **settings)


def test_answers_match_the_served_model(server, llava):
    reqs = requests()
    assert client(server, concurrency=4).predict(reqs) == llava.predict(reqs)
    assert max(server.batch_sizes) > 1  # concurrent requests were batched by the server


def test_images_travel_losslessly_in_order():
    reqs = requests()
    messages = openai_messages(reqs[2])
    urls = [p["image_url"]["url"] for p in messages[0]["content"] if p["type"] == "image_url"]
    assert [p["type"] for p in messages[0]["content"]] == ["image_url", "text", "image_url", "text"]
    assert all(u.startswith("data:image/png;base64,") for u in urls)
    for url, original in zip(urls, reqs[2].images):
        assert np.array_equal(decode_data_url(url), original)
    body = OpenAIChat(model="m", min_tokens=True).payload(reqs[3])
    back = chat_request(body, "back")
    assert [len(m.content) for m in back.messages] == [len(m.content) for m in reqs[3].messages]
    assert all(np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
        for m, n in zip(back.messages, reqs[3].messages) for x, y in zip(m.content, n.content))
    assert (back.max_new_tokens, back.do_sample, back.temperature, back.seed) == (3, True, 2.0, 9)
    assert OpenAIChat(model="m").payload(reqs[0])["temperature"] == 0.0
    newer = OpenAIChat(model="m", token_limit_field="max_completion_tokens", send_seed=False).payload(reqs[0])
    assert newer["max_completion_tokens"] == 5 and "max_tokens" not in newer and "seed" not in newer


def test_retries_429_and_5xx_then_answers(server, llava):
    req = requests()[0]
    server.fail_next(429, 500, 503)
    before = server.received
    assert client(server, concurrency=1, max_retries=3).predict([req]) == llava.predict([req])
    assert server.received - before == 4


def test_retries_spent_fail_only_that_request(server, llava):
    reqs = requests()[:2]
    server.fail_next(500, 502, 500, marker="what is the image")
    answers = client(server, concurrency=2, max_retries=2).predict(reqs)
    assert isinstance(answers[0], ChatServerError) and "3 attempts" in str(answers[0]) and "'r0'" in str(answers[0])
    assert answers[1] == llava.predict(reqs[1:])[0]


def test_backoff_is_exponential_and_capped():
    c = OpenAIChat(model="m", backoff=0.5, max_backoff=3.0)
    assert [c._delay(a, None) for a in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    # Retry-After in both forms, honoured in full (above max_backoff too); a past date is now
    assert c._delay(0, "2") == 2.0 and c._delay(0, "7") == 7.0
    assert c._delay(0, "Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28.0 <= c._delay(0, future) <= 30.0
    assert c._delay(2, "soon") == 2.0  # unreadable: our own schedule


def test_timeout_is_retried_then_reported(server):
    server.delay_s = 1.5
    start = time.monotonic()
    answer = client(server, timeout=0.2, max_retries=1).predict([requests()[1]])[0]
    assert isinstance(answer, ChatServerError) and "Timeout" in str(answer)
    assert time.monotonic() - start < 1.4


def test_connection_errors_are_retried():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    answer = OpenAIChat(model="m", base_url=f"http://127.0.0.1:{port}/v1", backoff=0.01,
                        max_retries=2).predict([requests()[1]])[0]
    assert isinstance(answer, ChatServerError) and "ConnectError" in str(answer)


def test_non_retryable_status_is_not_retried(server):
    server.fail_next(401)
    before = server.received
    answer = client(server, api_key_env="ICL_TEST_VLM_KEY", max_retries=3).predict([requests()[1]])[0]
    assert isinstance(answer, ChatServerError) and "401" in str(answer) and "$ICL_TEST_VLM_KEY" in str(answer)
    assert server.received - before == 1


def test_concurrency_is_bounded(server):
    server.delay_s = 0.05
    server.max_in_flight = 0
    reqs = [ChatRequest.user(f"c{i}", "dog", max_new_tokens=2) for i in range(8)]
    assert all(isinstance(a, str) for a in client(server, concurrency=2).predict(reqs))
    assert server.max_in_flight == 2
    server.max_in_flight = 0
    client(server, concurrency=8).predict(reqs)
    assert server.max_in_flight > 2


def test_request_rate_is_limited(server):
    reqs = [ChatRequest.user(f"p{i}", "dog", max_new_tokens=1) for i in range(6)]
    start = time.monotonic()
    assert all(isinstance(a, str) for a in client(server, concurrency=6, max_rps=20).predict(reqs))
    assert time.monotonic() - start >= 5 / 20


def test_api_key_from_the_named_variable_never_in_identity(server, monkeypatch):
    monkeypatch.setenv("ICL_TEST_VLM_KEY", "sk-secret-123")
    model = client(server, api_key_env="ICL_TEST_VLM_KEY")
    model.predict([requests()[1]])
    assert server.authorizations[-1] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in repr(vars(model))
    monkeypatch.delenv("ICL_TEST_VLM_KEY")
    model.predict([requests()[1]])
    assert server.authorizations[-1] == ""


def test_server_overflow_becomes_context_overflow(tiny_folders):
    short = HFVisionLanguage(weights=str(tiny_folders["llava"]), max_context=30)
    short.load("cpu")
    with ChatServer(short, lifetime_s=60) as srv:
        answers = client(srv).predict([ChatRequest.user("fits", "dog", max_new_tokens=2),
                                       ChatRequest.user("long", *images(2), "dog", max_new_tokens=2)])
    assert isinstance(answers[0], str)
    assert isinstance(answers[1], ContextOverflowError) and "'long'" in str(answers[1])


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChat(model="m", base_url="127.0.0.1:8000")
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIChat(model="m", concurrency=0)
    with pytest.raises(ValueError, match="model"):
        OpenAIChat(model="")
    with pytest.raises(ValueError, match="max_rps"):
        OpenAIChat(model="m", max_rps=0)
    with pytest.raises(ValueError, match="token_limit_field"):
        OpenAIChat(model="m", token_limit_field="limit")


def test_predict_works_inside_a_running_event_loop(server, llava):
    import asyncio

    req = requests()[1]

    async def caller():
        return client(server).predict([req])

    assert asyncio.run(caller()) == llava.predict([req])
