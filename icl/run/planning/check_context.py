"""``--check``'s context table: per (task, shots) and model, the longest prompt of the plan
tokenised as the run tokenises it and compared with the model's context, so the overflow a run
will meet is known before it starts (docs/runs.md "Before a long run").

Which prompts: the chat requests (:class:`~icl.models.requests.ChatRequest`, whichever
benchmark plans them) of every planned item a model serves, stored
ones included (a stored overflow is still reported), each item's first request only (a
chain-of-thought second pass carries the first answer, unknown before the run; judge prompts
likewise). Which models: those whose adapter counts a prompt without its weights
(:meth:`icl.models.base.Adapter.prompt_length`: ``hf-vlm`` renders the request through its chat
template and processor, the same code and count as its run-time guard); the others are listed
as not checked.

"The longest" of a (task, shots) cell, a cheap rule: the items are ranked by
:meth:`icl.benchmarks.base.Benchmark.prompt_size` (most images, then most text characters; a
benchmark may read them off its episodes without reading an image; one without it has the first
:data:`MEASURED` requests of the cell, in plan order, built and counted, as building reads their
images), and the first :data:`CANDIDATES` (every item of a smaller cell) are built and tokenised;
the one with most tokens plus ``max_new_tokens`` is reported. It is exact when a
prompt's tokens grow with its images and its text, as with a fixed number of tokens per image
(LLaVA-1.5, Idefics3 without splitting, Gemma 3); a processor whose image tokens follow the
image's size (Qwen2-VL's dynamic resolution, LLaVA-NeXT's tiles) may make a lower-ranked prompt
longer, which this rule can miss.

An overflow is not a problem (exit 0): PROTOCOL §3.1 makes a prompt over the context a result,
recorded as overflow for its (task, shots) and shown in the report (the item counts wrong,
``overflow_shots``). The check reports it as a warning naming the cells, so a run whose overflow
was not intended can be changed (fewer shots, ``--efficiency fitting``, a longer context) before
it spends the time. A model without a known context (its run guards nothing) is a warning too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

CANDIDATES = 4  # prompts tokenised per (task, shots) cell and model: the largest by prompt_size
MEASURED = 64  # without Benchmark.prompt_size, the requests built per cell to rank (building reads images)
RULE = (f"per (task, shots) and model the prompts ranked by images, then text characters (without "
        f"Benchmark.prompt_size: the first {MEASURED} built and counted); the {CANDIDATES} largest tokenised by the "
        f"model's processor; the longest (tokens + max_new_tokens) shown")
NOT_COUNTED = "its adapter cannot count a prompt's tokens without its weights"


@dataclass
class ContextCell:
    """The longest prompt of one (task, shots) cell for one model, against its context."""

    task: str
    shots: Any
    model: str
    items: int  # the cell's items this model is asked
    ranked: int  # of them, those ranked by size (all, unless built to be measured: at most MEASURED)
    tokenised: int  # the prompts built and tokenised
    request: Optional[str] = None  # the item key of the longest
    prompt_tokens: Optional[int] = None
    max_new_tokens: Optional[int] = None
    context: Optional[int] = None
    status: str = "fits"  # fits | overflow | unknown context | not counted
    errors: list[str] = field(default_factory=list)


def _chat() -> type:
    from icl.models.requests import ChatRequest

    return ChatRequest


def _counts_prompts(adapter: Any) -> bool:
    from icl.models.base import Adapter

    return type(adapter).prompt_length is not Adapter.prompt_length


def _measured(request: Any) -> tuple[int, int]:
    """``(images, text characters)`` of a built chat request."""
    parts = [p for m in request.messages for p in m.content]
    return sum(not isinstance(p, str) for p in parts), sum(len(p) for p in parts if isinstance(p, str))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _cell(bench: Any, model: Any, task: str, shots: Any, items: Sequence[Any]) -> ContextCell:
    """Rank ``items`` (one cell, plan order) by size, tokenise the largest, keep the longest."""
    out = ContextCell(task, shots, model.label, items=len(items), ranked=0, tokenised=0)
    built: dict[str, Any] = {}
    sizes = []
    for i, it in enumerate(items):
        try:
            size = bench.prompt_size(it)
            if size is None:
                if len(built) == MEASURED:
                    continue
                built[it.key] = bench.request(it, model.privileged)
                size = _measured(built[it.key])
        except Exception as exc:  # the run records this item as a data failure (reported by the data check)
            out.errors.append(f"item {it.key}: {_one_line(exc)}")
            continue
        sizes.append((tuple(-s for s in size), i, it))
    out.ranked = len(sizes)
    best = None
    for _, _, it in sorted(sizes)[:CANDIDATES]:
        try:
            request = built.get(it.key) or bench.request(it, model.privileged)
            length = model.adapter.prompt_length(request)
        except Exception as exc:  # the run records it as this item's error
            out.errors.append(f"item {it.key}: {_one_line(exc)}")
            continue
        if length is None:
            continue
        out.tokenised += 1
        total = length.tokens + request.max_new_tokens
        if best is None or total > best[0]:
            best = (total, it.key, length, request.max_new_tokens)
    if best is None:
        out.status = "not counted"
        return out
    _, out.request, length, out.max_new_tokens = best
    out.prompt_tokens, out.context = length.tokens, length.context
    if length.context is None:
        out.status = "unknown context"
    elif length.overflows(out.max_new_tokens):
        out.status = "overflow"
    return out


def context_check(bench: Any, items: Sequence[Any], models: Sequence[Any], warnings: list[str]) -> dict[str, Any]:
    """The context table of ``models`` over ``items`` (see the module docstring): what check.json
    holds under ``context``; its findings are appended to ``warnings``."""
    chat = _chat()
    shots_column = getattr(getattr(bench, "results_spec", None), "shots", None)
    chat_items = [it for it in items if issubclass(bench.request_type(it), chat)]
    cells: list[ContextCell] = []
    not_checked: list[dict[str, str]] = []
    for m in models:
        served = [it for it in chat_items if m.serves(bench.request_type(it))]
        if not served:
            continue
        if not _counts_prompts(m.adapter):
            not_checked.append(dict(model=m.label, reason=NOT_COUNTED))
            continue
        try:
            m.adapter.check_loadable()  # its configuration and processor (a failure is a listed problem)
        except Exception as exc:
            not_checked.append(dict(model=m.label, reason=f"its files could not be read ({_one_line(exc)})"))
            continue
        groups: dict[tuple[str, Any], list[Any]] = {}
        for it in served:
            shots = it.group.get(shots_column) if shots_column else None
            groups.setdefault((bench.item_kind(it), shots), []).append(it)
        mine = [_cell(bench, m, task, shots, group) for (task, shots), group in groups.items()]
        cells += mine
        over = [c for c in mine if c.status == "overflow"]
        if over:
            named = ", ".join(f"{c.task} {c.shots} shots" for c in over)
            warnings.append(f"model {m.label}: {len(over)} of {len(mine)} (task, shots) cells will overflow its "
                            f"context ({named}): the run records such prompts as overflow, a result, never truncated "
                            f"(docs/protocol.md, Overflow); fewer shots or a longer context avoid it")
        if any(c.status == "unknown context" for c in mine):
            warnings.append(f"model {m.label}: no context length in its configuration: overflow is not guarded "
                            f"(--model-arg max_context=N)")
        for c in mine:
            if c.errors:
                warnings.append(f"model {m.label}, {c.task} {c.shots} shots: {len(c.errors)} prompt(s) could not be "
                                f"counted (first: {c.errors[0]})")
    return dict(rule=RULE, candidates=CANDIDATES, cells=[asdict(c) for c in cells], not_checked=not_checked,
                overflow=sum(c.status == "overflow" for c in cells))


def context_lines(context: Optional[dict[str, Any]]) -> list[str]:
    """The printed table of a :func:`context_check` (none when no model was asked a chat prompt)."""
    from icl.run.planning.check_parts import text_table

    if not context:
        return []
    lines = []
    if context["cells"]:
        lines.append(f"longest prompt of each (task, shots) against the context (of each cell the "
                     f"{context['candidates']} largest by images, then text, tokenised):")
        rows: list[tuple[str, ...]] = [("task", "shots", "model", "prompt tokens", "max_new_tokens", "context",
                                        "outcome")]
        for c in context["cells"]:
            rows.append((c["task"], "" if c["shots"] is None else str(c["shots"]), c["model"],
                         "-" if c["prompt_tokens"] is None else f"{c['prompt_tokens']:,}",
                         "-" if c["max_new_tokens"] is None else str(c["max_new_tokens"]),
                         "-" if c["context"] is None else f"{c['context']:,}", c["status"]))
        lines += text_table(rows, right=(1, 3, 4, 5))
    for n in context["not_checked"]:
        lines.append(f"prompt length not checked for {n['model']}: {n['reason']}")
    return lines
