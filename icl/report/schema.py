"""One long results table for every benchmark (``results.csv``) and its model comparisons.

Built from the runner's score rows (one per item and model: ``model``, ``key``, ``status``, the
item's group columns, one column per metric) and the benchmark's :class:`ResultsSpec`: which
group columns are the task, the subset and the shots, which metrics are reported (direction,
unit, scale, pooled ratios), and which column names a query when a query has several rows in
a group (seeds). Columns (:data:`COLUMNS`):

``benchmark, protocol, task, subset, shots, model, metric, value, ci_low, ci_high, n,
n_failed, direction, unit, data, published_value, published_std, published_source``

- ``value``: the mean over the group's items (``scale`` times; a ratio metric: the pooled
  ``sum(numerator) / sum(denominator)``), ``ci_low``/``ci_high`` its 95% percentile bootstrap
  interval (:mod:`icl.report.stats`: 10,000 resamples of items, of queries when clustered;
  seeded by ``derive_seed(0, benchmark, "*", "task/subset/shots/metric", "bootstrap")``: the
  model's label is a display name and stays out, so every model of a group shares the draw).
- ``n``: items in the mean (items a benchmark scores on failure included), ``n_failed``: items
  of the group whose model call failed. ``data``: the data origin of the group
  (``Benchmark.data_origin()``: built-in, or the release with its digest).
- ``published_value``, ``published_std``, ``published_source``: what the source paper printed
  for the cell ("VL-ICL Table 18"), on the rows of a model matched to a paper row; empty
  elsewhere and on synthetic data (filled by :mod:`icl.report.reproduction`).

The grouping of score rows behind each results row (:func:`grouped`, :func:`group_key`) is the
one every other reader uses: reproduction.csv's two-sample test splits a row's value by seed
with :func:`values_by`, never regrouping the score rows by keys of its own.

Comparisons (``comparisons.csv``, ``results.json``): for every pair of models and every row
group both have, the paired bootstrap difference ``a - b`` on their shared units, its interval,
the two-sided p-value and the Holm-adjusted p-value; the Holm family is the model pairs of one
row group (benchmark, task, subset, shots, metric). When every model of a row group has the
same units, all its pairs come from one shared draw (one resample per group, not per pair).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from icl.report import stats

SCHEMA_VERSION = 2  # 2: published_value, published_std, published_source
COLUMNS = ("benchmark", "protocol", "task", "subset", "shots", "model", "metric", "value", "ci_low", "ci_high", "n",
           "n_failed", "direction", "unit", "data", "published_value", "published_std", "published_source")
COMPARISON_COLUMNS = ("benchmark", "protocol", "task", "subset", "shots", "metric", "model_a", "model_b", "difference",
                      "ci_low", "ci_high", "p_value", "p_holm", "n", "direction", "unit")
ALL = "all"  # task or subset of a benchmark that has no such column
#: how the numbers of results.csv and comparisons.csv were made (results.json ``statistics``)
METHOD = {
    "intervals": f"95% percentile bootstrap, {stats.RESAMPLES} resamples of the group's items (of its queries when "
                 "a query has several rows: clustered), seeded by derive_seed(0, benchmark, '*', "
                 "'task/subset/shots/metric', 'bootstrap')",
    "comparisons": "paired bootstrap of a - b on the units both models have; two-sided p-value "
                   "min(1, 2 min(#{d*<=0}+1, #{d*>=0}+1) / (resamples+1)); p_holm: Holm's step-down adjustment "
                   "over the model pairs of one row group (benchmark, task, subset, shots, metric)",
}
RESERVED = frozenset({"model", "model_id", "key", "status", "reason"})


@dataclass(frozen=True)
class Metric:
    """A reported metric: the mean of row column ``column`` (default ``name``) times ``scale``,
    or with ``denominator`` the pooled ratio ``scale * sum(column) / sum(denominator)``.
    ``skip_nan``: NaN values are left out (a criterion a judge did not give) instead of making
    the mean NaN (a metric that could not be computed)."""

    name: str
    direction: str = "higher"
    unit: str = ""
    scale: float = 1.0
    column: Optional[str] = None
    denominator: Optional[str] = None
    skip_nan: bool = False

    def __post_init__(self) -> None:
        if self.direction not in ("higher", "lower"):
            raise ValueError(f"metric {self.name!r}: direction must be 'higher' or 'lower', got {self.direction!r}")


@dataclass(frozen=True)
class ResultsSpec:
    """How a benchmark's score rows map onto the long table. ``task``/``shots``: the group
    column (None: the benchmark has none; task then reads ``all``, shots empty); ``subset``:
    group columns joined with ``/`` (dataset, setting); ``cluster``: the column naming the query
    when a query has several rows in one group (None: every item is its own unit); ``metrics``:
    the reported metrics (None: every numeric non-group column, higher is better, no unit);
    ``data``: the column whose value names the data origin (None: every origin of the run);
    ``pooled_task``: label of an extra group pooling every task (None: none)."""

    task: Optional[str] = "task"
    subset: tuple[str, ...] = ()
    shots: Optional[str] = "shots"
    cluster: Optional[str] = None
    metrics: Optional[tuple[Metric, ...]] = None
    data: Optional[str] = None
    pooled_task: Optional[str] = None
    ignore: tuple[str, ...] = ()  # numeric row columns that are not metrics (flags, counts)

    def group_columns(self) -> set[str]:
        return {c for c in (self.task, self.shots, self.cluster, self.data, *self.subset) if c}


def _number(v: Any) -> float:
    if v is None or v == "":
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def infer_metrics(rows: Iterable[Mapping[str, Any]], spec: ResultsSpec) -> tuple[Metric, ...]:
    """Every numeric column of the rows that is no group column: higher is better, no unit."""
    skip = RESERVED | spec.group_columns() | set(spec.ignore)
    names: dict[str, None] = {}
    for r in rows:
        for k, v in r.items():
            if k not in skip and isinstance(v, (int, float)) and not isinstance(v, bool):
                names.setdefault(k, None)
    return tuple(Metric(n) for n in names)


@dataclass
class _Group:
    task: str
    subset: str
    shots: Any
    model: str
    data: str
    rows: list

    def key(self) -> tuple[str, str, str, str]:
        return group_key(self.task, self.subset, self.shots, self.model)


def group_key(task: Any, subset: Any, shots: Any, model: Any) -> tuple[str, str, str, str]:
    """The identity of a results.csv row's group of score rows: (task, subset, shots, model) as
    text, so a row read back from results.csv finds the group it was computed from."""
    return str(task), str(subset), str(shots), str(model)


def _groups(rows: Sequence[Mapping[str, Any]], spec: ResultsSpec, origins: Mapping[str, str]) -> list[_Group]:
    """The score rows of every results.csv row: one group per (task, subset, shots, model); a
    row also joins the pooled task's group (``spec.pooled_task``)."""
    every_origin = "; ".join(f"{k}: {v}" for k, v in sorted(origins.items()))
    out: dict[tuple, _Group] = {}

    def add(task: str, r: Mapping[str, Any]) -> None:
        subset = "/".join(str(r.get(c, "")) for c in spec.subset) if spec.subset else ALL
        shots = r.get(spec.shots, "") if spec.shots else ""
        data = origins.get(str(r.get(spec.data)), every_origin) if spec.data else every_origin
        key = group_key(task, subset, shots, r["model"])
        g = out.get(key)
        if g is None:
            g = out[key] = _Group(task, subset, shots, str(r["model"]), data, [])
        g.rows.append(r)

    for r in rows:
        task = r.get(spec.task) if spec.task else None
        add(ALL if task is None else str(task), r)
        if spec.pooled_task:
            add(spec.pooled_task, r)
    # models by label: the table and the pairs' direction (a before b) never depend on run order
    return sorted(out.values(), key=lambda g: (g.task, g.subset, _shot_key(g.shots), g.model))


