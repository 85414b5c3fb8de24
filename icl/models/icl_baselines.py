"""Weight-free baselines for few-shot chat and generation requests (VL-ICL, CoBSAT, ...).

They know nothing of any benchmark: they read the request's structure only. Few-shot chat
prompts are alternating turns (each demonstration a user turn answered by an assistant turn,
the query the last user turn), and generation prompts interleave text with the demonstrated
images.

- ``copy-last``: answers a chat request with the last demonstrated answer (the last assistant
  turn; "" when there is none) and a generation request with the last image of its prompt
  (resized to ``size`` with nearest neighbour; mid-grey when the prompt has no image).
- ``frequent-answer``: answers a chat request with the most frequent demonstrated answer (ties go
  to the one demonstrated last).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np

from icl.models.base import Adapter
from icl.models.builtin import resize_nearest_cv
from icl.models.requests import ChatRequest, GenerationRequest

GREY = 128
DEFAULT_SIZE = (64, 64)


def demonstrated_answers(req: ChatRequest) -> list[str]:
    """The text of every assistant turn, in order."""
    return [" ".join(p for p in m.content if isinstance(p, str)) for m in req.messages if m.role == "assistant"]


def _check(req: Any, serves: tuple[type, ...], name: str) -> None:
    if not isinstance(req, serves):
        raise TypeError(f"{name}: cannot answer a {type(req).__name__} (serves {', '.join(t.__name__ for t in serves)})")


class CopyLast(Adapter):
    """The last demonstrated answer, or the last image of the prompt."""

    name = "copy-last"
    version = "1"
    serves = (ChatRequest, GenerationRequest)
    batch_size = 64

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for req in requests:
            _check(req, self.serves, self.name)
            if isinstance(req, ChatRequest):
                answers = demonstrated_answers(req)
                out.append(answers[-1] if answers else "")
                continue
            images = req.images
            size = tuple(req.size) if req.size else (tuple(images[-1].shape[:2]) if images else DEFAULT_SIZE)
            if images:
                out.append(np.ascontiguousarray(resize_nearest_cv(images[-1], size)))
            else:
                out.append(np.full((size[0], size[1], 3), GREY, np.uint8))
        return out


class FrequentAnswer(Adapter):
    """The most frequent demonstrated answer (ties: the latest of them)."""

    name = "frequent-answer"
    version = "1"
    serves = (ChatRequest,)
    batch_size = 64

    def predict(self, requests: Sequence[Any]) -> list[str]:
        out = []
        for req in requests:
            _check(req, self.serves, self.name)
            answers = demonstrated_answers(req)
            if not answers:
                out.append("")
                continue
            counts = Counter(answers)
            top = max(counts.values())
            out.append(next(a for a in reversed(answers) if counts[a] == top))
        return out
