"""The openai client's transport against a scripted loopback server (raw_http_server): a deadline
per attempt, the body cap, per-item failures in a batch without re-sends, Retry-After honoured,
secrets redacted, one loop and client across calls."""

from __future__ import annotations

import gzip
import json
import time

import pytest
from raw_http_server import RawServer, Reply, completion

from icl.models import ChatRequest
from icl.models.vlm.openai import ChatServerError, OpenAIChat


def _reqs(n: int, prefix: str = "q") -> list[ChatRequest]:
    return [ChatRequest.user(f"{prefix}{i}", f"question {prefix}{i}", max_new_tokens=2) for i in range(n)]


def _model(server: RawServer, **kw) -> OpenAIChat:
    return OpenAIChat(model="m", base_url=server.base_url, backoff=0.01, api_key_env="ICL_TEST_KEY", **kw)


def test_deadline_covers_a_trickling_body() -> None:
    with RawServer(lambda b, h: Reply(body=completion("slow answer"), trickle_s=0.2)) as srv:
        start = time.monotonic()
        (answer,) = _model(srv, timeout=1.0, max_retries=0).predict(_reqs(1))
    assert isinstance(answer, ChatServerError) and "within 1 s" in str(answer)
    assert time.monotonic() - start < 2.0


def test_body_is_capped_while_reading() -> None:
    big = completion("x" * 100_000)
    with RawServer(lambda b, h: Reply(body=big, content_length=None)) as srv:
        (answer,) = _model(srv, max_response_bytes=10_000, max_retries=2).predict(_reqs(1))
        assert srv.received == 1  # not retried
    assert isinstance(answer, ChatServerError) and "max_response_bytes=10000" in str(answer)


def _faulty(body: str, headers: dict) -> Reply:
    if "q1" in body:
        return Reply(body=b"{not json")
    if "q3" in body:  # a body that cannot be decoded (httpx raises while reading)
        return Reply(body=b"\x00garbage", headers={"Content-Encoding": "gzip"})
    if "q5" in body:
        return Reply(body=gzip.compress(completion("zipped")), headers={"Content-Encoding": "gzip"})
    return Reply(body=completion("ok:" + json.loads(body)["messages"][0]["content"][0]["text"]))


def test_a_malformed_answer_fails_that_item_only() -> None:
    with RawServer(_faulty) as srv:
        answers = _model(srv, concurrency=4).predict(_reqs(8))
        assert srv.received == 8  # one request per item, nothing re-sent
    assert isinstance(answers[1], ChatServerError) and "malformed" in str(answers[1])
    assert isinstance(answers[3], ChatServerError)
    assert answers[5] == "zipped"
    assert [a for i, a in enumerate(answers) if i not in (1, 3, 5)] == [f"ok:question q{i}" for i in (0, 2, 4, 6, 7)]


def test_retry_after_above_the_cap_is_honoured() -> None:
    state = {"n": 0}

    def script(body: str, headers: dict) -> Reply:
        state["n"] += 1
        return Reply(429, b"{}", {"Retry-After": "1"}) if state["n"] == 1 else Reply(body=completion("done"))

    with RawServer(script) as srv:
        start = time.monotonic()
        (answer,) = _model(srv, max_backoff=0.05).predict(_reqs(1))
    assert answer == "done" and time.monotonic() - start >= 0.95


def test_secrets_are_redacted(monkeypatch) -> None:
    monkeypatch.setenv("ICL_TEST_KEY", "sk-very-secret-42")
    echo = lambda body, headers: Reply(400, json.dumps({"error": dict(headers)}).encode())  # noqa: E731
    with RawServer(echo) as srv:
        (answer,) = _model(srv).predict(_reqs(1))
        host = srv.base_url.split("//")[1]
        in_url = OpenAIChat(model="m", base_url=f"http://user:sk-url-secret-7@{host}?api-key=sk-param-secret-9",
                            api_key_env=None, max_retries=0).predict(_reqs(1))[0]
    assert "Bearer ***" in str(answer) and "sk-very-secret-42" not in str(answer)
    assert "sk-url-secret-7" not in str(in_url) and "sk-param-secret-9" not in str(in_url) and "***" in str(in_url)


def test_one_loop_and_client_span_calls() -> None:
    with RawServer() as srv:
        model = _model(srv, max_rps=5)
        model.predict(_reqs(1, "a"))
        client = model._client
        start = time.monotonic()
        model.predict(_reqs(1, "b"))
        model.predict(_reqs(1, "c"))
        assert model._client is client
        # the rate limit holds across calls: 3 starts at 5/s take >= 0.4 s from the first
        assert time.monotonic() - start >= 0.3
        model.close()
        assert model._client is None


def test_connections_are_kept_alive_one_per_slot() -> None:
    with RawServer(latency_s=0.02) as srv:
        model = _model(srv, concurrency=4)
        for call in range(3):
            assert model.predict(_reqs(8, f"k{call}")) == ["ok"] * 8
        assert srv.received == 24 and srv.connections <= 4
        model.close()


def test_gzip_and_deflate_answers_are_decoded_under_the_cap() -> None:
    import zlib

    plain = completion("y" * 5000)
    for encoding, body in (("gzip", gzip.compress(plain)), ("deflate", zlib.compress(plain))):
        with RawServer(lambda b, h, body=body: Reply(body=body, headers={"Content-Encoding": encoding})) as srv:
            assert _model(srv).predict(_reqs(1)) == ["y" * 5000]
            (capped,) = _model(srv, max_response_bytes=2000, max_retries=0).predict(_reqs(1))
        assert isinstance(capped, ChatServerError) and "decoded response body exceeds" in str(capped)


def test_the_environment_proxy_is_used(monkeypatch) -> None:
    """``http_proxy`` applies as it did with httpx (trust_env): the request goes to the proxy in
    absolute form; ``icl-via-proxy.invalid`` cannot resolve, so an answer proves the proxy path."""
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    seen: list[dict] = []
    with RawServer(lambda b, h: seen.append(h) or Reply(body=completion("proxied"))) as srv:
        monkeypatch.setenv("http_proxy", srv.base_url.rsplit("/v1", 1)[0])
        model = OpenAIChat(model="m", base_url="http://icl-via-proxy.invalid/v1", api_key_env=None, max_retries=0)
        assert model.predict(_reqs(2)) == ["proxied", "proxied"]
    assert {h["Host"] for h in seen} == {"icl-via-proxy.invalid"}


def test_execution_args_are_declared() -> None:
    assert {"concurrency", "timeout", "max_retries", "backoff", "max_backoff", "max_rps", "batch_size"} \
        <= OpenAIChat.execution_args
    assert not {"model", "base_url", "detail", "suffix", "send_seed"} & OpenAIChat.execution_args


def test_detail_and_suffix_reach_the_body() -> None:
    import numpy as np

    body = OpenAIChat(model="m", detail="low", suffix="Answer only.").payload(
        ChatRequest.user("d", np.zeros((4, 4, 3), np.uint8), "what?"))
    content = body["messages"][-1]["content"]
    assert content[0]["image_url"]["detail"] == "low" and content[-1] == {"type": "text", "text": "Answer only."}
    with pytest.raises(ValueError, match="detail"):
        OpenAIChat(model="m", detail="tiny")
