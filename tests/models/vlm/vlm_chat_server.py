"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for tests and benchmarks:
FastAPI under uvicorn in a daemon thread, serving an ``hf-vlm`` model. Requests that arrive
together are answered in one batched ``predict`` call (as vLLM batches concurrent requests).

Fault injection: ``server.fail_next(429, 500, ...)`` answers the next requests with those
statuses (with ``marker=``, only requests whose body contains that text); ``server.delay_s`` holds every request that long before answering. The server stops
on ``close()`` (or leaving the ``with`` block) and, whatever happens, after ``lifetime_s``.

Answers are JSON with every non-ASCII character escaped (``json.dumps``' default), so any text
the model gives travels as legal JSON, a lone surrogate as the escape ``\\ud800`` (FastAPI's own
``JSONResponse`` cannot encode one).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from typing import Any, Optional

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from icl.models import ChatRequest, ContextOverflowError, Message
from icl.models.vlm.prompt import decode_data_url


def chat_request(body: dict[str, Any], rid: str) -> ChatRequest:
    """The ChatRequest a chat-completions body describes (data-URL images decoded)."""
    messages = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            parts: tuple = (content,)
        else:
            parts = tuple(p["text"] if p["type"] == "text" else decode_data_url(p["image_url"]["url"])
                          for p in content)
        messages.append(Message(m["role"], parts))
    temperature = float(body.get("temperature", 1.0))
    return ChatRequest(rid, tuple(messages), max_new_tokens=int(body.get("max_tokens", 16)),
                       min_new_tokens=int(body.get("min_tokens", 0)), do_sample=temperature > 0,
                       temperature=temperature if temperature > 0 else 1.0, seed=int(body.get("seed", 0)))


class ChatServer:
    """``with ChatServer(model) as server: OpenAIChat(model="tiny", base_url=server.base_url)``."""

    def __init__(self, model: Any, *, max_batch: int = 16, lifetime_s: float = 300.0):
        self.model, self.max_batch = model, max_batch
        self.faults: deque[tuple[int, Optional[str]]] = deque()
        self.delay_s = 0.0
        self.received = 0
        self.in_flight = self.max_in_flight = 0
        self.authorizations: list[str] = []
        self.batch_sizes: list[int] = []
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        app = FastAPI()
        app.post("/v1/chat/completions")(self._complete)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._deadline = threading.Timer(lifetime_s, self.close)
        self._deadline.daemon = True

    def __enter__(self) -> "ChatServer":
        self._thread.start()
        self._deadline.start()
        start = time.monotonic()
        while not self._server.started:
            if time.monotonic() - start > 20 or not self._thread.is_alive():
                raise RuntimeError("chat test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._deadline.cancel()
        self._server.should_exit = True
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self._socket.close()

    def fail_next(self, *statuses: int, marker: Optional[str] = None) -> None:
        self.faults.extend((status, marker) for status in statuses)

    def _fault(self, raw: str) -> Optional[int]:
        for fault in self.faults:
            if fault[1] is None or fault[1] in raw:
                self.faults.remove(fault)
                return fault[0]
        return None

    async def _complete(self, request: Request) -> Response:
        self.received += 1
        self.authorizations.append(request.headers.get("authorization", ""))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: Request) -> Response:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        raw = (await request.body()).decode()
        status = self._fault(raw)
        if status is not None:
            return JSONResponse({"error": {"message": f"injected {status}"}}, status_code=status,
                                headers={"Retry-After": "0"} if status == 429 else None)
        body = json.loads(raw)
        chat = chat_request(body, f"srv-{self.received}")
        answer = await self._submit(chat)
        if isinstance(answer, ContextOverflowError):
            return JSONResponse({"error": {"message": f"This model's maximum context length is exceeded: {answer}",
                                           "code": "context_length_exceeded"}}, status_code=400)
        return Response(json.dumps({"id": chat.id, "object": "chat.completion", "model": body.get("model"),
                                    "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": answer}}]}),
                        media_type="application/json")

    async def _submit(self, chat: ChatRequest) -> Any:
        if self._worker is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.get_running_loop().create_task(self._batches())
        future = asyncio.get_running_loop().create_future()
        assert self._queue is not None
        await self._queue.put((chat, future))
        return await future

    async def _batches(self) -> None:
        """Answer whatever is queued together, up to ``max_batch`` requests per predict call."""
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            items = [await self._queue.get()]
            await asyncio.sleep(0.005)  # let concurrent arrivals join this batch
            while len(items) < self.max_batch and not self._queue.empty():
                items.append(self._queue.get_nowait())
            self.batch_sizes.append(len(items))
            try:
                answers = await loop.run_in_executor(None, self.model.predict, [c for c, _ in items])
            except Exception as exc:  # one bad batch fails its requests, the server goes on
                answers = [exc] * len(items)
            for (_, future), answer in zip(items, answers):
                if isinstance(answer, Exception) and not isinstance(answer, ContextOverflowError):
                    future.set_exception(answer)
                else:
                    future.set_result(answer)
