"""Answer parsing and correctness (PROTOCOL §3.2).

Two parse modes. ``legacy`` (the default) is the reference code's: the operator tasks take the
first ``\\d+`` of the truncated answer (so a negative result can never be right) and CLEVR is
compared as a string. ``lenient`` takes the first ``-?\\d+`` for the operator tasks and for
CLEVR too. Everything else is the same in both modes. ``keep_dots`` (opt-in, TextOCR) cuts only at
a newline, so a word like ``St.`` or ``www.x.com`` can be right.
"""

from __future__ import annotations

import re
from typing import Any

from icl.benchmarks.vlicl.tasks import EXACT, FIRST_INTEGER, YES_NO, get_task

PARSE_MODES = ("legacy", "lenient")
_LEGACY_INT = re.compile(r"\d+")
_LENIENT_INT = re.compile(r"-?\d+")


def truncate(answer: str, keep_dots: bool = False) -> str:
    """Strip; then cut at the first newline if it is not at position 0, else (unless
    ``keep_dots``) at the first ``.`` if there is one past position 0 (the cut character is
    dropped, nothing is stripped again)."""
    text = answer.strip()
    cut = text.find("\n")
    if cut <= 0 and not keep_dots:
        cut = text.find(".")
    return text[:cut] if cut > 0 else text


def first_integer(text: str, mode: str) -> str:
    """The first integer of ``text`` as written (``""`` when there is none)."""
    m = (_LEGACY_INT if mode == "legacy" else _LENIENT_INT).search(text)
    return m.group() if m else ""


def _check_mode(mode: str) -> None:
    if mode not in PARSE_MODES:
        raise ValueError(f"parse mode must be one of {PARSE_MODES}, got {mode!r}")


def parsed_answer(task: str, answer: str, mode: str = "legacy", keep_dots: bool = False) -> str:
    """What of ``answer`` is compared with the ground truth for image-to-text ``task``."""
    _check_mode(mode)
    text = truncate(answer, keep_dots)
    rule = get_task(task).scoring
    if rule == FIRST_INTEGER or (task == "clevr" and mode == "lenient"):
        return first_integer(text, mode)
    return text


def i2t_correct(task: str, answer: str, truth: Any, mode: str = "legacy", keep_dots: bool = False) -> bool:
    """Whether a model's ``answer`` to an image-to-text query with ground truth ``truth`` is right."""
    if not isinstance(answer, str):
        raise TypeError(f"{task}: expected the model's answer as str, got {type(answer).__name__}")
    rule = get_task(task).scoring
    pred = parsed_answer(task, answer, mode, keep_dots)
    if rule == YES_NO:
        said_yes = "yes" in pred.lower()
        gt = str(truth).lower()
        if gt not in ("yes", "no"):
            raise ValueError(f"{task}: ground truth must be 'yes' or 'no', got {truth!r}")
        return said_yes if gt == "yes" else not said_yes
    if rule not in (EXACT, FIRST_INTEGER):
        raise ValueError(f"{task} is scored by a judge, not by its answer text")
    return pred.lower() == str(truth).lower()


def judge_says_yes(answer: str) -> bool:
    """A judge's verdict: its lower-cased answer contains ``yes``."""
    return "yes" in str(answer).lower()