def _shot_key(v: Any) -> tuple:
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def _units(g: _Group, m: Metric, spec: ResultsSpec, paired: bool = False
           ) -> Optional[tuple[list[str], np.ndarray, np.ndarray]]:
    """(unit ids, num, den) of metric ``m`` in group ``g``; None when no row carries it. Units
    are the queries (``spec.cluster``) or the items: by their keys when ``paired`` (to match two
    models' units), else ordered by value (the order of :func:`icl.report.aggregate.aggregate`)."""
    col = m.column or m.name
    vals, dens, clusters = [], [], []
    for r in g.rows:
        if col not in r:
            continue
        v = _number(r[col])
        d = _number(r.get(m.denominator)) if m.denominator else 1.0
        if m.skip_nan and (math.isnan(v) or math.isnan(d)):
            continue
        vals.append(v)
        dens.append(d)
        clusters.append(str(r[spec.cluster]) if spec.cluster else str(r["key"]))
    if not vals:
        return None
    return stats.cluster_totals(vals, clusters if (spec.cluster or paired) else None, dens)


def results_rows(benchmark: str, protocol: str, rows: Sequence[Mapping[str, Any]], spec: ResultsSpec,
                 origins: Mapping[str, str], resamples: int = stats.RESAMPLES) -> list[dict[str, Any]]:
    """The long table (:data:`COLUMNS`) of ``rows`` (see the module docstring)."""
    metrics = metrics_of(rows, spec)
    out = []
    for g in _groups(rows, spec, origins):
        failed = sum(1 for r in g.rows if r.get("status", "ok") != "ok")
        for m in metrics:
            units = _units(g, m, spec)
            if units is None:
                continue
            ids, num, den = units
            identity = stats.group_identity(g.task, g.subset, g.shots, m.name)  # not the label: a display name
            est = stats.ratio_ci(num, den, identity=identity, benchmark=benchmark, resamples=resamples, scale=m.scale)
            n = int(round(den.sum())) if m.denominator is None else len(ids)
            out.append(dict(benchmark=benchmark, protocol=protocol, task=g.task, subset=g.subset, shots=g.shots,
                            model=g.model, metric=m.name, value=est.value, ci_low=est.ci_low, ci_high=est.ci_high,
                            n=n, n_failed=failed, direction=m.direction, unit=m.unit, data=g.data,
                            published_value="", published_std="", published_source=""))
    return out


