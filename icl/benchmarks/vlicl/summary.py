"""Summaries of VL-ICL results (PROTOCOL §3.2, §3.3, §6).

- accuracy per (model, task, setting, shots, seed) = 100 x mean correctness over the queries
  (failed generations count as wrong); reported as the mean over seeds and the population std
  (ddof 0), with a 95% percentile bootstrap interval over queries (10,000 resamples, clustered by
  query: a query's seeds move together; the interval of results.csv, :mod:`icl.report.stats`).
- :func:`shot_summary`: zero-shot, peak and signed ICL efficiency of one shot curve.
- paired comparisons: for two models on the same (task, setting, shots), the accuracy difference
  with a 95% paired bootstrap interval over their shared queries.
- average ranks of each summary metric over the tasks of a direction (1 = best, ties share the
  average rank), with 95% bootstrap rank intervals (:func:`rank_intervals`); capability
  aggregates: the mean of each summary metric over the tasks that test
  a capability (the source's Table 1).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from icl.benchmarks.vlicl.tasks import TASKS
from icl.report import stats

SETTING = ("variant", "description", "cot", "prompt", "repeat")  # group columns besides task, shots, seed
SUMMARY_METRICS = ("zero_shot", "peak", "efficiency")
BOOTSTRAP = 10_000
KEY_PARTS = 7  # item keys: "{task}/{variant}/{description}/{cot}/seed{seed}/shot{shots}/{query_id}"


def item_key(task: str, variant: str, description: str, cot: str, seed: int, shots: int, query_id: str) -> str:
    """The stable key of one plan item (the query id comes last and may contain ``/``)."""
    return f"{task}/{variant}/{description}/{cot}/seed{seed}/shot{shots}/{query_id}"


def query_of(row: Mapping[str, Any]) -> str:
    """The query id of a score row (from its key)."""
    return str(row["key"]).split("/", KEY_PARTS - 1)[-1]


def shot_summary(shots: Sequence[int], accuracies: Sequence[float]) -> dict[str, float]:
    """Zero-shot, peak and ICL efficiency of a shot curve.

    shots: strictly increasing shot counts starting at 0; accuracies: the seed-averaged accuracy
    in % at each. zero_shot = the accuracy at 0 shots; peak = the maximum over all points (0
    included); efficiency = the trapezoid area of ``accuracy - zero_shot`` over the shot counts,
    divided by the largest shot count (signed; NaN for a curve of the zero-shot point alone).
    """
    s = np.asarray(shots, dtype=np.float64)
    a = np.asarray(accuracies, dtype=np.float64)
    if s.ndim != 1 or a.shape != s.shape or s.size == 0:
        raise ValueError(f"shots and accuracies must be equal-length 1-d sequences, got {s.shape} and {a.shape}")
    if s[0] != 0 or np.any(np.diff(s) <= 0):
        raise ValueError(f"shots must increase strictly from 0, got {list(shots)}")
    gain = a - a[0]
    eff = float(np.sum((gain[1:] + gain[:-1]) / 2 * np.diff(s)) / s[-1]) if s.size > 1 else math.nan
    return {"zero_shot": float(a[0]), "peak": float(a.max()), "efficiency": eff}


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks, 1 = largest; ties share the average rank; NaN ranks after every number (sharing)."""
    v = [(-x if not math.isnan(x) else math.inf) for x in values]
    order = sorted(range(len(v)), key=lambda i: v[i])
    ranks = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pstd(x: Sequence[float]) -> float:
    return float(np.std(np.asarray(x, dtype=np.float64))) if len(x) else math.nan


def _mean(x: Sequence[float]) -> float:
    return float(np.mean(np.asarray(x, dtype=np.float64))) if len(x) else math.nan


def bootstrap_interval(per_query: np.ndarray, key: str) -> tuple[float, float]:
    """95% percentile interval of ``100 * mean(per_query)`` (one value per query, the mean over
    its seeds), resampling queries (:func:`icl.report.stats.mean_ci`, seeded by ``key``)."""
    e = stats.mean_ci(per_query, identity=key, benchmark="vlicl", resamples=BOOTSTRAP, scale=100.0)
    return e.ci_low, e.ci_high


def subset_of(setting: Sequence[Any]) -> str:
    """The ``subset`` of results.csv: the setting's values joined by ``/``."""
    return "/".join(str(v) for v in setting)


def _setting(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(c) for c in SETTING)


