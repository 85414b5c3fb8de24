"""CoBSAT prompts as typed requests, laid out as the reference's ``load_inputs`` and
``get_prompt`` (``load_dataset.py`` of UW-Madison-Lee-Lab/CoBSAT) build them.

Item text is ``"{x}: "`` (``"{x} {theta}: "`` for the exact and misleading variants, with the
reference's raw latent value), each demonstration's text followed by its image; the instruction
pair opens and closes the prompt (empty strings are left out); the caption variant replaces each
image by its caption followed by a space and sends no image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol

import numpy as np

from icl.benchmarks.cobsat.instructions import COT_SECOND, instruction
from icl.benchmarks.cobsat.prompts import Prompt
from icl.benchmarks.cobsat.vocab import TASKS, display
from icl.models.requests import ChatRequest, GenerationRequest, Message, Part


class Images(Protocol):
    size: Optional[tuple[int, int]]

    def image(self, theme: Any, attribute: str, obj: str) -> np.ndarray: ...

    def caption(self, theme: Any, attribute: str, obj: str) -> str: ...


@dataclass(frozen=True)
class Setting:
    mode: str  # "image" or "description"
    variant: str
    family: str


def text_inputs(p: Prompt, variant: str) -> list[str]:
    """The item texts of prompt ``p`` (demonstrations then the query)."""
    task = TASKS[p.task]
    theta = task.latent_values[p.latent]
    out = []
    for j, x in enumerate(p.text_values):
        x = display(x)
        if variant == "misleading":
            out.append(f"{x} {task.latent_values[p.misleading[j]]}: ")
        elif variant == "exact":
            out.append(f"{x} {theta}: ")
        else:
            out.append(f"{x}: ")
    return out


def parts(p: Prompt, s: Setting, images: Images) -> list[Part]:
    """The interleaved prompt (instruction pair included) of ``p`` in setting ``s``."""
    task = TASKS[p.task]
    before, after = instruction(s.variant, s.mode, p.task, s.family)
    texts = text_inputs(p, s.variant)
    theta = task.latent_values[p.latent]
    out: list[Part] = [before] if before else []
    for j, text in enumerate(texts):
        out.append(text)
        if j < p.shots:
            attribute, obj = task.attribute_object(p.text_values[j], theta)
            if s.variant == "caption":
                out.append(images.caption(task.theme, attribute, obj) + " ")
            else:
                out.append(images.image(task.theme, attribute, obj))
    if after:
        out.append(after)
    if s.variant == "caption":  # text only: one string, as the reference's text call joins it
        return ["".join(x for x in out if isinstance(x, str))]
    return out


def build(p: Prompt, s: Setting, images: Images, key: str, seed: int, max_new_tokens: int,
          cot_tokens: int) -> Any:
    """The first request of an item: a GenerationRequest (image mode) or a ChatRequest."""
    prompt = parts(p, s, images)
    if s.mode == "image":
        return GenerationRequest(key, tuple(prompt), size=images.size, seed=seed)
    tokens = cot_tokens if s.variant == "cot" else max_new_tokens
    return ChatRequest.user(key, *prompt, max_new_tokens=tokens, seed=seed)


def cot_answer_request(first: ChatRequest, analysis: str, p: Prompt, max_new_tokens: int) -> ChatRequest:
    """The second pass of the chain of thought: the analysis as the assistant's turn, then the
    reference's question with the query's item text in quotes."""
    before, after = COT_SECOND["text"]
    question = before + after + f"'{text_inputs(p, 'cot')[-1]}'."
    messages = first.messages + (Message("assistant", (analysis,)), Message("user", (question,)))
    return ChatRequest(f"{first.id}/answer", messages, max_new_tokens=max_new_tokens, seed=first.seed)
