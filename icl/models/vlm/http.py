"""HTTP plumbing of the ``openai`` adapter: one event loop and client for the adapter's lifetime,
the request gate, ``Retry-After`` parsing, a capped body reader and secret redaction.

- :class:`LoopThread`: a daemon thread running one asyncio loop; every ``predict`` call runs
  on it, so the connection pool, the concurrency gate and the rate limiter span calls (a batch
  is no barrier to the next one's connections, and ``max_rps`` holds across batches).
- :func:`retry_after_seconds`: both forms of RFC 9110 §10.2.3, delay-seconds and HTTP-date.
- :func:`read_capped`: the body read chunk by chunk, refused past ``max_bytes``.
- :func:`redact`: a secret, and credentials written into a URL (``user:pass@``, ``key=`` style
  query parameters), replaced by ``***`` in any text that may be stored or printed.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import time
import weakref
from concurrent.futures import Future
from email.utils import parsedate_to_datetime
from typing import Any, Coroutine, Iterable, Optional, TypeVar

T = TypeVar("T")

_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_SECRET_PARAM = re.compile(r"(?i)([?&](?:api[-_]?key|key|token|access_token|secret|password|sig)=)[^&#\s\"']+")
MASK = "***"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without the given secrets (each at least 4 characters) or URL credentials."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, MASK)
    text = _URL_USERINFO.sub(MASK + "@", text)
    return _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, text)


def retry_after_seconds(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP-date; a date in
    the past is 0); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class BodyTooLarge(ValueError):
    """A response body longer than the adapter's ``max_response_bytes``."""


async def read_capped(response: Any, max_bytes: int) -> bytes:
    """The body of a streamed ``httpx`` response, refused once it exceeds ``max_bytes``."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(f"response body of {declared} bytes exceeds max_response_bytes={max_bytes}")
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"response body exceeds max_response_bytes={max_bytes}")
        chunks.append(chunk)
    return b"".join(chunks)


class Gate:
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


def _skip_absent_sniffio() -> None:
    """httpcore tries ``import sniffio`` on every lock it makes (several per request); when the
    package is absent each attempt searches the whole ``sys.path`` again (~1 ms, most of the
    client's time per request). A ``None`` entry in ``sys.modules`` makes that failed import
    immediate; httpcore then assumes asyncio, as it does anyway without sniffio."""
    import importlib.util

    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


class LoopThread:
    """One asyncio loop in a daemon thread; ``run(coroutine)`` blocks the caller (any thread,
    also one inside a running loop) until the coroutine finishes there. Stopped by ``close()``
    or when the owner is garbage collected."""

    def __init__(self, name: str) -> None:
        _skip_absent_sniffio()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._finalizer = weakref.finalize(self, _stop, self.loop, self._thread)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result()

    def close(self) -> None:
        self._finalizer()


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_closed():
        return
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    if not thread.is_alive():
        loop.close()
