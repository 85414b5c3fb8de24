"""What a run asks each model: the one computation of the work left, shared by the engine
(:meth:`icl.run.execution.engine.Engine.run`) and ``--check`` (:mod:`icl.run.planning.check`), so what the check
promises is what the run then does.

Per model, in plan order: the items whose request type it serves (the others are listed as not
applicable, per item kind), and of those the ones some judge (or the one "no judge" id ``""``)
has no ``ok`` score of for this model identity, scorer version and protocol: an item scored by
every judge is skipped (a resume), one scored by some judges only is taken again for the others.
Counts are scores (item x judge).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from icl.benchmarks.base import Benchmark, Item

# answers that are results, not failures (a context overflow, a refusal): stored once, never sent
# again for the same request and model, never a reason to stop a model
SETTLED = ("overflow", "refused")


@dataclass
class ModelWork:
    """The work of one model: ``todo`` items in plan order, ``unscored`` (item key -> the judge
    ids still to score it, for items some judge has scored), the scores already stored
    (``skipped``, item x judge), the items it serves (``served``) and, per item kind, the items
    it was not asked (``not_applicable``: it serves another request type)."""

    todo: list[Item] = field(default_factory=list)
    unscored: dict[str, tuple[str, ...]] = field(default_factory=dict)
    skipped: int = 0
    served: int = 0
    not_applicable: dict[str, int] = field(default_factory=dict)
    # per item group value (the ``task`` column, else the benchmark's name): (served, stored) scores
    cells: dict[str, list[int]] = field(default_factory=dict)

    judges: int = 1

    @property
    def remaining(self) -> int:
        """Scores (item x judge) this model's items still need."""
        return sum(len(self.unscored.get(it.key, ())) or self.judges for it in self.todo)


def model_work(bench: Benchmark, items: Sequence[Item], serves: Callable[[type], bool], judge_ids: Sequence[str],
               done: Callable[[str], set[str]]) -> ModelWork:
    """The work of one model (``serves``: whether it serves a request type; ``done(judge_id)``:
    the item keys with an ``ok`` score of this model under that judge)."""
    judge_ids = tuple(judge_ids) or ("",)
    stored = {j: done(j) for j in judge_ids}
    work = ModelWork(judges=len(judge_ids))
    for it in items:
        kind_type = bench.request_type(it)
        if not serves(kind_type):  # asked only for what it serves
            kind = f"{bench.item_kind(it)} ({kind_type.__name__})"
            work.not_applicable[kind] = work.not_applicable.get(kind, 0) + 1
            continue
        work.served += 1
        unscored = tuple(j for j in judge_ids if it.key not in stored[j])
        work.skipped += len(judge_ids) - len(unscored)
        cell = work.cells.setdefault(str(it.group.get("task", bench.name)), [0, 0])
        cell[0] += len(judge_ids)
        cell[1] += len(judge_ids) - len(unscored)
        if unscored:
            work.todo.append(it)
            if len(unscored) < len(judge_ids):
                work.unscored[it.key] = unscored
    return work


def refusal_cell(bench: Benchmark, item: Item) -> str:
    """How a model's refused items are grouped in the run's summary, report and results.json:
    the item's kind and, for a benchmark with a shots column, its shots (``open_t2i_mi 0-shot``)."""
    shots = getattr(getattr(bench, "results_spec", None), "shots", None)
    kind = bench.item_kind(item)
    if shots and shots in item.group:
        return f"{kind} {item.group[shots]}-shot"
    return kind


def refusal(adapter: Any, request: Any) -> Optional[str]:
    """The adapter's one refusal rule (:meth:`icl.models.base.Adapter.would_refuse`) for one
    request, as the engine asks it before sending and ``--check`` asks it for the plan; a rule
    that itself fails refuses nothing (the model's own call then says what is wrong)."""
    try:
        why = adapter.would_refuse(request)
    except Exception:
        return None
    return None if why is None else str(why)
