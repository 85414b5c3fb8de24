"""Bootstrap statistics of every benchmark (PROTOCOL §6): numpy only, vectorised over resamples.

- :func:`mean_ci`: a mean (or a pooled ratio ``sum(num) / sum(den)``) with its 95% percentile
  bootstrap interval, 10,000 resamples. Clustered: with ``clusters`` the units resampled are the
  clusters (a query with several seeds or shots moves as a whole) and each resample's statistic
  is the mean of the observations it holds (the ratio of the resampled totals).
- :func:`paired_difference`: the difference of two models on the units both have, from one
  shared resample of those units, with its interval and a two-sided bootstrap p-value;
  :func:`holm` adjusts a family of p-values (Holm 1979, step-down; the rule of
  ``statsmodels.stats.multitest.multipletests(method="holm")``).
- :func:`rank_matrix` and :func:`rank_interval`: ranks of every resample (1 = best, ties share
  the average rank, NaN last) and their 2.5/97.5 percentiles.

Seeds: every draw is seeded by ``derive_seed(seed, benchmark, "*", identity, "bootstrap")``
(PROTOCOL §1.1: ``numpy.random.default_rng`` of it for multinomial counts, the index stream's
seed otherwise), ``identity`` naming the group (task, subset, shots,
metric: not the model's label, a display name; models of one group share the draw). Units are put in a canonical order
(sorted by cluster id, then by value) and cluster totals are summed in that order, so an interval
never depends on the order, batching or sharding of the rows it came from: bit for bit.

Exact resampling, two ways: resampling K units uniformly with replacement is the same as drawing
multinomial counts over the *distinct* units with their frequencies, so data with few distinct
values (accuracies, judge scores, counts) cost ``resamples x distinct`` draws; otherwise the
``resamples x K`` indices come from the counter-based stream of :func:`icl.ops.bootstrap.bootstrap_totals`
(native, about 0.6 ns a draw; its numpy reference gives the same bits where ``icl._C`` is missing),
every varying column summed from the same draws.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from icl.data.seeds import ANY, derive_seed
from icl.ops.bootstrap import bootstrap_totals

RESAMPLES = 10_000
_ESTIMATES: dict[tuple, "Estimate"] = {}
LEVEL = 0.95
# the multinomial path draws ~50 ns per distinct unit and resample, the index path ~0.6 ns per unit
DISTINCT_SHARE = 1 / 8
MEMO_SIZE = 4096  # intervals kept (a pure function of its inputs, so never stale)


@dataclass(frozen=True)
class Estimate:
    """A statistic with its percentile interval; ``n``: units resampled (clusters or items)."""

    value: float
    ci_low: float
    ci_high: float
    n: int


@dataclass(frozen=True)
class Comparison:
    """``a - b`` on the units both have, its interval and two-sided bootstrap p-value."""

    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int


def bootstrap_seed(identity: str, benchmark: str = "icl", seed: int | str = 0) -> int:
    """``derive_seed(seed, benchmark, "*", identity, "bootstrap")`` (PROTOCOL §1.1, §6)."""
    return derive_seed(seed, benchmark, ANY, identity, "bootstrap")


def group_identity(*parts: Any) -> str:
    """The identity string of a group: its parts joined by ``/`` (``None`` as empty)."""
    return "/".join("" if p is None else str(p) for p in parts)


def cluster_totals(values: Sequence[float] | np.ndarray, clusters: Optional[Sequence[Any]] = None,
                   denominators: Optional[Sequence[float] | np.ndarray] = None
                   ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per unit (cluster, or each value alone): the total of ``values`` and of ``denominators``
    (default 1 per value: the count), in canonical order. Returns (unit ids, num [K], den [K]);
    ids are the sorted cluster ids, or ``""`` per value when there are no clusters (units then
    sorted by value)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    d = np.ones_like(v) if denominators is None else np.asarray(denominators, dtype=np.float64).reshape(-1)
    if d.shape != v.shape:
        raise ValueError(f"denominators has {d.size} values for {v.size} values")
    if clusters is None:
        order = np.lexsort((d, v))
        return [""] * v.size, v[order], d[order]
    ids = [str(c) for c in clusters]
    if len(ids) != v.size:
        raise ValueError(f"clusters has {len(ids)} ids for {v.size} values")
    names, codes = np.unique(np.array(ids, dtype=str), return_inverse=True)
    order = np.lexsort((d, v, codes))  # within a cluster by value: sums independent of row order
    codes, v, d = codes[order], v[order], d[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if v.size else np.zeros(0, np.int64)
    return [str(x) for x in names], np.add.reduceat(v, starts) if v.size else v, \
        np.add.reduceat(d, starts) if v.size else d


def resample_totals(num: np.ndarray, den: np.ndarray, seed: int, resamples: int = RESAMPLES
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Totals of ``num`` and ``den`` (``[K, G]`` float64: K units, G columns resampled together)
    over ``resamples`` bootstrap resamples of the K rows: two ``[resamples, G]`` arrays. NaN
    entries must have been replaced by the caller."""
    num = np.atleast_2d(np.asarray(num, np.float64).T).T
    den = np.atleast_2d(np.asarray(den, np.float64).T).T
    k, g = num.shape
    if k == 0:
        return np.zeros((resamples, g)), np.zeros((resamples, g))
    rows = np.concatenate([num, den], axis=1)
    distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
    if len(distinct) <= max(2, k * DISTINCT_SHARE):
        freq = np.bincount(inverse.reshape(-1), minlength=len(distinct)) / k
        counts = np.random.default_rng(seed).multinomial(k, freq, size=resamples).astype(np.float64)
        totals = counts @ distinct
        return totals[:, :g], totals[:, g:]
    tot_num, tot_den = np.empty((resamples, g)), np.empty((resamples, g))
    constant = [j for j in range(g, 2 * g) if np.all(rows[:, j] == rows[0, j])]  # counts of equal clusters
    for j in constant:
        tot_den[:, j - g] = rows[0, j] * k
    varying = [j for j in range(2 * g) if j not in constant]
    # every varying column from the same K draws per resample (icl.ops.bootstrap's stream)
    totals = bootstrap_totals(np.ascontiguousarray(rows[:, varying]), seed, resamples)
    for i, j in enumerate(varying):
        (tot_num if j < g else tot_den)[:, j % g] = totals[:, i]
    return tot_num, tot_den