def metrics_of(rows: Iterable[Mapping[str, Any]], spec: ResultsSpec) -> tuple[Metric, ...]:
    """The metrics results.csv reports: the spec's, else those :func:`infer_metrics` finds."""
    return spec.metrics if spec.metrics is not None else infer_metrics(rows, spec)


def grouped(rows: Sequence[Mapping[str, Any]], spec: ResultsSpec) -> dict[tuple[str, str, str, str], list]:
    """The score rows behind every results.csv row, by :func:`group_key` of the row's task,
    subset, shots and model: the grouping :func:`results_rows` computes its values over."""
    return {g.key(): g.rows for g in _groups(rows, spec, {})}


def values_by(group: Sequence[Mapping[str, Any]], spec: ResultsSpec, metric: Metric, column: str) -> dict[str, float]:
    """A results.csv value computed apart for each value of score-row column ``column`` (a seed,
    a prompt list): ``group`` is the row's score rows (:func:`grouped`), each part reduced as
    :func:`results_rows` reduces the whole (units, pooling, scale, NaN rule). Rows without
    ``column`` are left out."""
    parts: dict[str, list] = defaultdict(list)
    for r in group:
        if column in r:
            parts[str(r[column])].append(r)
    out = {}
    for value, part in sorted(parts.items()):
        units = _units(_Group("", "", "", "", "", part), metric, spec)
        if units is not None:
            out[value] = stats.ratio_value(units[1], units[2], metric.scale)
    return out


def comparison_rows(benchmark: str, protocol: str, rows: Sequence[Mapping[str, Any]], spec: ResultsSpec,
                    resamples: int = stats.RESAMPLES) -> list[dict[str, Any]]:
    """Paired differences of every model pair in every row group (:data:`COMPARISON_COLUMNS`),
    Holm-adjusted over the pairs of each row group."""
    metrics = metrics_of(rows, spec)
    by_cell: dict[tuple, dict[str, _Group]] = defaultdict(dict)
    for g in _groups(rows, spec, {}):
        by_cell[(g.task, g.subset, str(g.shots))][g.model] = g
    out = []
    for (task, subset, _), by_model in by_cell.items():
        models = list(by_model)
        for m in metrics:
            # the models with units of this metric, in row order
            units = {x: u for x in models if (u := _units(by_model[x], m, spec, True)) is not None}
            present = list(units)
            identity = stats.group_identity(task, subset, by_model[present[0]].shots if present else "", m.name,
                                            "paired")
            same = len({frozenset(units[x][0]) for x in present}) == 1
            if same and len(present) > 2:  # every model on the same units: one draw for all pairs
                done = stats.pairwise_differences([units[x] for x in present], identity=identity,
                                                  benchmark=benchmark, resamples=resamples, scale=m.scale)
                pairs = {(present[i], present[j]): c for (i, j), c in done.items()}
            else:
                pairs = {(a, b): stats.paired_difference(units[a], units[b], identity=identity, benchmark=benchmark,
                                                         resamples=resamples, scale=m.scale)
                         for i, a in enumerate(present) for b in present[i + 1:]}
            family = [dict(benchmark=benchmark, protocol=protocol, task=task, subset=subset, shots=by_model[a].shots,
                           metric=m.name, model_a=a, model_b=b, difference=c.difference, ci_low=c.ci_low,
                           ci_high=c.ci_high, p_value=c.p_value, n=c.n, direction=m.direction, unit=m.unit)
                      for (a, b), c in pairs.items()]
            for row, p in zip(family, stats.holm([r["p_value"] for r in family])):
                row["p_holm"] = p
            out += [{c: r[c] for c in COMPARISON_COLUMNS} for r in family]
    return out


def common_tables(bench: Any, rows: Sequence[Mapping[str, Any]], group_columns: Iterable[str] = (),
                  resamples: int = stats.RESAMPLES) -> dict[str, list[dict[str, Any]]]:
    """``results`` (the long table) and ``comparisons`` of a benchmark plugin's score rows, by
    its ``results_spec`` and ``result_rows`` (:class:`icl.benchmarks.base.Benchmark`);
    ``group_columns``: the items' group columns, never taken for metrics (a seed, a K)."""
    spec: ResultsSpec = bench.results_spec
    if spec.metrics is None:
        spec = replace(spec, ignore=(*spec.ignore, *sorted(set(group_columns))))
    mine = bench.result_rows(rows)
    return {"results": results_rows(bench.name, bench.protocol, mine, spec, bench.data_origin(), resamples),
            "comparisons": comparison_rows(bench.name, bench.protocol, mine, spec, resamples)}
