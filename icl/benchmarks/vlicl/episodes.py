"""Episodes (PROTOCOL §3.1): the support set of one (seed, task, shots, query), and its prompt.

Every support set is drawn from its own generator, ``rng(seed, task, "*", query_id,
"support/{shots}")`` (``icl.data.seeds``), so an episode is the same whatever the order, subset or
sharding of a run. Support rules:

- per-class tasks (MiniImageNet-like, fast counting, fast attributes): shot k is k examples per
  class, 2k items interleaved A, B, A, B; the second class is drawn from the query's other
  classes, the class order by a coin flip; class c's i-th item is its i-th support image.
- operator induction: k records of the pool; each answer is the one of the query's operator.
- matching: k records of the pool, each giving its same-class pair, then its different pair.
- CoBSAT: k records sharing the query's task, latent variable and latent value.
- CLEVR, TextOCR: k records of the pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from icl.benchmarks.vlicl.records import OPERATORS, RecordError, TaskData, image_list
from icl.benchmarks.vlicl.tasks import I2T, PER_CLASS, get_task
from icl.data.seeds import derive_seed, rng as seeded_rng
from icl.models.requests import ChatRequest, GenerationRequest, Message, Part

MAX_NEW_TOKENS = 15
COT_TOKENS = 256


@dataclass(frozen=True)
class Demo:
    """One support item (or the query): its images (refs), the text standing in for them in
    text-only variants, its question and its answer (image-to-text tasks)."""

    id: str
    images: tuple[str, ...]
    question: str
    answer: Any = None
    texts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Episode:
    task: str
    seed: int
    shots: int
    query_id: str
    support: tuple[Demo, ...]
    query: Demo


def _texts(data: TaskData, rec: dict[str, Any], refs: list[str]) -> tuple[str, ...]:
    if not data.text_only:
        return ()
    cap = rec.get("caption")
    if cap is not None:
        return (cap,) if isinstance(cap, str) else tuple(str(c) for c in cap)
    return tuple(data.source.text(r) for r in refs)


def _sample(pool: list[dict[str, Any]], k: int, rng: np.random.Generator, what: str) -> list[dict[str, Any]]:
    if k > len(pool):
        raise RecordError(f"{what}: {k} support records needed, the pool has {len(pool)}")
    return [pool[i] for i in rng.choice(len(pool), k, replace=False)]


def _demo(data: TaskData, rec: dict[str, Any], rid: str, answer: Any) -> Demo:
    # a text version of the release writes its inputs into the record ('question', or 'caption');
    # image paths it may still carry are not shown
    shown = "image" in rec and not (data.text_only and ("caption" in rec or not data.source.has_text))
    refs = image_list(rec["image"]) if shown else []
    return Demo(rid, tuple(refs), str(rec["question"]), answer, _texts(data, rec, refs))


def _real_name(rec: dict[str, Any], what: str) -> str:
    if "real_name" not in rec:
        raise RecordError(f"{what}: the real-name variant needs a 'real_name' field")
    return str(rec["real_name"])


def _per_class(data: TaskData, q: dict[str, Any], shots: int, rng: np.random.Generator,
               real_names: bool) -> list[Demo]:
    task = data.task
    label = q["answer"] if get_task(task).direction == I2T else q["task_label"]
    others = [c for c in q["classes"] if c != label]
    other = others[int(rng.integers(len(others)))]
    order = [label, other] if rng.random() < 0.5 else [other, label]
    out = []
    for i in range(shots):
        for cls in order:
            entry = q["support"][cls]
            images = entry["images"]
            if i >= len(images):
                raise RecordError(f"{task} query {q['id']}: class {cls!r} has {len(images)} support images; "
                                  f"{shots} shots need {shots} per class")
            caption = entry.get("captions", [cls] * len(images))[i]
            question = {"open_mi": "This is a", "open_t2i_mi": f"Generate a {cls}",
                        "fast_attr_t2i": f"Generate a {caption}", "fast_count_t2i": f"Generate {caption}"}[task]
            answer = _real_name(entry, f"{task} query {q['id']} class {cls!r}") if real_names else cls
            texts: tuple[str, ...] = ()  # text versions: the scene's text, else the record's caption
            if data.text_only and data.source.has_text:
                texts = (data.source.text(images[i]),)
            elif data.text_only and "captions" in entry:
                texts = (str(caption),)
            out.append(Demo(f"{cls}/{i}", (images[i],), question, answer, texts))
    return out


def select_support(data: TaskData, query_id: str, shots: int, seed: int, real_names: bool = False) -> list[Demo]:
    """The support items of one episode, in prompt order (see the module docstring)."""
    task = data.task
    q = data.by_id[query_id]
    if shots == 0:
        return []
    rng = seeded_rng(seed, task, "*", query_id, f"support/{shots}")
    if task in PER_CLASS:
        return _per_class(data, q, shots, rng, real_names)
    what = f"{task} query {query_id}"
    if task.startswith("operator_induction"):
        op = OPERATORS.index(q["operator"])
        return [_demo(data, r, r["id"], r["answer"][op]) for r in _sample(data.support, shots, rng, what)]
    if task == "matching_mi":
        out = []
        for r in _sample(data.support, shots, rng, what):
            out += [_demo(data, r[side], f"{r['id']}/{side}", r[side]["answer"]) for side in ("same", "diff")]
        return out
    if task == "cobsat":
        lat = q["latent"]
        pool = data.pool("task", "latent", lat, like=q)
        what += f" (task {q['task']}, {lat} = {q[lat]})"
        return [_demo(data, r, r["id"], None) for r in _sample(pool, shots, rng, what)]
    return [_demo(data, r, r["id"], r["answer"]) for r in _sample(data.support, shots, rng, what)]


def build_episode(data: TaskData, query_id: str, shots: int, seed: int, real_names: bool = False,
                  repeat: int = 1) -> Episode:
    """The episode of (seed, task, shots, query): support items and the query. ``repeat`` > 1 is
    the source's repeated-support-set variant (appendix B.4): the drawn support sequence shown
    ``repeat`` times in a row (``shots`` counts the unique items)."""
    if query_id not in data.by_id:
        raise KeyError(f"{data.task}: no query {query_id!r}")
    q = data.by_id[query_id]
    answer = _real_name(q, f"{data.task} query {query_id}") if real_names else q["answer"]
    query = _demo(data, q, query_id, answer)
    support = tuple(select_support(data, query_id, shots, seed, real_names))
    return Episode(data.task, seed, shots, query_id, support * max(1, repeat), query)


def inputs(data: TaskData, d: Demo) -> list[Part]:
    """What stands for a demo's images: the images, or their texts in text-only variants."""
    if data.text_only:
        return list(d.texts)
    return [data.source.image(r) for r in d.images]


