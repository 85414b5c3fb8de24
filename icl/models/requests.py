"""Typed requests: what a benchmark asks of a model (plain data, content-hashable).

- :class:`AnalogyRequest`: K context pairs and a query -> one RGB image (visual in-context).
- :class:`ChatRequest`: interleaved images and text in chat turns -> text (VL-ICL image-to-text,
  best50's detection prompt, judges).
- :class:`GenerationRequest`: interleaved text and images -> one RGB image (VL-ICL / CoBSAT
  text-to-image, VIF-Bench multi-reference generation).

Images are uint8 ``[H, W, 3]`` numpy arrays unless stated otherwise. ``seed`` is the request's
own random seed (derived by the benchmark with ``derive_seed``): a model that samples seeds its
generator from it, so an answer never depends on the batch or order it ran in.
``content_hash(request)`` is the request part of the prediction cache key (PROTOCOL §1.4).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any, Optional, Union

import numpy as np

Image = np.ndarray
Part = Union[str, np.ndarray]


@dataclass(frozen=True)
class AnalogyRequest:
    """One visual analogy: K context pairs and a query; the model returns one RGB image.

    Images are uint8 ``[H, W, 3]`` (sizes may differ between images): numpy arrays, or, when
    ``device`` is set (only for adapters with ``accepts_tensors``), torch uint8 tensors already
    on that device. ``target_size`` is the ``(h, w)`` of the ground truth; a model may answer at
    any resolution (the task resizes). ``oracle_target`` is the encoded ground truth, filled
    only for privileged adapters.
    """

    task: str
    dataset: str
    query_id: str
    context_inputs: list[Any]
    context_outputs: list[Any]
    query: Any
    target_size: tuple[int, int]
    oracle_target: Optional[Any] = None
    device: Optional[str] = None
    seed: int = 0

    @property
    def shots(self) -> int:
        return len(self.context_inputs)


@dataclass(frozen=True)
class Message:
    """One chat turn: ``role`` is "system", "user" or "assistant"; ``content`` interleaves text
    and images in the order the model must see them."""

    role: str
    content: tuple[Part, ...]

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant"):
            raise ValueError(f"message role must be 'system', 'user' or 'assistant', got {self.role!r}")
        for i, part in enumerate(self.content):
            if not isinstance(part, (str, np.ndarray)):
                raise TypeError(f"message content[{i}]: expected str or a uint8 [H, W, 3] array, "
                                f"got {type(part).__name__}")


@dataclass(frozen=True)
class ChatRequest:
    """Interleaved images and text -> text. Greedy decoding unless ``do_sample``; the answer has
    between ``min_new_tokens`` and ``max_new_tokens`` new tokens. ``oracle_answer`` (the
    reference answer) is filled only for privileged adapters (the oracle baseline)."""

    id: str
    messages: tuple[Message, ...]
    max_new_tokens: int = 15
    min_new_tokens: int = 1
    do_sample: bool = False
    temperature: float = 1.0
    seed: int = 0
    oracle_answer: Optional[str] = None

    @classmethod
    def user(cls, id: str, *parts: Part, system: Optional[str] = None, **settings: Any) -> "ChatRequest":
        """A one-turn request: optional system prompt, then one user turn of ``parts``."""
        messages = ((Message("system", (system,)),) if system else ()) + (Message("user", tuple(parts)),)
        return cls(id, messages, **settings)

    @property
    def images(self) -> list[np.ndarray]:
        """Every image of every turn, in order."""
        return [p for m in self.messages for p in m.content if isinstance(p, np.ndarray)]


@dataclass(frozen=True)
class GenerationRequest:
    """Interleaved text and images -> one RGB image (uint8 ``[h, w, 3]``). ``size`` is the
    ``(h, w)`` the benchmark wants (the adapter generates at its own resolution and resizes)."""

    id: str
    prompt: tuple[Part, ...]
    size: Optional[tuple[int, int]] = None
    seed: int = 0

    @property
    def images(self) -> list[np.ndarray]:
        return [p for p in self.prompt if isinstance(p, np.ndarray)]


REQUEST_TYPES: tuple[type, ...] = (AnalogyRequest, ChatRequest, GenerationRequest)


def _feed(h: Any, value: Any) -> None:
    """Hash a value unambiguously: type tag, then content (arrays by dtype, shape and bytes)."""
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        h.update(f"nd:{arr.dtype.str}:{arr.shape}:".encode())
        if arr.size:  # an empty array's bytes are none (a zero-size buffer cannot be cast to bytes)
            h.update(arr.data.cast("B"))
    elif hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        _feed(h, value.detach().cpu().numpy())
    elif isinstance(value, (list, tuple)):
        h.update(f"seq:{len(value)}:".encode())
        for v in value:
            _feed(h, v)
    elif isinstance(value, Message):
        h.update(f"msg:{value.role}:".encode())
        _feed(h, value.content)
    else:
        h.update(b"js:" + json.dumps(value, sort_keys=True).encode() + b";")


def content_hash(request: Any, exclude: tuple[str, ...] = ("device",)) -> str:
    """SHA-256 (hex) of a request's type and every field but ``exclude`` (where the images lie
    does not change the answer)."""
    h = hashlib.sha256(type(request).__name__.encode())
    for f in fields(request):
        if f.name in exclude:
            continue
        h.update(f"|{f.name}=".encode())
        _feed(h, getattr(request, f.name))
    return h.hexdigest()
