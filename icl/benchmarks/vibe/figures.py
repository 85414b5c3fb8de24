"""The visual benchmark's figure data: shot-curve rows with combined whiskers, rank intervals."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np


def shot_rows(aggs: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """Per model, one row per shot count: the mean over datasets and its whisker, the datasets'
    half-widths (:func:`icl.report.plots.interval`) combined in quadrature (independent datasets,
    each weighing the same), as ``ci_low``/``ci_high``; ``interval="normal"`` unless every dataset
    has a bootstrap CI (then the whisker is the normal approximation, and labelled so)."""
    from icl.report.plots import interval

    groups: dict[tuple[str, int], list[Any]] = {}
    for a in aggs:
        groups.setdefault((a.model, a.shots), []).append(a)
    out: dict[str, list[dict[str, Any]]] = {}
    for (model, shots), group in sorted(groups.items()):
        means = np.array([a.mean for a in group], float)
        whiskers = [interval(a) for a in group]
        halves = np.array([(hi - lo) / 2 for lo, hi, _ in whiskers], float)
        half = float(np.sqrt((halves ** 2).sum())) / len(group)
        row: dict[str, Any] = dict(shots=shots, mean=float(means.mean()))
        if math.isfinite(half):
            row.update(ci_low=row["mean"] - half, ci_high=row["mean"] + half)
            if not all(ci for _, _, ci in whiskers):
                row["interval"] = "normal"
        out.setdefault(model, []).append(row)
    return out


def rank_intervals(ranks: Sequence[Mapping[str, Any]]) -> dict[int, dict[tuple[str, str], tuple[float, float]]]:
    """Rank intervals of the ranks table (``ci_low``/``ci_high``, or ``rank_low``/``rank_high``, of
    its task and overall rows, where the run computed them): shots -> (model, task or "overall") -> (low, high)."""
    out: dict[int, dict[tuple[str, str], tuple[float, float]]] = {}
    for r in ranks:
        lo, hi = r.get("ci_low", r.get("rank_low")), r.get("ci_high", r.get("rank_high"))
        if r.get("metric") != "*" or not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
            continue
        if math.isfinite(lo) and math.isfinite(hi):
            task = "overall" if r.get("task") == "*" else str(r.get("task"))
            out.setdefault(int(r["shots"]), {})[(str(r["model"]), task)] = (float(lo), float(hi))
    return out
