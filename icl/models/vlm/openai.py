"""``openai``: an OpenAI-compatible chat-completions client (vLLM, SGLang, hosted APIs).

One ``POST {base_url}/chat/completions`` per request, ``concurrency`` of them in flight at
once, on one event loop and one set of keep-alive connections (one per slot of the gate) for
the adapter's lifetime (:class:`~icl.models.vlm.http.LoopThread`,
:class:`~icl.models.vlm.http.Connections`), so the gate and the rate limit span ``predict``
calls. Images travel as base64 PNG data URLs, in order (``detail`` adds the image detail level).
Each attempt has a deadline of ``timeout`` seconds for the whole exchange (connect, send, the
complete body: a trickling answer cannot hold it longer); the body is read chunk by chunk and
refused past ``max_response_bytes``. Retries (at most ``max_retries``) on 429, 5xx, deadlines
and connection errors wait ``backoff * 2**attempt`` seconds (capped at ``max_backoff``), or what
the server's ``Retry-After`` says (seconds or an HTTP date; honoured in full, logged when above
``max_backoff``).

The API key is read from the environment variable *named* by ``api_key_env`` at call time; the
key itself is never a model argument, so it never enters the model's identity or the store, and
it (like credentials inside ``base_url``) is redacted from every message the adapter returns.

Per-request failures: ``predict`` returns one entry per request: the answer ``str``, a
:class:`~icl.models.ContextOverflowError` instance when the server says the prompt exceeds the
model's context, or a :class:`ChatServerError` instance when the request failed for good
(retries spent, a non-retryable status, a malformed or oversized answer); the other requests are
answered and nothing is re-sent.

Execution arguments (``execution_args``; outside the model identity, so the store's answers are
reused across them): ``concurrency``, ``timeout``, ``max_retries``, ``backoff``, ``max_backoff``,
``max_rps``, ``max_response_bytes`` and ``batch_size`` (each request is its own HTTP call, so the
batch cannot change an answer), and the prices ``--check`` turns the requests into money with
(:data:`PRICES`; ``icl.run.planning.check_cost``): ``price_in`` and ``price_out`` per 1M input and output
tokens, ``price_image`` per image (see :func:`check_price`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from typing import Any, Optional, Sequence

from icl.models.base import Adapter, ContextOverflowError
from icl.models.requests import ChatRequest
from icl.models.vlm.http import BodyTooLarge, Connections, Gate, LoopThread, read_capped, redact, retry_after_seconds
from icl.models.vlm.prompt import check_request, openai_messages

log = logging.getLogger("icl.models.vlm")

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
DETAILS = ("low", "high", "auto")
#: the price arguments (``--check`` only: they never change an answer, so they are execution
#: arguments): per 1M input tokens, per 1M output tokens, per image sent or generated
PRICES = ("price_in", "price_out", "price_image")
_OVERFLOW = re.compile(r"context[ _]length|maximum context|too many tokens|prompt is too long", re.IGNORECASE)


def check_price(adapter: str, name: str, value: Any) -> Optional[float]:
    """A price argument as a float (None: not given); a clear error naming it otherwise: a price is
    a non-negative finite number (``price_in`` / ``price_out`` per 1M tokens, ``price_image`` per
    image), in whatever currency the user prices in."""
    if value is None:
        return None
    unit = "per image" if name == "price_image" else "per 1M tokens"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        raise ValueError(f"{adapter}: {name} must be a non-negative number (the price {unit}), got {value!r}")
    return float(value)


class ChatServerError(RuntimeError):
    """A chat-completions request failed for good (after retries, or a non-retryable status)."""


class OpenAIChat(Adapter):
    """Chat-completions over HTTP behind :class:`~icl.models.requests.ChatRequest`.

    Model arguments: ``model`` (the served model's name), ``base_url`` (up to and including
    ``/v1``), ``api_key_env`` (name of the environment variable holding the key; unset or empty
    variable: no ``Authorization`` header, as local servers need), ``concurrency`` (requests in
    flight), ``timeout`` (seconds per attempt), ``max_retries``, ``backoff``, ``max_backoff``,
    ``max_rps`` (at most this many request starts per second, retries included; None: no limit),
    ``batch_size`` (requests per ``predict`` call), ``send_seed`` (send ``request.seed``),
    ``min_tokens`` (send ``min_new_tokens`` as vLLM/SGLang's ``min_tokens``; hosted APIs reject
    it), ``token_limit_field`` (``max_tokens``, or ``max_completion_tokens`` for hosted models
    that refuse the older name), ``detail`` (``low``, ``high``, ``auto``: the image detail level;
    None: not sent), ``suffix`` (a text part appended to the last user turn, e.g. an answer-only
    instruction), ``max_response_bytes`` (the largest answer body read), ``price_in``,
    ``price_out`` (per 1M input / output tokens) and ``price_image`` (per image sent: priced per
    image instead of as input tokens), read by ``--check`` only.
    """

    name = "openai"
    version = "1"
    serves = (ChatRequest,)
    execution_args = frozenset({"concurrency", "timeout", "max_retries", "backoff", "max_backoff", "max_rps",
                                "batch_size", "max_response_bytes", *PRICES})

    def __init__(self, model: str, base_url: str = "http://127.0.0.1:8000/v1",
                 api_key_env: Optional[str] = "OPENAI_API_KEY", concurrency: int = 8, timeout: float = 120.0,
                 max_retries: int = 5, backoff: float = 1.0, max_backoff: float = 60.0,
                 max_rps: Optional[float] = None, batch_size: int = 64, send_seed: bool = True,
                 min_tokens: bool = False, token_limit_field: str = "max_tokens", detail: Optional[str] = None,
                 suffix: Optional[str] = None, max_response_bytes: int = 8 << 20, price_in: Optional[float] = None,
                 price_out: Optional[float] = None, price_image: Optional[float] = None):
        if not isinstance(model, str) or not model:
            raise ValueError(f"openai: model must be the served model's name, got {model!r}")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai: base_url must start with http:// or https://, got {base_url!r}")
        for arg, count in (("concurrency", concurrency), ("batch_size", batch_size),
                           ("max_response_bytes", max_response_bytes)):
            if not isinstance(count, int) or count < 1:
                raise ValueError(f"openai: {arg} must be a positive int, got {count!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"openai: max_retries must be an int >= 0, got {max_retries!r}")
        for arg, seconds in (("timeout", timeout), ("backoff", backoff), ("max_backoff", max_backoff)):
            if not isinstance(seconds, (int, float)) or seconds < 0 or (arg == "timeout" and seconds == 0):
                raise ValueError(f"openai: {arg} must be a non-negative number of seconds (timeout > 0), "
                                 f"got {seconds!r}")
        if max_rps is not None and (not isinstance(max_rps, (int, float)) or not max_rps > 0):
            raise ValueError(f"openai: max_rps must be a positive number or None, got {max_rps!r}")
        if token_limit_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(f"openai: token_limit_field must be 'max_tokens' or 'max_completion_tokens', "
                             f"got {token_limit_field!r}")
        if detail is not None and detail not in DETAILS:
            raise ValueError(f"openai: detail must be one of {DETAILS} or None, got {detail!r}")
        if suffix is not None and not isinstance(suffix, str):
            raise ValueError(f"openai: suffix must be a string, got {suffix!r}")
        self.price_in, self.price_out, self.price_image = (check_price(self.name, n, v) for n, v in zip(
            PRICES, (price_in, price_out, price_image)))
        self.detail, self.suffix, self.max_response_bytes = detail, suffix, max_response_bytes
        self.max_rps, self.token_limit_field = max_rps, token_limit_field
        self.model, self.base_url, self.api_key_env = model, base_url.rstrip("/"), api_key_env
        self.concurrency, self.timeout, self.max_retries = concurrency, float(timeout), max_retries
        self.backoff, self.max_backoff, self.batch_size = float(backoff), float(max_backoff), batch_size
        self.send_seed, self.min_tokens = send_seed, min_tokens
        self._loop: Optional[LoopThread] = None
        self._client: Any = None
        self._gate: Optional[Gate] = None

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for one request (greedy = temperature 0)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request, self.detail),
            self.token_limit_field: request.max_new_tokens,
            "temperature": float(request.temperature) if request.do_sample else 0.0,
        }
        if self.suffix:
            last = body["messages"][-1]
            if last["role"] == "user":
                last["content"].append({"type": "text", "text": self.suffix})
        if self.send_seed:
            body["seed"] = request.seed % (1 << 63)
        if self.min_tokens:
            body["min_tokens"] = request.min_new_tokens
        return body

    def _key(self) -> str:
        return os.environ.get(self.api_key_env, "") if self.api_key_env else ""

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        checked = [check_request(r, self.name) for r in requests]
        bodies = [self.payload(r) for r in checked]
        if self._loop is None:
            self._loop = LoopThread(f"icl-openai-{self.model}")
        key = self._key()
        return self._loop.run(self._gather(checked, bodies, key))

    def close(self) -> None:
        """Close the connection pool and stop the loop (also done at garbage collection)."""
        if self._loop is not None:
            if self._client is not None:
                self._loop.run(self._client.aclose())
            self._loop.close()
            self._loop = self._client = self._gate = None

    async def _gather(self, requests: list[ChatRequest], bodies: list[dict[str, Any]], key: str) -> list[Any]:
        if self._client is None:
            self._client = Connections(f"{self.base_url}/chat/completions")
            self._gate = Gate(self.concurrency, self.max_rps)
        return list(await asyncio.gather(*(self._one(r, b, key) for r, b in zip(requests, bodies))))

    def _delay(self, attempt: int, retry_after: Optional[str]) -> float:
        """Seconds before retry ``attempt + 1``: the server's ``Retry-After`` (either form) in
        full, else the capped exponential schedule."""
        wait = retry_after_seconds(retry_after)
        if wait is not None:
            if wait > self.max_backoff:
                log.warning("openai: the server asks to retry after %.1f s (above max_backoff %.1f s); waiting",
                            wait, self.max_backoff)
            return wait
        return min(self.max_backoff, self.backoff * (2 ** attempt))

    async def _one(self, request: ChatRequest, body: dict[str, Any], key: str) -> Any:
        assert self._gate is not None and self._client is not None
        url = f"{self.base_url}/chat/completions"
        where = redact(f"openai: request {request.id!r} to {url}", [key])
        try:  # as httpx encoded ``json=``; NaN is no JSON
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        except ValueError as exc:
            return ChatServerError(f"{where}: request body is not JSON: {exc}")
        authorization = f"Bearer {key}" if key else None
        transport_errors = self._client.transport_errors()
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after = status = raw = None
            async with self._gate.slots:
                await self._gate.pace()
                try:
                    async with asyncio.timeout(self.timeout):  # the whole exchange, per attempt
                        async with self._client.post(data, authorization) as response:
                            raw = await read_capped(response, self.max_response_bytes)
                            status, retry_after = response.status, _header(response, b"retry-after")
                except TimeoutError:
                    last = f"Timeout: no complete answer within {self.timeout:g} s"
                except transport_errors as exc:  # connection refused/reset, protocol errors
                    last = redact(f"{type(exc).__name__}: {exc}", [key])
                except BodyTooLarge as exc:
                    return ChatServerError(f"{where}: {exc}")
                except Exception as exc:  # anything else about this answer fails this request only
                    return ChatServerError(redact(f"{where}: {type(exc).__name__}: {exc}", [key]))
            if status is not None:
                text = redact(raw.decode("utf-8", "replace")[:500], [key]) if raw is not None else ""
                if status == 200:
                    return _answer(raw or b"", where, key)
                if status not in RETRY_STATUSES:
                    if status in (400, 413, 422) and _OVERFLOW.search(text):
                        return ContextOverflowError(f"{where}: the server refused the prompt as too long: {text}")
                    hint = f" (is ${self.api_key_env} set?)" if status in (401, 403) else ""
                    return ChatServerError(f"{where}: HTTP {status}{hint}: {text}")
                last = f"HTTP {status}: {text}"
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        return ChatServerError(f"{where}: failed after {self.max_retries + 1} attempts; last: {last}")


def _header(response: Any, name: bytes) -> Optional[str]:
    for k, v in response.headers:
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _answer(raw: bytes, where: str, key: str) -> Any:
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return ChatServerError(redact(f"{where}: malformed chat-completions response ({type(exc).__name__}: {exc}): "
                                      f"{raw[:300].decode('utf-8', 'replace')}", [key]))
    if content is None:
        return ""
    if not isinstance(content, str):
        return ChatServerError(f"{where}: message content is {type(content).__name__}, expected a string")
    return content
