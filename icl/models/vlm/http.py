"""HTTP plumbing of the ``openai`` adapter: one event loop and client for the adapter's lifetime,
the request gate, ``Retry-After`` parsing, a capped body reader and secret redaction.

- :class:`LoopThread`: a daemon thread running one asyncio loop; every ``predict`` call runs
  on it, so the connection pool, the concurrency gate and the rate limiter span calls (a batch
  is no barrier to the next one's connections, and ``max_rps`` holds across batches).
- :func:`retry_after_seconds`: both forms of RFC 9110 §10.2.3, delay-seconds and HTTP-date.
- :class:`Connections`: one keep-alive HTTP/1.1 connection per gate slot to one URL (a free
  list, no pool bookkeeping), through the environment's proxy when one applies.
- :func:`read_capped`: the body read chunk by chunk, refused past ``max_bytes``, and decoded
  (``gzip``/``deflate``) under the same cap.
- :func:`redact`: a secret, and credentials written into a URL (``user:pass@``, ``key=`` style
  query parameters), replaced by ``***`` in any text that may be stored or printed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import sys
import threading
import time
import urllib.request
import weakref
import zlib
from concurrent.futures import Future
from email.utils import parsedate_to_datetime
from typing import Any, AsyncIterator, Coroutine, Iterable, Optional, TypeVar
from urllib.parse import unquote, urlsplit

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
    """The body of a streamed ``httpcore`` response, refused once it (or its decoded form)
    exceeds ``max_bytes``; ``gzip`` and ``deflate`` content encodings are decoded."""
    headers = {k.lower(): v for k, v in response.headers}
    declared = headers.get(b"content-length", b"")
    if declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(f"response body of {declared.decode()} bytes exceeds max_response_bytes={max_bytes}")
    chunks, size = [], 0
    async for chunk in response.aiter_stream():
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"response body exceeds max_response_bytes={max_bytes}")
        chunks.append(chunk)
    raw = b"".join(chunks)
    encoding = headers.get(b"content-encoding", b"identity").strip().lower()
    if encoding in (b"", b"identity") or not raw:  # an empty body (a 429, say) decodes to nothing
        return raw
    if encoding not in (b"gzip", b"x-gzip", b"deflate"):
        raise ValueError(f"unsupported Content-Encoding {encoding.decode('latin-1')!r}")
    # gzip header for gzip; zlib header (RFC 9110 deflate), or a raw stream as some servers send
    if encoding != b"deflate":
        wbits = 16 + zlib.MAX_WBITS
    else:
        wbits = zlib.MAX_WBITS if raw[:1] == b"\x78" else -zlib.MAX_WBITS
    decoder = zlib.decompressobj(wbits)
    body = decoder.decompress(raw, max_bytes + 1)
    if len(body) > max_bytes:
        raise BodyTooLarge(f"decoded response body exceeds max_response_bytes={max_bytes}")
    if not decoder.eof:
        raise ValueError(f"truncated {encoding.decode()} response body")
    return body


class Connections:
    """Keep-alive HTTP/1.1 connections to one URL, at most one per gate slot: a request takes an
    idle connection (or opens one), and gives it back when its answer was read in full; a failed
    or cancelled exchange closes its connection. httpx's pool scans every connection and queued
    request at each start and finish (2-3 ms of CPU per request at 16 connections here, the limit
    of a 50 ms-latency server at concurrency 16); a free list costs ~0.3 ms. When the
    environment's ``http(s)_proxy`` applies to the URL (``no_proxy`` honoured), each slot is a
    one-connection ``httpcore`` proxy pool instead."""

    def __init__(self, url: str) -> None:
        import httpx  # first, so that a missing package names the ``vlm`` extra
        import httpcore

        self._httpcore = httpcore
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        default_port = port == (443 if parts.scheme == "https" else 80)
        self.origin = httpcore.Origin(parts.scheme.encode(), host.encode("idna"), port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.url = httpcore.URL(scheme=parts.scheme.encode(), host=host.encode("idna"), port=port,
                                target=target.encode())
        authority = host if default_port else f"{host}:{port}"
        self.headers = [(b"Host", authority.encode("idna")), (b"Accept", b"application/json"),
                        (b"Accept-Encoding", b"gzip, deflate"), (b"User-Agent", b"icl"),
                        (b"Content-Type", b"application/json")]
        self.basic_auth = None  # credentials written into the URL, as httpx sends them
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.basic_auth = b"Basic " + base64.b64encode(pair)
        self._ssl = httpx.create_ssl_context() if parts.scheme == "https" else None
        proxies = urllib.request.getproxies()
        proxy = proxies.get(parts.scheme) or proxies.get("all")
        self.proxy = None if not proxy or urllib.request.proxy_bypass(host) else proxy
        self._idle: list[Any] = []

    def _open(self) -> Any:
        if self.proxy:
            return self._httpcore.AsyncHTTPProxy(proxy_url=self.proxy, ssl_context=self._ssl, max_connections=1,
                                                 max_keepalive_connections=1)
        return self._httpcore.AsyncHTTPConnection(self.origin, ssl_context=self._ssl, keepalive_expiry=30.0)

    async def _take(self) -> Any:
        while self._idle:
            connection = self._idle.pop()
            if self.proxy or (connection.is_available() and not connection.has_expired()):
                return connection
            await connection.aclose()  # the server closed it, or its keep-alive ran out
        return self._open()

    @contextlib.asynccontextmanager
    async def post(self, body: bytes, authorization: Optional[str]) -> AsyncIterator[Any]:
        """``POST`` ``body`` (JSON) and yield the ``httpcore`` response, its body unread."""
        headers = self.headers + [(b"Content-Length", str(len(body)).encode())]
        auth = authorization.encode() if authorization else self.basic_auth
        if auth:
            headers.append((b"Authorization", auth))
        connection = await self._take()
        try:
            response = await connection.handle_async_request(
                self._httpcore.Request(b"POST", self.url, headers=headers, content=body))
            try:
                yield response
            finally:
                await response.aclose()
        except BaseException:
            await connection.aclose()
            raise
        self._idle.append(connection)

    def transport_errors(self) -> tuple[type[BaseException], ...]:
        """Exceptions of a failed exchange worth a retry (connect, read, write, protocol, proxy)."""
        h = self._httpcore
        return (h.NetworkError, h.ProtocolError, h.ProxyError, h.TimeoutException, h.ConnectionNotAvailable, OSError)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()


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
