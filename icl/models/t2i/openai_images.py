"""``openai-images``: OpenAI-compatible image generation and editing over HTTP.

A request without images is ``POST {base_url}/images/generations`` (JSON: ``model``,
``prompt``, ``n`` 1, ``size``, and ``response_format`` "b64_json" unless
``response_format=None`` for servers that always answer in base64, as gpt-image-1 does); a
request with images is ``POST {base_url}/images/edits`` (multipart/form-data: the same fields,
the images as PNG files in prompt order, under ``image`` when there is one and ``image[]`` when
there are several, as the OpenAI API reference for ``/v1/images/edits`` and its Python SDK send
arrays). The prompt is the request's text parts joined by spaces. The answer is
``data[0].b64_json``, decoded (PNG, JPEG or WebP) and resized to ``request.size``.

The client machinery is the chat adapter's (:class:`~icl.models.vlm.openai.OpenAIChat`): its
arguments and checks (``base_url``, ``api_key_env`` naming the environment variable read at
call time, never stored; ``concurrency``, ``timeout``, ``max_retries``, ``backoff``,
``max_backoff``, ``max_rps``, ``batch_size``), its retry schedule (``_delay``: exponential,
capped, ``Retry-After`` honoured) on the same statuses (``RETRY_STATUSES``), and its failure
type (:class:`~icl.models.vlm.openai.ChatServerError`, returned in the request's slot), its
request gate and event-loop runner.
``send_seed`` sends ``request.seed`` as ``seed`` (servers that take one; OpenAI's API has none,
so its images are not reproducible: the store keeps the first answer).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any, Optional, Sequence

import cv2
import numpy as np

from icl.models.requests import GenerationRequest
from icl.models.t2i.common import Recorder, check_generation, prompt_text, seed_of, to_size
from icl.models.vlm.http import Gate, LoopThread
from icl.models.vlm.openai import PRICES, RETRY_STATUSES, ChatServerError, OpenAIChat


class OpenAIImages(OpenAIChat):
    """Images over HTTP behind GenerationRequest (see the module docstring). Model arguments:
    those of ``openai`` (``model`` is the served image model's name) plus ``size`` (the
    ``"WxH"`` asked of the server), ``quality`` (sent when set), ``response_format``
    ("b64_json", or None to leave it out), ``send_seed`` (default False), and the prices
    ``--check`` reads: ``price_in`` (per 1M prompt tokens) and ``price_image`` (per image sent
    to an edit and per image generated); ``price_out`` is taken and unused (no output tokens)."""

    name = "openai-images"
    version = "1"
    serves = (GenerationRequest,)  # type: ignore[assignment]  # the base serves ChatRequest only
    execution_args = frozenset({"concurrency", "timeout", "max_retries", "backoff", "max_backoff", "max_rps",
                                "batch_size", *PRICES})

    def __init__(self, model: str, base_url: str = "http://127.0.0.1:8000/v1",
                 api_key_env: Optional[str] = "OPENAI_API_KEY", size: str = "1024x1024",
                 quality: Optional[str] = None, response_format: Optional[str] = "b64_json",
                 send_seed: bool = False, concurrency: int = 4, timeout: float = 300.0, max_retries: int = 5,
                 backoff: float = 1.0, max_backoff: float = 60.0, max_rps: Optional[float] = None,
                 batch_size: int = 16, price_in: Optional[float] = None, price_out: Optional[float] = None,
                 price_image: Optional[float] = None):
        super().__init__(model, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
                         timeout=timeout, max_retries=max_retries, backoff=backoff, max_backoff=max_backoff,
                         max_rps=max_rps, batch_size=batch_size, send_seed=send_seed, price_in=price_in,
                         price_out=price_out, price_image=price_image)
        w, sep, h = str(size).partition("x")
        if not (sep and w.isdigit() and h.isdigit() and int(w) > 0 and int(h) > 0):
            raise ValueError(f"openai-images: size must be 'WxH' in pixels (e.g. '1024x1024'), got {size!r}")
        if response_format not in ("b64_json", None):
            raise ValueError(f"openai-images: response_format must be 'b64_json' or None, got {response_format!r}")
        self.size, self.quality, self.response_format = str(size), quality, response_format
        self.recorder = Recorder()

    @property
    def records(self) -> list:
        return self.recorder.records

    def fields(self, request: GenerationRequest) -> dict[str, Any]:
        """The request's non-image fields (the JSON body, or the form fields of an edit)."""
        body: dict[str, Any] = {"model": self.model, "prompt": prompt_text(request), "n": 1, "size": self.size}
        if self.response_format:
            body["response_format"] = self.response_format
        if self.quality:
            body["quality"] = self.quality
        if self.send_seed:
            body["seed"] = seed_of(request)
        return body

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        checked = [check_generation(r, self.name) for r in requests]
        with self.recorder.batch(None) as done:
            if getattr(self, "_images_loop", None) is None:  # one loop for the adapter's life
                self._images_loop = LoopThread(f"icl-openai-images-{self.model}")
            answers = self._images_loop.run(self._all(checked))
            out: list[Any] = []
            for r, answer in zip(checked, answers):
                if isinstance(answer, np.ndarray):
                    answer = to_size(answer, r.size)
                    done(r, seed_of(r), None, tuple(answer.shape[:2]), answer.shape[:2])
                out.append(answer)
        return out

    async def _all(self, requests: list[GenerationRequest]) -> list[Any]:
        import httpx

        key = self._key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), limits=limits, headers=headers) as client:
            gate = Gate(self.concurrency, self.max_rps)
            return list(await asyncio.gather(*(self._one_image(client, gate, r) for r in requests)))

    def _key(self) -> str:
        return os.environ.get(self.api_key_env, "") if self.api_key_env else ""

    async def _one_image(self, client: Any, gate: Any, request: GenerationRequest) -> Any:
        import httpx

        images = request.images
        url = f"{self.base_url}/images/{'edits' if images else 'generations'}"
        where = f"openai-images: request {request.id!r} to {url}"
        fields = self.fields(request)
        files = [("image[]" if len(images) > 1 else "image", (f"image{i}.png", _png(img), "image/png"))
                 for i, img in enumerate(images)]
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after, response = None, None
            async with gate.slots:
                await gate.pace()
                try:
                    if files:
                        form = {k: str(v) for k, v in fields.items()}
                        response = await client.post(url, data=form, files=files)
                    else:
                        response = await client.post(url, json=fields)
                except httpx.TransportError as exc:
                    last = f"{type(exc).__name__}: {exc}"
            if response is not None:
                if response.status_code == 200:
                    return _image(response.content, where)
                text = response.text[:500]
                if response.status_code not in RETRY_STATUSES:
                    hint = f" (is ${self.api_key_env} set?)" if response.status_code in (401, 403) else ""
                    return ChatServerError(f"{where}: HTTP {response.status_code}{hint}: {text}")
                last, retry_after = f"HTTP {response.status_code}: {text}", response.headers.get("retry-after")
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        return ChatServerError(f"{where}: failed after {self.max_retries + 1} attempts; last: {last}")


def _png(image: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]))
    if not ok:
        raise ValueError(f"openai-images: cannot encode a {list(image.shape)} image as PNG")
    return buf.tobytes()


def _image(raw: bytes, where: str) -> Any:
    """The uint8 RGB image of an images response (``data[0].b64_json``), or a ChatServerError."""
    try:
        item = json.loads(raw)["data"][0]
        b64 = item.get("b64_json")
        if not b64:
            return ChatServerError(f"{where}: the answer has no b64_json image (keys: {sorted(item)}); "
                                   f"pass response_format=b64_json or use a server that answers in base64")
        image = cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_COLOR)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return ChatServerError(f"{where}: malformed images response ({type(exc).__name__}: {exc}): {raw[:300]!r}")
    if image is None:
        return ChatServerError(f"{where}: b64_json does not decode to an image")
    return np.ascontiguousarray(image[..., ::-1])
