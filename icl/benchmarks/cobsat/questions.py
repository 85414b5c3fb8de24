"""The judge's two multiple-choice questions and the answer parse (PROTOCOL §4), as the reference
asks and reads them (``evaluation_icl.py``, ``get_eval_prompt`` and ``eval_model``, of
UW-Madison-Lee-Lab/CoBSAT).

The object question and the attribute question list the theme's ten values, numbered from 1 in
vocabulary order and printed through the word map; the reference cuts a prompt at 2,047
characters. An answer is parsed by joining all its digits into one integer ("1 or 2" -> 12), -1
when it has none; the reference keeps only 1..10 as an option (anything else is -1), and an answer
is right iff it equals the true option's number.
"""

from __future__ import annotations

from typing import Optional

from icl.benchmarks.cobsat.vocab import VOCAB, Theme, display

MAX_PROMPT_CHARS = 2047  # the reference's prompts[mode][:2047]
ASPECTS = ("object", "attribute")


def question(theme: Theme, aspect: str, description: Optional[str] = None) -> str:
    """The ``aspect`` ("object" or "attribute") question about an image (``description`` None) or
    about a generated description, cut as the reference cuts it."""
    if aspect == "attribute":
        space, what = theme.attribute, f"the {theme.attribute} (of the main object) in"
    elif aspect == "object":
        space, what = theme.object, "the main object in"
    else:
        raise ValueError(f"cobsat: unknown question aspect {aspect!r}; aspects: {', '.join(ASPECTS)}")
    if description is None:
        text = f"What is {what} this image? Answer from the following options: "
    elif aspect == "attribute":
        text = f"Image caption: {description}. What is {what} the image based on the description? " \
               "Answer from the following options: "
    else:
        text = f"Image caption: {description}. What is {what} this image based on the description? " \
               "Answer from the following options: "
    for i, value in enumerate(VOCAB[space]):
        text += f" ({i + 1}){display(value)}"
    text += ". Answer the number only and do not include any other texts (e.g., 1)."
    return text[:MAX_PROMPT_CHARS]


def parse_answer(answer: str) -> int:
    """All digits of ``answer`` joined into one integer; -1 when there is none."""
    # isdecimal, not the reference's isdigit: "²" is a digit int() cannot read (the reference crashes)
    digits = "".join(ch for ch in str(answer) if ch.isdecimal())
    return int(digits) if digits else -1


def chosen_option(answer: str, options: int = 10) -> int:
    """The option number the reference reads from ``answer``: :func:`parse_answer` when it is in
    ``1..options``, else -1."""
    n = parse_answer(answer)
    return n if 1 <= n <= options else -1


def true_option(space: str, value: str) -> int:
    """1-based number of ``value`` among the options of ``space``."""
    return VOCAB[space].index(value) + 1