def chat_request(data: TaskData, ep: Episode, request_id: str, description: str, request_seed: int,
                 cot: Optional[str] = None, rationale: Optional[str] = None, cot_tokens: int = COT_TOKENS) -> ChatRequest:
    """The canonical I2T prompt as chat turns: the first user turn opens with the task description;
    each support item is a user turn (its images, then its question) answered by an assistant turn
    (its answer alone); the last user turn holds the query's images and question (then the
    chain-of-thought prompt, or the rationale of the first pass)."""
    messages: list[Message] = []
    lead: list[Part] = [description] if description else []
    for d in ep.support:
        messages.append(Message("user", tuple(lead + inputs(data, d) + [d.question])))
        messages.append(Message("assistant", (str(d.answer),)))
        lead = []
    last = lead + inputs(data, ep.query) + [ep.query.question]
    if cot is not None:
        last.append(cot)
    if rationale is not None:
        last.append(rationale)
    tokens = cot_tokens if cot is not None else MAX_NEW_TOKENS
    return ChatRequest(request_id, tuple(messages) + (Message("user", tuple(last)),), max_new_tokens=tokens,
                       min_new_tokens=1, seed=request_seed)


def generation_request(data: TaskData, ep: Episode, request_id: str, description: str, request_seed: int,
                       size: Optional[tuple[int, int]]) -> GenerationRequest:
    """The canonical T2I prompt: description, then per support item its question and image
    (its text in text-only variants), then the query's question."""
    parts: list[Part] = [description] if description else []
    for d in ep.support:
        parts.append(d.question)
        parts += inputs(data, d)
    parts.append(ep.query.question)
    return GenerationRequest(request_id, tuple(parts), size=size, seed=request_seed)


def request_seed(seed: int, task: str, query_id: str, shots: int) -> int:
    """The request's own seed (a sampling model seeds its generator from it)."""
    return derive_seed(seed, task, "*", query_id, f"request/{shots}") % (2 ** 63)


def support_rows(ep: Episode, protocol: str) -> list[tuple[str, int, int, str, int, str, str]]:
    """Rows ``(task, seed, shots, query_id, rank, support_id, protocol)`` of the episode list CSV."""
    return [(ep.task, ep.seed, ep.shots, ep.query_id, r, d.id, protocol) for r, d in enumerate(ep.support)]