def as_float(x: Any) -> float:
    """A Python float; every NaN as ``math.nan`` itself (so equal tables compare equal)."""
    x = float(x)
    return math.nan if math.isnan(x) else x


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan)


def percentile_interval(draws: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles along axis 0 over the draws
    that are defined (a ratio whose resampled denominator is 0 is not); NaN where none is."""
    draws = np.asarray(draws, dtype=np.float64)
    if not np.isnan(draws).any():
        lo, hi = np.percentile(draws, [50 * (1 - level), 50 * (1 + level)], axis=0)
        return lo, hi
    flat = draws.reshape(draws.shape[0], -1)
    defined = ~np.isnan(flat).all(axis=0)
    lo, hi = np.full(flat.shape[1], np.nan), np.full(flat.shape[1], np.nan)
    if defined.any():
        lo[defined], hi[defined] = np.nanpercentile(flat[:, defined], [50 * (1 - level), 50 * (1 + level)], axis=0)
    return lo.reshape(draws.shape[1:]), hi.reshape(draws.shape[1:])


def mean_ci(values: Sequence[float] | np.ndarray, clusters: Optional[Sequence[Any]] = None, *, identity: str,
            benchmark: str = "icl", seed: int | str = 0, denominators: Optional[Sequence[float] | np.ndarray] = None,
            resamples: int = RESAMPLES, level: float = LEVEL, scale: float = 1.0) -> Estimate:
    """``scale * sum(values) / sum(denominators)`` (the mean when there are no denominators)
    and its percentile bootstrap interval over units (clusters when given): :func:`ratio_ci`
    of :func:`cluster_totals`."""
    _, num, den = cluster_totals(values, clusters, denominators)
    return ratio_ci(num, den, identity=identity, benchmark=benchmark, seed=seed, resamples=resamples, level=level,
                    scale=scale)


def ratio_value(num: np.ndarray, den: np.ndarray, scale: float = 1.0) -> float:
    """``scale * sum(num) / sum(den)`` over units: the point estimate of :func:`ratio_ci`. NaN
    with no units, a NaN total (a missing metric is never dropped silently) or a zero ``den``."""
    if num.size == 0 or np.isnan(num).any() or np.isnan(den).any():
        return math.nan
    return as_float(_ratio(np.array(num.sum()), np.array(den.sum())) * scale)


def ratio_ci(num: np.ndarray, den: np.ndarray, *, identity: str, benchmark: str = "icl", seed: int | str = 0,
             resamples: int = RESAMPLES, level: float = LEVEL, scale: float = 1.0) -> Estimate:
    """``scale * sum(num) / sum(den)`` over units (``[K]`` totals in canonical order, from
    :func:`cluster_totals`) and its percentile interval. A NaN total makes every number NaN (a
    missing metric is never dropped silently); no units give NaN with n 0; one unit its value."""
    k = int(num.size)
    value = ratio_value(num, den, scale)
    if k <= 1 or math.isnan(value):  # nothing to resample
        return Estimate(value, value, value, k)
    # the same group is asked twice per run (a benchmark's own table and results.csv): kept once
    memo = (identity, benchmark, str(seed), resamples, level, scale, num.tobytes(), den.tobytes())
    hit = _ESTIMATES.get(memo)
    if hit is not None:
        return hit
    tn, td = resample_totals(num[:, None], den[:, None], bootstrap_seed(identity, benchmark, seed), resamples)
    lo, hi = percentile_interval(_ratio(tn, td)[:, 0] * scale, level)
    out = _ESTIMATES[memo] = Estimate(value, as_float(lo), as_float(hi), k)
    while len(_ESTIMATES) > MEMO_SIZE:
        _ESTIMATES.pop(next(iter(_ESTIMATES)))
    return out


def forget() -> None:
    """Drop the intervals kept by :func:`ratio_ci` (for timing the computation itself)."""
    _ESTIMATES.clear()


def joint_draws(columns: Sequence[tuple[Sequence[Any], np.ndarray, np.ndarray]], *, identity: str,
                benchmark: str = "icl", seed: int | str = 0, resamples: int = RESAMPLES
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """Columns (unit ids, num, den: e.g. one per model) resampled over the union of their units
    with one shared draw: (point values [G], bootstrap statistics [resamples, G], units). A unit
    a column lacks weighs nothing in it; a column with a NaN total is NaN."""
    units = sorted({u for ids, _, _ in columns for u in ids})
    where = {u: i for i, u in enumerate(units)}
    num = np.zeros((len(units), len(columns)))
    den = np.zeros((len(units), len(columns)))
    bad = np.zeros(len(columns), bool)
    for j, (ids, n, d) in enumerate(columns):
        at = np.fromiter((where[u] for u in ids), np.int64, len(ids))
        bad[j] = bool(np.isnan(n).any() or np.isnan(d).any())
        num[at, j], den[at, j] = np.nan_to_num(n), np.nan_to_num(d)
    point = _ratio(num.sum(0), den.sum(0))
    tn, td = resample_totals(num, den, bootstrap_seed(identity, benchmark, seed), resamples)
    draws = _ratio(tn, td)
    point[bad], draws[:, bad] = np.nan, np.nan
    return point, draws, len(units)


def paired_difference(a: tuple[Sequence[Any], np.ndarray, np.ndarray], b: tuple[Sequence[Any], np.ndarray, np.ndarray],
                      *, identity: str, benchmark: str = "icl", seed: int | str = 0, resamples: int = RESAMPLES,
                      level: float = LEVEL, scale: float = 1.0) -> Comparison:
    """``a - b`` (each ``(unit ids, num, den)`` from :func:`cluster_totals`) on the units both
    have, from one resample of those units: the percentile interval of the difference and the
    two-sided p-value ``min(1, 2 min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (resamples + 1))``."""
    shared = set(a[0]) & set(b[0])
    keep = [(tuple(u for u in ids if u in shared),
             np.asarray(n)[[u in shared for u in ids]], np.asarray(d)[[u in shared for u in ids]])
            for ids, n, d in (a, b)]
    if not shared:
        return Comparison(math.nan, math.nan, math.nan, math.nan, 0)
    return pairwise_differences(keep, identity=identity, benchmark=benchmark, seed=seed, resamples=resamples,
                                level=level, scale=scale)[(0, 1)]


def pairwise_differences(columns: Sequence[tuple[Sequence[Any], np.ndarray, np.ndarray]], *, identity: str,
                         benchmark: str = "icl", seed: int | str = 0, resamples: int = RESAMPLES,
                         level: float = LEVEL, scale: float = 1.0) -> dict[tuple[int, int], Comparison]:
    """:func:`paired_difference` of every pair ``i < j`` of columns that hold the same units (the
    models of one group without failures), all from one shared resample: one draw for the group
    instead of one per pair."""
    point, draws, n = joint_draws(columns, identity=identity, benchmark=benchmark, seed=seed, resamples=resamples)
    out = {}
    for i in range(len(columns)):
        for j in range(i + 1, len(columns)):
            out[(i, j)] = _comparison(as_float((point[i] - point[j]) * scale), (draws[:, i] - draws[:, j]) * scale,
                                      n, level)
    return out


def _comparison(value: float, diff: np.ndarray, n: int, level: float) -> Comparison:
    """Interval and two-sided p-value of the bootstrap differences ``diff`` (undefined draws,
    a ratio whose resampled denominator is 0, left out)."""
    diff = diff[~np.isnan(diff)]
    if math.isnan(value) or diff.size == 0:
        return Comparison(math.nan, math.nan, math.nan, math.nan, n)
    lo, hi = percentile_interval(diff, level)
    below, above = int((diff <= 0).sum()), int((diff >= 0).sum())
    p = min(1.0, 2 * (min(below, above) + 1) / (diff.size + 1))
    return Comparison(value, as_float(lo), as_float(hi), p, n)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count in the family):
    sorted ascending, ``p_(i) * (m - i + 1)``, made monotone, capped at 1."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m:
        order = ok[np.argsort(p[ok], kind="stable")]
        adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
        out[order] = adjusted
    return out.tolist()


def rank_matrix(values: np.ndarray, lower_is_better: bool | np.ndarray = False) -> np.ndarray:
    """Ranks along the last axis (``[..., M]`` values of M models): 1 = best, ties share the
    average rank, NaN after every number (NaNs sharing theirs); the rule of
    :func:`icl.report.aggregate.rank_values`, vectorised."""
    v = np.asarray(values, dtype=np.float64)
    key = np.where(np.asarray(lower_is_better), v, -v)
    key = np.where(np.isnan(v), np.inf, key)
    nan = np.isnan(v)
    a, b = key[..., :, None], key[..., None, :]
    na, nb = nan[..., :, None], nan[..., None, :]
    better = ((b < a) & ~nb) | (na & ~nb)  # others strictly ahead of each model
    tied = ((b == a) & ~na & ~nb) | (na & nb)
    return 1.0 + better.sum(-1) + (tied.sum(-1) - 1) / 2.0


def rank_interval(ranks: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of each model's rank over resamples (``ranks``: ``[resamples, M]``)."""
    return percentile_interval(ranks, level)


def units_identity(units: Iterable[Any]) -> str:
    """A short digest of a set of unit ids (order-free)."""
    return hashlib.sha256("\n".join(sorted({str(u) for u in units})).encode()).hexdigest()[:16]
