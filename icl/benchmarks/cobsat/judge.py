"""``cobsat-judge``: a deterministic judge of CoBSAT-lite answers.

It answers the benchmark's two multiple-choice questions (:mod:`icl.benchmarks.cobsat.questions`):

- about an image: it decodes the CoBSAT-lite code (:mod:`icl.benchmarks.cobsat.lite`) and answers
  the option number, or "unreadable" (no digit: parsed as -1, wrong) for an image that is not a
  lite drawing;
- about a description ("Image caption: ..."): the number of the option named first in it
  (whole words, case-insensitive), or "none".

It judges only requests the benchmark marks as lite data (``id`` starting ``cobsat-lite/``) and
refuses anything else with an error: release images need a vision-language judge (``--judge``).
"""

from __future__ import annotations

import re
from typing import Optional

from icl.benchmarks.cobsat import lite
from icl.benchmarks.cobsat.vocab import VOCAB, display
from icl.models.builtin import BuiltinDataJudge
from icl.models.requests import ChatRequest

LITE_PREFIX = "cobsat-lite/"
_CAPTION = re.compile(r"^Image caption: (.*)\. What is ", re.S)


def option_block(space: str) -> str:
    """The options of ``space`` as a question lists them: `` (1)yellow (2)white ...``."""
    return "".join(f" ({i + 1}){display(v)}" for i, v in enumerate(VOCAB[space]))


def _space(question: str) -> Optional[str]:
    hits = [s for s in VOCAB if option_block(s) + "." in question]
    return hits[0] if len(hits) == 1 else None


def _named_first(text: str, space: str) -> Optional[int]:
    best: Optional[tuple[int, int]] = None
    for i, v in enumerate(VOCAB[space]):
        m = re.search(rf"\b{re.escape(display(v))}\b", text, re.I)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), i)
    return None if best is None else best[1]


def answer(req: ChatRequest) -> str:
    """The judge's answer to one question (see the module docstring)."""
    text = " ".join(p for m in req.messages if m.role == "user" for p in m.content if isinstance(p, str))
    space = _space(text)
    if space is None:
        return "unreadable"
    described = _CAPTION.match(text)
    if described is not None:
        found = _named_first(described.group(1), space)
        return "none" if found is None else str(found + 1)
    images = req.images
    if not images:
        return "unreadable"
    img = images[-1]
    found = lite.read_object(img) if space in ("object", "animal") else lite.read_attribute(img, space)
    return "unreadable" if found is None else str(found + 1)


class CoBSATJudge(BuiltinDataJudge):
    """Answers CoBSAT's judge questions about CoBSAT-lite answers (see the module docstring)."""

    name = "cobsat-judge"
    version = "1"
    prefix = LITE_PREFIX
    data = "CoBSAT-lite answers"

    def answer(self, request: ChatRequest) -> str:
        return answer(request)
