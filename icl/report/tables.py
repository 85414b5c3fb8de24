"""Tabular outputs: CSV text, JSON-ready data, report.md sections and the terminal summary."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from icl._csv import FORMULA_START as FORMULA_START, csv_cell as csv_cell, csv_text as csv_text, plain as plain
from icl.report.aggregate import Aggregate, RankTable

RESULT_COLUMNS = ("model", "model_version", "dataset", "task", "shots", "metric", "mean", "std", "n", "n_missing",
                  "n_failed", "ci_low", "ci_high")
RANK_COLUMNS = ("shots", "model", "task", "metric", "value", "rank", "rank_low", "rank_high")


def rank_rows(tables: Sequence[RankTable]) -> list[dict]:
    """Long form of the rank tables: metric ranks, task ranks (metric ``*``) and the overall
    rank (task ``*``), each with its bootstrap interval (``rank_low``, ``rank_high``; NaN when
    none was computed); metrics left out of a task's rank appear with an empty rank."""
    rows = []
    nan2 = (math.nan, math.nan)

    def row(t: RankTable, m: str, task: str, metric: str, value: float, rank: float) -> dict:
        lo, hi = t.intervals.get(task, {}).get(metric, {}).get(m, nan2) if not math.isnan(rank) else nan2
        return dict(shots=t.shots, model=m, task=task, metric=metric, value=value, rank=rank, rank_low=lo,
                    rank_high=hi)

    for t in tables:
        for task in t.tasks:
            for metric, per_model in t.values[task].items():
                ranks = t.metric_ranks[task].get(metric)
                for m in t.models:
                    rows.append(row(t, m, task, metric, per_model[m], ranks[m] if ranks else math.nan))
            for m, r in t.task_ranks.get(task, {}).items():
                rows.append(row(t, m, task, "*", math.nan, r))
        for m, r in t.overall.items():
            rows.append(row(t, m, "*", "*", math.nan, r))
    return rows


def jsonable(obj: Any) -> Any:
    """Plain JSON: NaN and infinities become null (the CSVs keep them); numpy scalars and
    arrays become Python numbers and lists."""
    obj = plain(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj) if isinstance(obj, (set, frozenset)) else obj
        return [jsonable(v) for v in items]
    if hasattr(obj, "__dataclass_fields__"):
        return jsonable(asdict(obj))
    return obj


def missing_lines(aggs: Iterable[Aggregate]) -> list[str]:
    """One line per aggregate whose metric is missing (NaN values, or no scored sample)."""
    lines = []
    for a in aggs:
        if a.n_missing:
            lines.append(f"{a.metric} missing for {a.n_missing}/{a.n} samples: model {a.model}, task {a.task}, "
                         f"dataset {a.dataset}, shots {a.shots}")
        elif a.n == 0:
            lines.append(f"{a.metric} missing: no sample scored (all {a.n_failed} failed): model {a.model}, "
                         f"task {a.task}, dataset {a.dataset}, shots {a.shots}")
    return lines


def missing_summary(aggs: Iterable[Aggregate]) -> list[str]:
    """One line per metric with missing values: how many samples, which models and tasks."""
    by_metric: dict[str, list[Aggregate]] = {}
    for a in aggs:
        if a.n_missing or a.n == 0:
            by_metric.setdefault(a.metric, []).append(a)
    lines = []
    for metric, rows in sorted(by_metric.items()):
        n_missing = sum(a.n_missing for a in rows)
        total = sum(a.n for a in rows)
        empty = sum(a.n == 0 for a in rows)
        lines.append(f"{metric}: {n_missing}/{total} scored samples have no value"
                     + (f", {empty} groups have no scored sample" if empty else "")
                     + f"; models {', '.join(sorted({a.model for a in rows}))}; "
                     f"tasks {', '.join(sorted({a.task for a in rows}))}")
    return lines


def _num(v: float, digits: int = 3) -> str:
    if math.isnan(v):
        return "missing"
    return f"{v:.{digits}f}"


