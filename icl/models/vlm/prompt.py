"""Shared prompt helpers for the chat adapters: request validation, chat-message conversion
(transformers chat templates, OpenAI chat-completions) and PNG data URLs.

A :class:`~icl.models.requests.ChatRequest` interleaves ``str`` and uint8 ``[H, W, 3]`` RGB
images inside each turn; both adapters keep that order exactly.
"""

from __future__ import annotations

import base64
from typing import Any, Optional, Sequence

import numpy as np

from icl.models.requests import ChatRequest


class RequestError(ValueError):
    """A request the adapter cannot serve as given (wrong type, bad image, bad settings)."""


def check_request(request: Any, adapter: str) -> ChatRequest:
    """``request`` itself, after checking it is a well-formed :class:`ChatRequest`: every image
    uint8 ``[H, W, 3]`` with H, W >= 1, ``1 <= min_new_tokens <= max_new_tokens``, a positive
    temperature when sampling. Raises :class:`RequestError` naming the request and the part."""
    if not isinstance(request, ChatRequest):
        raise RequestError(f"{adapter}: serves ChatRequest, got {type(request).__name__}")
    rid = request.id
    if not request.messages:
        raise RequestError(f"{adapter}: request {rid!r} has no messages")
    for m, message in enumerate(request.messages):
        for p, part in enumerate(message.content):
            if isinstance(part, np.ndarray) and (part.dtype != np.uint8 or part.ndim != 3 or part.shape[2] != 3
                                                 or part.shape[0] < 1 or part.shape[1] < 1):
                raise RequestError(f"{adapter}: request {rid!r} messages[{m}].content[{p}]: expected a uint8 "
                                   f"[H, W, 3] image, got {part.dtype} {list(part.shape)}")
        if message.role == "system" and any(isinstance(x, np.ndarray) for x in message.content):
            raise RequestError(f"{adapter}: request {rid!r} messages[{m}]: a system turn holds text only")
    if not 0 <= request.min_new_tokens <= request.max_new_tokens or request.max_new_tokens < 1:
        raise RequestError(f"{adapter}: request {rid!r}: need 0 <= min_new_tokens <= max_new_tokens and "
                           f"max_new_tokens >= 1, got min {request.min_new_tokens}, max {request.max_new_tokens}")
    if request.do_sample and not request.temperature > 0:
        raise RequestError(f"{adapter}: request {rid!r}: sampling needs temperature > 0, got {request.temperature}")
    return request


def fold_system(request: ChatRequest) -> list[tuple[str, list[Any]]]:
    """The turns as ``(role, parts)`` with every system turn's text moved to the front of the
    first user turn (separated by a blank line), for templates without a system role."""
    system = "\n\n".join(str(p) for m in request.messages if m.role == "system" for p in m.content)
    turns = [(m.role, list(m.content)) for m in request.messages if m.role != "system"]
    if system:
        first_user = next((i for i, (role, _) in enumerate(turns) if role == "user"), None)
        if first_user is None:
            turns.insert(0, ("user", [system]))
        else:
            parts: list[Any] = [system + "\n\n"]
            turns[first_user] = ("user", parts + turns[first_user][1])
    return turns


def hf_messages(request: ChatRequest, *, system_role: bool = True,
                image_placeholder: Optional[str] = None) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """``(messages, images)`` for ``processor.apply_chat_template``: each turn's parts become
    ``{"type": "text"}`` / ``{"type": "image"}`` items in order, and ``images`` lists the
    arrays in the same order. With ``image_placeholder`` an image is written into the text as
    that placeholder instead (for templates that move image items away from their place)."""
    turns = ([(m.role, list(m.content)) for m in request.messages] if system_role else fold_system(request))
    messages, images = [], []
    for role, parts in turns:
        items: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, np.ndarray):
                images.append(part)
                if image_placeholder is None:
                    items.append({"type": "image"})
                    continue
                part = image_placeholder
            if items and items[-1]["type"] == "text" and image_placeholder is not None:
                items[-1]["text"] += part  # one text item per run of text and inline images
            else:
                items.append({"type": "text", "text": part})
        messages.append({"role": role, "content": items})
    return messages, images


def png_data_url(image: np.ndarray) -> str:
    """``data:image/png;base64,...`` of a uint8 ``[H, W, 3]`` RGB image (lossless)."""
    import cv2

    ok, buf = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]))
    if not ok:
        raise RequestError(f"cannot encode a {list(image.shape)} image as PNG")
    return "data:image/png;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def decode_data_url(url: str) -> np.ndarray:
    """The uint8 ``[H, W, 3]`` RGB image of a base64 PNG/JPEG data URL (the inverse of
    :func:`png_data_url`)."""
    import cv2

    head, sep, data = url.partition(",")
    if not sep or not head.startswith("data:image/") or not head.endswith(";base64"):
        raise RequestError(f"not a base64 image data URL: {url[:40]!r}")
    image = cv2.imdecode(np.frombuffer(base64.b64decode(data), np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise RequestError(f"undecodable image in data URL {url[:40]!r}")
    return np.ascontiguousarray(image[..., ::-1])


def openai_messages(request: ChatRequest, detail: Optional[str] = None) -> list[dict[str, Any]]:
    """The request's turns in the chat-completions schema: text as ``{"type": "text"}``,
    images as ``{"type": "image_url"}`` PNG data URLs (with ``detail`` when given), in order;
    system and assistant turns as plain strings."""
    out: list[dict[str, Any]] = []
    for m, message in enumerate(request.messages):
        if message.role != "user":
            if any(isinstance(p, np.ndarray) for p in message.content):
                raise RequestError(f"openai: request {request.id!r} messages[{m}]: images are only allowed "
                                   f"in user turns (got one in a {message.role} turn)")
            out.append({"role": message.role, "content": "".join(str(p) for p in message.content)})
            continue
        content = [{"type": "image_url", "image_url": {"url": png_data_url(p), **({"detail": detail} if detail else {})}}
                   if isinstance(p, np.ndarray) else {"type": "text", "text": p} for p in message.content]
        out.append({"role": "user", "content": content})
    return out


def count_occurrences(text: str, token: str) -> int:
    """Non-overlapping occurrences of ``token`` in ``text`` (0 for an empty token)."""
    return text.count(token) if token else 0


def first_index(values: Sequence[int], targets: set[int]) -> int:
    """Index of the first element of ``values`` in ``targets``, or ``len(values)``."""
    return next((i for i, v in enumerate(values) if v in targets), len(values))