def accuracy_tables(rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-seed and seed-averaged accuracy rows (see the module docstring)."""
    cells: dict[tuple, dict[int, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        cells[(r["model"], r["task"], *_setting(r), int(r["shots"]))][int(r["seed"])].append(r)
    per_seed: list[dict[str, Any]] = []
    table: list[dict[str, Any]] = []
    for key in sorted(cells, key=lambda k: tuple(str(x) for x in k[:-1]) + (k[-1],)):
        model, task, *setting, shots = key
        base = {"model": model, "task": task, **dict(zip(SETTING, setting)), "shots": shots}
        seeds = cells[key]
        metrics = ["correct"] + [m for m in ("latent", "non_latent") if all(m in r for s in seeds.values() for r in s)]
        accs: dict[str, list[float]] = defaultdict(list)
        by_query: dict[str, list[float]] = defaultdict(list)
        for seed in sorted(seeds):
            rs = seeds[seed]
            row = {**base, "seed": seed, "queries": len(rs)}
            for m in metrics:
                acc = 100 * _mean([float(r[m]) for r in rs])
                accs[m].append(acc)
                row["accuracy" if m == "correct" else m] = acc
            per_seed.append(row)
            for r in rs:
                by_query[query_of(r)].append(float(r["correct"]))
        # the interval of results.csv (icl.report.schema): queries resampled, their seeds together
        queries = [query_of(r) for s_ in seeds.values() for r in s_]
        ci = stats.mean_ci([float(r["correct"]) for s_ in seeds.values() for r in s_], queries,
                           identity=stats.group_identity(task, subset_of(setting), shots, "accuracy"),
                           benchmark="vlicl", resamples=BOOTSTRAP, scale=100.0)
        lo, hi = ci.ci_low, ci.ci_high
        out = {**base, "seeds": len(seeds), "queries": len(by_query),
               "accuracy": _mean(accs["correct"]), "std": _pstd(accs["correct"]), "ci_low": lo, "ci_high": hi,
               "overflow": int(sum(float(r.get("overflow", 0)) for s in seeds.values() for r in s)),
               "failed": int(sum(float(r.get("failed", 0)) for s in seeds.values() for r in s))}
        for m in metrics[1:]:
            out[m], out[f"{m}_std"] = _mean(accs[m]), _pstd(accs[m])
        table.append(out)
    return per_seed, table


def summary_table(accuracy: Sequence[Mapping[str, Any]], fitting: bool = False) -> list[dict[str, Any]]:
    """Zero-shot, peak and efficiency per (model, task, setting) from seed-averaged accuracies
    (curves without a zero-shot point are left out). ``overflow_shots`` lists the shot counts with
    queries that did not fit the model's context (they count as wrong); with ``fitting`` the three
    numbers are taken over the shot counts without overflow only (``efficiency_over`` says which)."""
    curves: dict[tuple, list[tuple[int, float, int]]] = defaultdict(list)
    for r in accuracy:
        curves[(r["model"], r["task"], *_setting(r))].append(
            (int(r["shots"]), float(r["accuracy"]), int(r.get("overflow", 0) or 0)))
    out = []
    for key, pts in curves.items():
        pts.sort()
        over = [p[0] for p in pts if p[2]]
        used = [p for p in pts if not p[2]] if fitting else pts
        if not used or used[0][0] != 0:
            continue
        model, task, *setting = key
        s = shot_summary([p[0] for p in used], [p[1] for p in used])
        out.append({"model": model, "task": task, **dict(zip(SETTING, setting)),
                    "direction": TASKS[task].direction if task in TASKS else "", **s,
                    "shots": ",".join(str(p[0]) for p in used), "overflow_shots": ",".join(map(str, over)),
                    "efficiency_over": "fitting" if fitting else "all"})
    return out


def rank_table(summary: Sequence[Mapping[str, Any]],
               intervals: Optional[Mapping[tuple, Mapping[str, Mapping[str, tuple[float, float]]]]] = None
               ) -> list[dict[str, Any]]:
    """Average rank of each summary metric per (direction, setting) over its tasks, with
    ``{metric}_rank_low``/``_high`` from ``intervals`` (:func:`rank_intervals`; NaN without)."""
    groups: dict[tuple, dict[str, dict[str, Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for r in summary:
        groups[(r["direction"], *_setting(r))][r["task"]][r["model"]] = r
    out = []
    for gkey, tasks in groups.items():
        models = sorted({m for t in tasks.values() for m in t})
        acc: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in models}
        for by_model in tasks.values():
            for metric in SUMMARY_METRICS:
                vals = [float(by_model[m][metric]) if m in by_model else math.nan for m in models]
                for m, rk in zip(models, average_ranks(vals)):
                    acc[m][metric].append(rk)
        direction, *setting = gkey
        for m in models:
            over = ";".join(f"{t}:{by_model[m]['overflow_shots']}" for t, by_model in sorted(tasks.items())
                            if m in by_model and by_model[m].get("overflow_shots"))
            ci = (intervals or {}).get(gkey, {}).get(m, {})
            out.append({"model": m, "direction": direction, **dict(zip(SETTING, setting)), "tasks": len(tasks),
                        **{f"{metric}_rank": _mean(acc[m][metric]) for metric in SUMMARY_METRICS},
                        **{f"{metric}_rank_{end}": ci.get(metric, (math.nan, math.nan))[i]
                           for metric in SUMMARY_METRICS for i, end in enumerate(("low", "high"))},
                        "overflow_shots": over})
    return out


def capability_table(summary: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mean zero-shot, peak and efficiency per (model, setting, capability) over the tasks testing it."""
    cells: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in summary:
        spec = TASKS.get(r["task"])
        if spec is None:
            continue
        for cap in (spec.direction,) + spec.capabilities:
            cells[(r["model"], *_setting(r), cap)].append(r)
    out = []
    for key in sorted(cells, key=lambda k: tuple(str(x) for x in k)):
        model, *setting, cap = key
        rs = cells[key]
        out.append({"model": model, **dict(zip(SETTING, setting)), "capability": cap, "tasks": len(rs),
                    **{m: _mean([float(r[m]) for r in rs]) for m in SUMMARY_METRICS}})
    return out


def paired_table(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Accuracy difference (model_a - model_b, in points) per (task, setting, shots) with its 95%
    paired bootstrap interval over the queries both models answered (each query: the mean over
    its seeds), for every pair of models."""
    cells: dict[tuple, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        cells[(r["task"], *_setting(r), int(r["shots"]))][str(r["model"])][query_of(r)].append(float(r["correct"]))
    out = []
    for key in sorted(cells, key=lambda k: tuple(str(x) for x in k[:-1]) + (k[-1],)):
        by_model = cells[key]
        models = sorted(by_model)
        task, *setting, shots = key
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                shared = sorted(set(by_model[a]) & set(by_model[b]))
                diff = np.array([_mean(by_model[a][q]) - _mean(by_model[b][q]) for q in shared])
                lo, hi = bootstrap_interval(diff, "/".join(str(k) for k in key) + f"/{a}-{b}")
                out.append({"task": task, **dict(zip(SETTING, setting)), "shots": shots, "model_a": a, "model_b": b,
                            "queries": len(shared), "difference": 100 * _mean(list(diff)), "ci_low": lo, "ci_high": hi})
    return out


def rank_intervals(rows: Iterable[Mapping[str, Any]], summary: Sequence[Mapping[str, Any]],
                   resamples: int = BOOTSTRAP) -> dict[tuple, dict[str, dict[str, tuple[float, float]]]]:
    """95% bootstrap intervals of :func:`rank_table`'s average ranks, keyed (direction,
    *setting) -> model -> metric -> (low, high). Per (task, setting) the queries are resampled
    once for every model, shot count and seed (seeded by task/setting/"ranks"); each resample's
    accuracies give zero-shot, peak and efficiency over the shot counts ``summary`` used, the
    models are ranked per task and the ranks averaged over the tasks, as in :func:`rank_table`."""
    cells: dict[tuple, dict[tuple[str, int], list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        cells[(r["task"], *_setting(r))][(str(r["model"]), int(r["shots"]))].append(r)
    by_task: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for srow in summary:
        if (srow["task"], *_setting(srow)) in cells:
            by_task[(srow["task"], *_setting(srow))].append(srow)
    # (direction, *setting) -> task -> model -> metric -> its values over the draws
    curves: dict[tuple, dict[str, dict[str, dict[str, np.ndarray]]]] = defaultdict(dict)
    for key, srows in by_task.items():
        by = cells[key]
        columns: list[tuple[list[str], np.ndarray, np.ndarray]] = []
        spans: list[tuple[Mapping[str, Any], list[int], int]] = []
        for srow in srows:  # every model's curve from one draw of the task's queries
            used = [int(x) for x in str(srow["shots"]).split(",") if x != ""]
            spans.append((srow, used, len(columns)))
            for k in used:
                rs = by.get((str(srow["model"]), k), [])
                columns.append(stats.cluster_totals([float(r["correct"]) for r in rs], [query_of(r) for r in rs]))
        _, draws, _ = stats.joint_draws(columns, identity=stats.group_identity(key[0], subset_of(key[1:]), "ranks"),
                                        benchmark="vlicl", resamples=resamples)
        for srow, used, start in spans:
            acc = 100 * draws[:, start:start + len(used)]  # [B, S]
            s_ = np.asarray(used, np.float64)
            gain = acc - acc[:, :1]
            eff = (np.sum((gain[:, 1:] + gain[:, :-1]) / 2 * np.diff(s_), axis=1) / s_[-1] if s_.size > 1
                   else np.full(acc.shape[0], np.nan))
            curves[(srow["direction"], *key[1:])].setdefault(key[0], {})[str(srow["model"])] = {
                "zero_shot": acc[:, 0], "peak": acc.max(axis=1), "efficiency": eff}
    out: dict[tuple, dict[str, dict[str, tuple[float, float]]]] = {}
    for gkey, tasks in curves.items():
        models = sorted({m for t in tasks.values() for m in t})
        out[gkey] = {m: {} for m in models}
        for metric in SUMMARY_METRICS:
            ranks = []
            for by_model in tasks.values():
                vals = np.stack([by_model[m][metric] if m in by_model else np.full(resamples, np.nan)
                                 for m in models], axis=1)
                ranks.append(stats.rank_matrix(vals, False))
            lo, hi = stats.rank_interval(np.mean(ranks, axis=0))
            for m, a, b in zip(models, lo, hi):
                out[gkey][m][metric] = (stats.as_float(a), stats.as_float(b))
    return out