def aligned(rows: Sequence[Sequence[Any]], right: Iterable[int] = ()) -> list[str]:
    """The terminal's tables: ``rows`` (the header first) as lines of columns as wide as their
    longest cell, two spaces apart (a long model label never runs into the next column);
    columns ``right`` (indices) right-aligned, the others left. Trailing blanks are stripped."""
    texts = [[str(c) for c in r] for r in rows]
    if not texts:
        return []
    n = max(len(r) for r in texts)
    texts = [r + [""] * (n - len(r)) for r in texts]
    widths = [max(len(r[i]) for r in texts) for i in range(n)]
    ends = set(right)
    return ["  ".join(c.rjust(w) if i in ends else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in texts]


def summary_text(tables: Sequence[RankTable]) -> str:
    """Terminal table: per task the first ranked metric averaged over datasets [task rank]."""
    out = []
    for t in tables:
        out.append(f"shots={t.shots}: first rank metric per task, averaged over datasets [task rank]")
        rows: list[list[str]] = [["task", "metric", *t.models]]
        for task in t.tasks:
            metrics = list(t.values[task])
            metric = next((m for m in metrics if m in t.metric_ranks[task]), metrics[0] if metrics else "")
            rank = t.task_ranks.get(task, {})
            cells = []
            for m in t.models:
                v = t.values[task].get(metric, {}).get(m, math.nan)
                cells.append(f"{_num(v)} [{rank[m]:.2f}]" if m in rank else _num(v))
            rows.append([task, metric, *cells])
        if t.overall:
            rows.append(["overall rank", "", *(f"{t.overall[m]:.2f}" if m in t.overall else "-" for m in t.models)])
        out += aligned(rows, right=range(2, 2 + len(t.models)))
        out.append("")
    return "\n".join(out)


def markdown_section(aggs: Sequence[Aggregate], tables: Sequence[RankTable],
                     extra_warnings: Optional[Sequence[str]] = None) -> str:
    """The visual benchmark's part of report.md: missing metrics, ranks, per-task results
    (mean ± population std)."""
    lines: list[str] = []
    warnings = [*missing_lines(aggs), *(extra_warnings or [])]
    if warnings:
        lines += ["## Missing metrics (not dropped: shown as `missing`)", ""] + [f"- {w}" for w in warnings] + [""]
    for t in tables:
        lines += [f"## Ranks, shots = {t.shots}", "", "| task | " + " | ".join(t.models) + " |",
                  "|---|" + "---|" * len(t.models)]
        for task in t.tasks:
            r = t.task_ranks.get(task, {})
            lines.append(f"| {task} | " + " | ".join(f"{r[m]:.2f}" if m in r else "-" for m in t.models) + " |")
        if t.overall:
            lines.append("| **overall** | " + " | ".join(f"**{t.overall[m]:.2f}**" if m in t.overall else "-"
                                                       for m in t.models) + " |")
        excluded = {task: ms for task, ms in t.excluded.items() if ms}
        if excluded:
            lines += ["", "Left out of ranks (no model has a value): " +
                      "; ".join(f"{task}: {', '.join(ms)}" for task, ms in excluded.items())]
        lines.append("")
    lines += ["## Results (mean ± population std over queries)", ""]
    # tasks and models in the rank tables' order, then any others
    task_order = list(dict.fromkeys([*(t for tb in tables for t in tb.tasks), *sorted({a.task for a in aggs})]))
    model_rank = {m: i for i, m in enumerate(dict.fromkeys(m for tb in tables for m in tb.models))}
    for task in task_order:
        rows = [a for a in aggs if a.task == task]
        metrics = list(dict.fromkeys(a.metric for a in rows))
        lines += [f"### {task}", "", "| model | dataset | shots | n | failed | " + " | ".join(metrics) + " |",
                  "|---|---|---|---|---|" + "---|" * len(metrics)]
        groups = sorted({(a.model, a.dataset, a.shots) for a in rows},
                        key=lambda g: (model_rank.get(g[0], len(model_rank)), g))
        cell = {(a.model, a.dataset, a.shots, a.metric): a for a in rows}
        for g in groups:
            first = next(cell[(*g, m)] for m in metrics if (*g, m) in cell)
            vals = []
            for m in metrics:
                a = cell.get((*g, m))
                vals.append("-" if a is None else ("missing" if math.isnan(a.mean) else f"{a.mean:.4g} ± {a.std:.3g}"))
            lines.append(f"| {g[0]} | {g[1]} | {g[2]} | {first.n} | {first.n_failed} | " + " | ".join(vals) + " |")
        lines.append("")
    return "\n".join(lines)
