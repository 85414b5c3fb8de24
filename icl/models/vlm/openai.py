"""``openai``: an OpenAI-compatible chat-completions client (vLLM, SGLang, hosted APIs).

One ``POST {base_url}/chat/completions`` per request, ``concurrency`` of them in flight at
once (asyncio + ``httpx.AsyncClient``). Images travel as base64 PNG data URLs, in order.
Retries with exponential backoff (``backoff * 2**attempt`` seconds, capped at
``max_backoff``; a ``Retry-After`` header in seconds wins) on 429, 5xx, timeouts and connection
errors, at most ``max_retries`` times.

The API key is read from the environment variable *named* by ``api_key_env`` at call time; the
key itself is never a model argument, so it never enters the model's identity or the store.

Per-request failures: ``predict`` returns one entry per request: the answer ``str``, a
:class:`~icl.models.ContextOverflowError` instance when the server says the prompt exceeds the
model's context, or a :class:`ChatServerError` instance when the request failed for good
(retries spent, or a non-retryable status); the other requests are answered.
"""

from __future__ import annotations

import asyncio
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Coroutine, Optional, Sequence

from icl.models.base import Adapter, ContextOverflowError
from icl.models.requests import ChatRequest
from icl.models.vlm.prompt import check_request, openai_messages

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_OVERFLOW = re.compile(r"context[ _]length|maximum context|too many tokens|prompt is too long", re.IGNORECASE)


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
    that refuse the older name).
    """

    name = "openai"
    version = "1"
    serves = (ChatRequest,)

    def __init__(self, model: str, base_url: str = "http://127.0.0.1:8000/v1",
                 api_key_env: Optional[str] = "OPENAI_API_KEY", concurrency: int = 8, timeout: float = 120.0,
                 max_retries: int = 5, backoff: float = 1.0, max_backoff: float = 60.0,
                 max_rps: Optional[float] = None, batch_size: int = 64, send_seed: bool = True,
                 min_tokens: bool = False, token_limit_field: str = "max_tokens"):
        if not isinstance(model, str) or not model:
            raise ValueError(f"openai: model must be the served model's name, got {model!r}")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai: base_url must start with http:// or https://, got {base_url!r}")
        for arg, count in (("concurrency", concurrency), ("batch_size", batch_size)):
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
        self.max_rps, self.token_limit_field = max_rps, token_limit_field
        self.model, self.base_url, self.api_key_env = model, base_url.rstrip("/"), api_key_env
        self.concurrency, self.timeout, self.max_retries = concurrency, float(timeout), max_retries
        self.backoff, self.max_backoff, self.batch_size = float(backoff), float(max_backoff), batch_size
        self.send_seed, self.min_tokens = send_seed, min_tokens

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for one request (greedy = temperature 0)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request),
            self.token_limit_field: request.max_new_tokens,
            "temperature": float(request.temperature) if request.do_sample else 0.0,
        }
        if self.send_seed:
            body["seed"] = request.seed % (1 << 63)
        if self.min_tokens:
            body["min_tokens"] = request.min_new_tokens
        return body

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        checked = [check_request(r, self.name) for r in requests]
        bodies = [self.payload(r) for r in checked]
        return _run(self._gather(checked, bodies))

    async def _gather(self, requests: list[ChatRequest], bodies: list[dict[str, Any]]) -> list[Any]:
        import httpx

        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), limits=limits,
                                     headers=self._headers()) as client:
            gate = _Gate(self.concurrency, self.max_rps)
            return list(await asyncio.gather(*(self._one(client, gate, r, b) for r, b in zip(requests, bodies))))

    def _delay(self, attempt: int, retry_after: Optional[str]) -> float:
        if retry_after:
            try:
                return min(self.max_backoff, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: fall back to our own schedule
        return min(self.max_backoff, self.backoff * (2 ** attempt))

    async def _one(self, client: Any, gate: "_Gate", request: ChatRequest, body: dict[str, Any]) -> Any:
        import httpx

        url = f"{self.base_url}/chat/completions"
        where = f"openai: request {request.id!r} to {url}"
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            async with gate.slots:
                await gate.pace()
                try:
                    response = await client.post(url, json=body)
                except httpx.TransportError as exc:  # connection refused/reset, timeouts
                    last = f"{type(exc).__name__}: {exc}"
                    response = None
            if response is not None:
                if response.status_code == 200:
                    return _answer(response, where)
                text = response.text[:500]
                if response.status_code not in RETRY_STATUSES:
                    if response.status_code in (400, 413, 422) and _OVERFLOW.search(text):
                        return ContextOverflowError(f"{where}: the server refused the prompt as too long: {text}")
                    hint = f" (is ${self.api_key_env} set?)" if response.status_code in (401, 403) else ""
                    return ChatServerError(f"{where}: HTTP {response.status_code}{hint}: {text}")
                last = f"HTTP {response.status_code}: {text}"
                retry_after = response.headers.get("retry-after")
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        return ChatServerError(f"{where}: failed after {self.max_retries + 1} attempts; last: {last}")


class _Gate:
    """At most ``concurrency`` requests in flight, and starts spaced by ``1 / max_rps`` seconds."""

    def __init__(self, concurrency: int, max_rps: Optional[float]):
        self.slots = asyncio.Semaphore(concurrency)
        self.interval = 1.0 / max_rps if max_rps else 0.0
        self.next_start = 0.0
        self.lock = asyncio.Lock()

    async def pace(self) -> None:
        if not self.interval:
            return
        async with self.lock:
            now = asyncio.get_running_loop().time()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


def _answer(response: Any, where: str) -> Any:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return ChatServerError(f"{where}: malformed chat-completions response ({type(exc).__name__}: {exc}): "
                               f"{response.text[:300]}")
    if content is None:
        return ""
    if not isinstance(content, str):
        return ChatServerError(f"{where}: message content is {type(content).__name__}, expected a string")
    return content


def _run(coroutine: Coroutine[Any, Any, list[Any]]) -> list[Any]:
    """Run ``coroutine`` to completion, also from inside a running event loop (notebooks)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
