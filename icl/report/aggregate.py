"""Per-(model, dataset, task) statistics and rank aggregation (PROTOCOL §1.4).

Statistics are mean and population std (ddof=0) over the samples that were scored. PSNR is
capped at ``PSNR_CAP`` dB before averaging (identical images score +inf). A NaN metric value
(e.g. LPIPS without weights) is *missing*: the aggregate becomes NaN and the number of missing
samples is counted, never silently dropped.

Ranks: per task, each metric is averaged over the task's datasets (each dataset weighs the
same; a model missing any dataset has no value); models are ranked per metric (1 = best,
ties share the average rank, models without a value rank after all others, sharing their
average rank); a metric with no value for any model is left out of that task's rank. The
task rank is the mean of the metric ranks; the overall rank is the mean of the task ranks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from icl.report import stats

PSNR_CAP = 100.0


@dataclass(frozen=True)
class TaskSpec:
    """What the report needs to know of a task (copied from ``icl.benchmarks.vibe.tasks.base.Task``)."""

    name: str
    metrics: tuple[str, ...]
    rank_metrics: tuple[str, ...]
    lower_is_better: frozenset[str]


@dataclass(frozen=True)
class Aggregate:
    """Mean and population std of one metric over one (model, dataset, task, shots) group."""

    model: str
    model_version: str
    dataset: str
    task: str
    shots: int
    metric: str
    mean: float
    std: float
    n: int
    n_missing: int
    n_failed: int
    ci_low: float = math.nan  # 95% percentile bootstrap interval of the mean (icl.report.stats)
    ci_high: float = math.nan


@dataclass
class RankTable:
    """Ranks of the models at one shot count; dicts are keyed task -> metric -> model."""

    shots: int
    models: list[str]
    tasks: list[str]
    values: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    metric_ranks: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    excluded: dict[str, list[str]] = field(default_factory=dict)
    task_ranks: dict[str, dict[str, float]] = field(default_factory=dict)
    overall: dict[str, float] = field(default_factory=dict)
    # 95% bootstrap rank intervals (attach_rank_intervals), (low, high) keyed like the ranks;
    # task ranks under metric "*", the overall rank under task "*"
    intervals: dict[str, dict[str, dict[str, tuple[float, float]]]] = field(default_factory=dict)


def cap(metric: str, value: float) -> float:
    """The value that enters aggregates: PSNR capped at ``PSNR_CAP``."""
    return min(value, PSNR_CAP) if metric.lower() == "psnr" else value


@dataclass(frozen=True)
class Scored:
    """One scored sample as the report reads it (``query`` orders samples within a group)."""

    model: str
    model_version: str
    dataset: str
    task: str
    shots: int
    query: str
    status: str
    metrics: Mapping[str, float] = field(default_factory=dict, compare=False)


def aggregate(rows: Iterable[Scored], specs: Mapping[str, TaskSpec], benchmark: str = "vibe",
              resamples: int = stats.RESAMPLES) -> list[Aggregate]:
    """Group rows by (model, version, dataset, task, shots) and summarise every metric of the
    task's spec (plus any extra metric a row carries), sorted. ``ci_low``/``ci_high``: the 95%
    bootstrap interval of the mean (seeded by ``benchmark`` and task/dataset/shots/metric,
    as in ``results.csv``)."""
    groups: dict[tuple[str, str, str, str, int], list[Scored]] = defaultdict(list)
    for r in rows:
        groups[(r.model, r.model_version, r.dataset, r.task, r.shots)].append(r)
    out = []
    for gkey in sorted(groups):
        members = sorted(groups[gkey], key=lambda r: r.query)
        ok = [r for r in members if r.status == "ok"]
        n_failed = len(members) - len(ok)
        spec = specs.get(gkey[3])
        names = list(spec.metrics) if spec else []
        names += sorted({m for r in ok for m in r.metrics} - set(names))
        for metric in names:
            vals = np.array([cap(metric, float(r.metrics.get(metric, math.nan))) for r in ok], dtype=np.float64)
            n_missing = int(np.isnan(vals).sum())
            # the mean summed in the canonical order of icl.report.stats: results.csv's value bit for bit
            ci = stats.mean_ci(vals, identity=stats.group_identity(gkey[3], gkey[2], gkey[4], metric),
                               benchmark=benchmark, resamples=resamples)
            std = math.nan if len(vals) == 0 or n_missing else float(vals.std(ddof=0))
            out.append(Aggregate(*gkey, metric, ci.value, std, len(ok), n_missing, n_failed, ci.ci_low, ci.ci_high))
    return out


def rank_values(values: Sequence[float], lower_is_better: bool) -> list[float]:
    """Ranks 1..n (1 = best), ties sharing the average rank; NaN ranks after every value."""
    n = len(values)
    order_key = [(1, 0.0) if math.isnan(v) else (0, v if lower_is_better else -v) for v in values]
    idx = sorted(range(n), key=lambda i: order_key[i])
    ranks = [0.0] * n
    start = 0
    while start < n:
        stop = start
        while stop + 1 < n and order_key[idx[stop + 1]] == order_key[idx[start]]:
            stop += 1
        shared = (start + stop) / 2 + 1
        for j in range(start, stop + 1):
            ranks[idx[j]] = shared
        start = stop + 1
    return ranks


def rank_models(aggs: Iterable[Aggregate], specs: Mapping[str, TaskSpec],
                model_order: Sequence[str] = ()) -> list[RankTable]:
    """One ``RankTable`` per shot count present in ``aggs``; models listed in ``model_order``
    first (in that order), the others after them, sorted."""
    by_shots: dict[int, list[Aggregate]] = defaultdict(list)
    for a in aggs:
        by_shots[a.shots].append(a)
    return [_rank_one(shots, by_shots[shots], specs, model_order) for shots in sorted(by_shots)]


def _rank_one(shots: int, aggs: list[Aggregate], specs: Mapping[str, TaskSpec], order: Sequence[str]) -> RankTable:
    present = {a.model for a in aggs}
    models = [m for m in order if m in present] + sorted(present - set(order))
    present_tasks = {a.task for a in aggs}
    tasks = [t for t in specs if t in present_tasks]  # the order of ``specs``
    cell = {(a.model, a.task, a.dataset, a.metric): a.mean for a in aggs}
    table = RankTable(shots, models, tasks)
    for task in tasks:
        spec = specs[task]
        datasets = sorted({a.dataset for a in aggs if a.task == task})
        table.values[task], table.metric_ranks[task], table.excluded[task] = {}, {}, []
        for metric in spec.rank_metrics:
            per_model = {}
            for m in models:
                vals = [cell.get((m, task, d, metric), math.nan) for d in datasets]
                per_model[m] = math.nan if any(math.isnan(v) for v in vals) else float(np.mean(vals))
            table.values[task][metric] = per_model
            if all(math.isnan(v) for v in per_model.values()):
                table.excluded[task].append(metric)
                continue
            ranks = rank_values([per_model[m] for m in models], metric in spec.lower_is_better)
            table.metric_ranks[task][metric] = dict(zip(models, ranks))
        ranked = table.metric_ranks[task]
        if ranked:
            table.task_ranks[task] = {m: float(np.mean([r[m] for r in ranked.values()])) for m in models}
    if table.task_ranks:
        table.overall = {m: float(np.mean([r[m] for r in table.task_ranks.values()])) for m in models}
    return table


def attach_rank_intervals(tables: Sequence[RankTable], rows: Iterable[Scored], specs: Mapping[str, TaskSpec],
                          benchmark: str = "vibe", resamples: int = stats.RESAMPLES) -> None:
    """Fill each table's ``intervals``: resample the queries of every (dataset, task) (one draw
    for all models and metrics of it, seeded by task/dataset/shots/"ranks"), recompute the
    dataset means, rank by the rules above in every resample, and take the 2.5/97.5 percentiles
    of each model's metric, task and overall rank."""
    cells: dict[tuple, list[Scored]] = defaultdict(list)
    for r in rows:
        if r.status == "ok":
            cells[(r.shots, r.task, r.dataset)].append(r)
    for t in tables:
        per_task: dict[str, np.ndarray] = {}
        for task in t.tasks:
            ranked = list(t.metric_ranks.get(task, {}))
            if not ranked:
                continue
            spec = specs[task]
            datasets = sorted({d for (k, tk, d) in cells if k == t.shots and tk == task})
            by_metric: dict[str, list[np.ndarray]] = {metric: [] for metric in ranked}
            for d in datasets:
                columns = []
                for metric in ranked:
                    for m in t.models:
                        mine = [r for r in cells[(t.shots, task, d)] if r.model == m]
                        vals = [cap(metric, float(r.metrics.get(metric, math.nan))) for r in mine]
                        ids, num, den = stats.cluster_totals(vals, [r.query for r in mine])
                        columns.append((ids, num, den))
                _, draws, _ = stats.joint_draws(columns, identity=stats.group_identity(task, d, t.shots, "ranks"),
                                                benchmark=benchmark, resamples=resamples)
                for i, metric in enumerate(ranked):
                    by_metric[metric].append(draws[:, i * len(t.models):(i + 1) * len(t.models)])
            metric_ranks = []
            t.intervals[task] = {}
            for metric in ranked:
                means = np.mean(by_metric[metric], axis=0) if by_metric[metric] else \
                    np.full((resamples, len(t.models)), np.nan)
                ranks = stats.rank_matrix(means, metric in spec.lower_is_better)
                metric_ranks.append(ranks)
                t.intervals[task][metric] = _interval_dict(t.models, ranks)
            per_task[task] = np.mean(metric_ranks, axis=0)
            t.intervals[task]["*"] = _interval_dict(t.models, per_task[task])
        if per_task:
            t.intervals["*"] = {"*": _interval_dict(t.models, np.mean(list(per_task.values()), axis=0))}


def _interval_dict(models: Sequence[str], ranks: np.ndarray) -> dict[str, tuple[float, float]]:
    lo, hi = stats.rank_interval(ranks)
    return {m: (stats.as_float(a), stats.as_float(b)) for m, a, b in zip(models, lo, hi)}
