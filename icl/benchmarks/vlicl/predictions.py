"""Per-item outputs of a VL-ICL run: ``predictions.jsonl`` (one line per scored item and model)
and ``prompts.jsonl`` (each prompt text once, by its SHA-256). Prompts are rendered from the
episode (image references, no image decoded) in the layout the run sent."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np

from icl.benchmarks.base import Item
from icl.benchmarks.vlicl.episodes import Episode
from icl.benchmarks.vlicl.records import TaskData
from icl.benchmarks.vlicl.reference import FAMILIES, format_answer
from icl.benchmarks.vlicl.scoring import parsed_answer
from icl.benchmarks.vlicl.tasks import COT_PROMPT, I2T, JUDGE_TWICE, TASKS


class VLICLRun(Protocol):
    """What the outputs read of the benchmark (:class:`~icl.benchmarks.vlicl.benchmark.VLICL`,
    which imports this module)."""

    config: dict[str, Any]

    def items(self) -> Iterable[Item]: ...
    def episode(self, item: Item) -> Episode: ...
    def data(self, task: str) -> TaskData: ...
    def prompt_label(self, task: str) -> str: ...
    def cot_mode(self, task: str) -> str: ...
    def prompt_text(self, item: Item) -> str: ...
    def truth(self, item: Item) -> Any: ...
    def concepts(self, item: Item) -> list[str]: ...


class _Ref:
    """An image reference inside a prompt text (``<image:REF>``)."""

    def __init__(self, ref: str) -> None:
        self.ref = ref

    def __str__(self) -> str:
        return f"<image:{self.ref}>"


def _joined(parts: Sequence[Any], sep: str = "") -> str:
    return sep.join(str(p) for p in parts)


def _plain(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool, list)) or v is None else str(v)


def prompt_text(bench: VLICLRun, item: Item) -> str:
    """The item's prompt as text, images written ``<image:REF>`` (read from the episode, no
    image decoded): the reference layout, or the chat turns as ``user:`` / ``assistant:`` lines."""
    task, _, _, _ = item.payload
    ep = bench.episode(item)
    data = bench.data(task)
    desc = TASKS[task].description(bench.config["description"])

    def shown(d: Any) -> list[Any]:
        return list(d.texts) if data.text_only else [_Ref(r) for r in d.images]

    if TASKS[task].direction != I2T:
        parts = ([desc] if desc else []) + [p for d in ep.support for p in [d.question] + shown(d)] + [ep.query.question]
        return _joined(parts)
    if bench.prompt_label(task) != "chat":
        family = FAMILIES[bench.config["reference_family"]]
        return _joined(family(desc, [(shown(d), d.question, format_answer(d.answer)) for d in ep.support],
                              (shown(ep.query), ep.query.question)))
    turns, lead = [], [desc] if desc else []
    for d in ep.support:
        turns += [f"user: {_joined(lead + shown(d) + [d.question], ' ')}", f"assistant: {d.answer}"]
        lead = []
    last = lead + shown(ep.query) + [ep.query.question]
    if bench.cot_mode(task) == "two_pass":
        last.append(COT_PROMPT)
    turns.append(f"user: {_joined(last, ' ')}")
    return "\n".join(turns)

def prediction_files(bench: VLICLRun, rows: Sequence[Mapping[str, Any]],
                     answers: Callable[[str], dict[str, Any]]) -> dict[str, str]:
    """``predictions.jsonl`` (one line per scored item and model: task, shots, seed, query, the
    prompt's SHA-256, the raw answer, the parsed answer in both modes, the truth, correctness,
    judge verdicts) and ``prompts.jsonl`` (each prompt text once, by its SHA-256)."""
    by_key = {it.key: it for it in bench.items()}
    prompts: dict[str, str] = {}
    lines = []
    cache: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (str(r["model"]), str(r["key"]))):
        item = by_key.get(r["key"])
        if item is None:
            continue
        task, seed, shots, qid = item.payload
        try:
            text = bench.prompt_text(item)
        except Exception as exc:  # a record the plan could not build: say so, keep going
            text = f"<prompt unavailable: {type(exc).__name__}: {exc}>"
        sha = hashlib.sha256(text.encode()).hexdigest()
        prompts.setdefault(sha, text)
        if r["key"] not in cache:
            cache[r["key"]] = answers(r["key"])
        answer = cache[r["key"]].get(r["model"])
        rec: dict[str, Any] = {"model": r["model"], "model_id": r["model_id"], "key": r["key"], "task": task,
                               "shots": shots, "seed": seed, "query_id": qid, "status": r["status"],
                               "reason": r.get("reason"), "prompt_sha256": sha}
        if TASKS[task].direction == I2T:
            rec["answer"] = answer if isinstance(answer, str) else None
            if isinstance(answer, str):
                rec["parsed"] = {m: parsed_answer(task, answer, m) for m in ("legacy", "lenient")}
                if task == "textocr":
                    rec["parsed"]["keep_dots"] = parsed_answer(task, answer, "legacy", keep_dots=True)
            rec["truth"] = _plain(bench.truth(item))
            rec["correct"] = {m: bool(r[k]) for m, k in (("legacy", "correct"), ("lenient", "correct_lenient"),
                                                         ("keep_dots", "correct_keep_dots")) if k in r}
        else:
            rec["answer"] = None if answer is None else f"<image {'x'.join(map(str, np.shape(answer)))}>"
            rec["truth"] = bench.concepts(item)
            judged = r["status"] == "ok" and not r.get("failed") and not r.get("overflow")
            verdicts = [r["latent"], r["non_latent"]] if TASKS[task].scoring == JUDGE_TWICE else [r.get("correct", 0)]
            rec["judge_yes"] = [bool(v) for v in verdicts] if judged else None
            rec["correct"] = bool(r.get("correct", 0.0))
        rec["overflow"] = bool(r.get("overflow", 0.0))
        lines.append(json.dumps(rec, sort_keys=True, ensure_ascii=False))
    prompt_lines = [json.dumps({"sha256": k, "text": v}, ensure_ascii=False) for k, v in sorted(prompts.items())]
    return {"predictions.jsonl": "".join(line + "\n" for line in lines),
            "prompts.jsonl": "".join(line + "\n" for line in prompt_lines)}
