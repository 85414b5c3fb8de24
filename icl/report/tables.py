"""Tabular outputs: results.csv, ranks.csv, results.json, report.md and the terminal summary."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from icl.report.aggregate import Aggregate, RankTable

RESULT_COLUMNS = ("model", "model_version", "dataset", "task", "shots", "metric", "mean", "std", "n", "n_missing",
                  "n_failed")
RANK_COLUMNS = ("shots", "model", "task", "metric", "value", "rank")


def _fmt(v: Any) -> Any:
    # repr keeps every float bit, so equal results give byte-identical files
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return v


def write_results_csv(aggs: Sequence[Aggregate], path: Path) -> None:
    """One row per (model, dataset, task, shots, metric)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(RESULT_COLUMNS)
        for a in aggs:
            w.writerow([_fmt(getattr(a, c)) for c in RESULT_COLUMNS])


def rank_rows(tables: Sequence[RankTable]) -> list[dict]:
    """Long form of the rank tables: metric ranks, task ranks (metric ``*``) and the overall
    rank (task ``*``); metrics left out of a task's rank appear with an empty rank."""
    rows = []
    for t in tables:
        for task in t.tasks:
            for metric, per_model in t.values[task].items():
                ranks = t.metric_ranks[task].get(metric)
                for m in t.models:
                    rows.append(dict(shots=t.shots, model=m, task=task, metric=metric, value=per_model[m],
                                     rank=ranks[m] if ranks else math.nan))
            for m, r in t.task_ranks.get(task, {}).items():
                rows.append(dict(shots=t.shots, model=m, task=task, metric="*", value=math.nan, rank=r))
        for m, r in t.overall.items():
            rows.append(dict(shots=t.shots, model=m, task="*", metric="*", value=math.nan, rank=r))
    return rows


def write_ranks_csv(tables: Sequence[RankTable], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(RANK_COLUMNS)
        for row in rank_rows(tables):
            w.writerow([_fmt(row[c]) for c in RANK_COLUMNS])


def jsonable(obj: Any) -> Any:
    """Plain JSON: NaN and infinities become null (the CSVs keep them)."""
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


def write_json(data: Mapping[str, Any], path: Path) -> None:
    path.write_text(json.dumps(jsonable(data), indent=2, sort_keys=True, allow_nan=False) + "\n")


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


def summary_text(tables: Sequence[RankTable]) -> str:
    """Terminal table: per task the first ranked metric averaged over datasets [task rank]."""
    out = []
    for t in tables:
        width = max([12, *(len(m) + 2 for m in t.models)])
        out.append(f"shots={t.shots}: first rank metric per task, averaged over datasets [task rank]")
        out.append(f"{'task':<20}{'metric':<10}" + "".join(f"{m:>{width + 8}}" for m in t.models))
        for task in t.tasks:
            metrics = list(t.values[task])
            metric = next((m for m in metrics if m in t.metric_ranks[task]), metrics[0] if metrics else "")
            rank = t.task_ranks.get(task, {})
            cells = []
            for m in t.models:
                v = t.values[task].get(metric, {}).get(m, math.nan)
                cells.append(f"{_num(v)} [{rank[m]:.2f}]" if m in rank else _num(v))
            out.append(f"{task:<20}{metric:<10}" + "".join(f"{c:>{width + 8}}" for c in cells))
        if t.overall:
            out.append(f"{'overall rank':<30}" + "".join(f"{t.overall[m]:>{width + 8}.2f}" for m in t.models))
        out.append("")
    return "\n".join(out)


def markdown_report(meta: Mapping[str, Any], aggs: Sequence[Aggregate], tables: Sequence[RankTable],
                    failures: Sequence[str], compute: Sequence[Mapping[str, Any]], plots: Sequence[str],
                    extra_warnings: Optional[Sequence[str]] = None) -> str:
    """report.md: settings, ranks, per-task results (mean ± std), missing metrics, failures,
    compute and the plots."""
    lines = [f"# {meta.get('benchmark', 'vibe')} report: {meta.get('name', '')}", ""]
    for k in ("protocol", "git_revision", "created", "seed", "shots", "context_csv_sha256", "device"):
        if k in meta:
            lines.append(f"- **{k}**: `{meta[k]}`")
    lines.append("")
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
            lines.append("| **overall** | " + " | ".join(f"**{t.overall[m]:.2f}**" for m in t.models) + " |")
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
    if failures:
        lines += [f"## Failures ({len(failures)})", ""] + [f"- {f}" for f in failures[:200]]
        if len(failures) > 200:
            lines.append(f"- ... and {len(failures) - 200} more (see the store's failures table)")
        lines.append("")
    if compute:
        lines += ["## Compute", "", "| model | stage | device | samples | wall s | samples/s | peak memory MiB |",
                  "|---|---|---|---|---|---|---|"]
        for c in compute:
            mem = c.get("peak_memory_bytes")
            mem_s = "-" if mem is None else f"{mem / 2**20:.1f} ({c.get('memory_kind')})"
            lines.append(f"| {c['model']} | {c['stage']} | {c['device']} | {c['samples']} | {c['wall_s']:.3f} | "
                         f"{c['samples_per_s']:.1f} | {mem_s} |")
        lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots] + [""]
    return "\n".join(lines)
