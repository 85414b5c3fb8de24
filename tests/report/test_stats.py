"""Bootstrap statistics (icl.report.stats, PROTOCOL §6): coverage, size and power, clustering,
Holm, rank intervals, independence from row order, and agreement with scipy.stats.bootstrap.

Peers: ``scipy.stats.bootstrap(method="percentile")`` (scipy/scipy, scipy/stats/_resampling.py)
for the unclustered interval; Holm's step-down rule as in statsmodels
(statsmodels/statsmodels, statsmodels/stats/multitest.py, ``multipletests(method="holm")``),
checked on a hand-computed family; :func:`icl.report.aggregate.rank_values` for the ranks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from icl.report import stats
from icl.report.aggregate import Scored, TaskSpec, aggregate, attach_rank_intervals, rank_models, rank_values

COVERAGE_RESAMPLES = 2_000  # per repetition (the default is 10,000): 1,000 repetitions stay fast


def _coverage(n: int, reps: int = 1_000) -> float:
    rng = np.random.default_rng(7)
    hits = 0
    for i in range(reps):
        x = rng.normal(0.3, 1.0, n)
        e = stats.mean_ci(x, identity=f"coverage/{i}", resamples=COVERAGE_RESAMPLES)
        hits += e.ci_low <= 0.3 <= e.ci_high
    return hits / reps


@pytest.mark.slow
def test_95_percent_intervals_cover_a_known_mean_93_to_97_percent():
    coverage = _coverage(200)
    print(f"coverage of 1,000 intervals (n=200, 2,000 resamples each): {100 * coverage:.1f}%")
    assert 0.93 <= coverage <= 0.97


@pytest.mark.slow
def test_paired_test_keeps_its_size_and_detects_a_planted_difference():
    rng = np.random.default_rng(11)
    n, reps = 100, 1_000
    rejected = 0
    for i in range(reps):
        item = rng.normal(0, 1, n)  # shared item difficulty: the reason to pair
        a, b = item + rng.normal(0, 0.5, n), item + rng.normal(0, 0.5, n)
        keys = [f"q{j}" for j in range(n)]
        c = stats.paired_difference(stats.cluster_totals(a, keys), stats.cluster_totals(b, keys),
                                    identity=f"size/{i}", resamples=COVERAGE_RESAMPLES)
        rejected += c.p_value < 0.05
    size = rejected / reps
    print(f"paired test size at 0.05 over 1,000 equal-model repetitions: {100 * size:.1f}%")
    assert 0.03 <= size <= 0.075
    item = rng.normal(0, 1, n)
    a, b = item + rng.normal(0, 0.5, n), item - 0.3 + rng.normal(0, 0.5, n)
    keys = [f"q{j}" for j in range(n)]
    c = stats.paired_difference(stats.cluster_totals(a, keys), stats.cluster_totals(b, keys), identity="planted")
    assert c.p_value < 0.01 and c.ci_low > 0 and c.difference == pytest.approx(a.mean() - b.mean())


def test_unpaired_units_are_left_out_and_an_identical_model_has_p_1():
    a = stats.cluster_totals([1.0, 0.0, 1.0, 1.0], ["q1", "q2", "q3", "q4"])
    b = stats.cluster_totals([1.0, 0.0, 1.0], ["q1", "q2", "q3"])
    same = stats.paired_difference(a, b, identity="x")
    assert same.n == 3 and same.difference == 0.0 and same.p_value == 1.0 and same.ci_low == same.ci_high == 0.0


def test_clustered_interval_is_wider_on_clustered_data():
    rng = np.random.default_rng(3)
    queries, seeds = 60, 5
    effect = np.repeat(rng.normal(0, 1, queries), seeds)  # a query's seeds move together
    x = effect + rng.normal(0, 0.3, queries * seeds)
    ids = np.repeat([f"q{i}" for i in range(queries)], seeds)
    flat = stats.mean_ci(x, identity="c")
    clustered = stats.mean_ci(x, ids, identity="c")
    assert clustered.value == pytest.approx(flat.value) and clustered.n == queries and flat.n == queries * seeds
    assert (clustered.ci_high - clustered.ci_low) > 1.8 * (flat.ci_high - flat.ci_low)


def test_unclustered_interval_matches_scipy_percentile_bootstrap():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(5)
    for x in (rng.exponential(1.0, 40), rng.normal(2.0, 3.0, 300)):
        e = stats.mean_ci(x, identity="scipy")
        ref = scipy_stats.bootstrap((x,), np.mean, n_resamples=10_000, method="percentile",
                                    random_state=np.random.default_rng(0)).confidence_interval
        tol = 0.04 * (ref.high - ref.low)  # Monte-Carlo error of two 10,000-resample percentiles
        assert e.value == pytest.approx(x.mean())
        assert e.ci_low == pytest.approx(ref.low, abs=tol) and e.ci_high == pytest.approx(ref.high, abs=tol)


def test_few_distinct_values_take_the_exact_multinomial_path_with_the_same_distribution(monkeypatch):
    rng = np.random.default_rng(9)
    x = (rng.random(400) < 0.3).astype(float)
    fast = stats.mean_ci(x, identity="binary")
    monkeypatch.setattr(stats, "DISTINCT_SHARE", 0.0)  # force the index draws
    stats.forget()
    slow = stats.mean_ci(x, identity="binary")
    assert fast.value == slow.value
    assert fast.ci_low == pytest.approx(slow.ci_low, abs=0.006) and fast.ci_high == pytest.approx(slow.ci_high, abs=0.006)


def test_same_intervals_bit_for_bit_whatever_the_row_order():
    rng = np.random.default_rng(1)
    x = rng.normal(size=500)
    ids = [f"q{i % 97}" for i in range(500)]
    perm = rng.permutation(500)
    for clusters in (None, ids):
        one = stats.mean_ci(x, clusters, identity="order")
        two = stats.mean_ci(x[perm], None if clusters is None else [ids[i] for i in perm], identity="order")
        assert one == two
    # shards in any order: the same units, the same draw
    assert stats.mean_ci(np.r_[x[250:], x[:250]], identity="order") == stats.mean_ci(x, identity="order")
    assert stats.mean_ci(x, identity="order") != stats.mean_ci(x, identity="another group")


def test_ratio_of_totals_and_missing_values():
    e = stats.mean_ci([3.0, 1.0, 0.0], denominators=[4.0, 2.0, 0.0], identity="r")
    assert e.value == pytest.approx(4 / 6) and 0 <= e.ci_low <= e.value <= e.ci_high <= 1
    nan = stats.mean_ci([1.0, math.nan], identity="n")
    assert math.isnan(nan.value) and math.isnan(nan.ci_low) and nan.n == 2
    assert stats.mean_ci([], identity="e").n == 0 and stats.mean_ci([2.5], identity="o") == stats.Estimate(2.5, 2.5,
                                                                                                             2.5, 1)


def test_holm_against_a_hand_computed_family():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    out = stats.holm([0.02, math.nan, 0.01])  # NaN is not part of the family
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.02)


def test_rank_matrix_equals_rank_values_with_ties_and_nan():
    rng = np.random.default_rng(2)
    v = rng.integers(0, 4, (300, 6)).astype(float)
    v[rng.random(v.shape) < 0.15] = np.nan
    for lower in (False, True):
        got = stats.rank_matrix(v, lower)
        want = np.array([rank_values(list(row), lower) for row in v])
        assert np.array_equal(got, want)


def test_rank_intervals_on_a_constructed_case():
    """A is far ahead on both tasks; B and C are the same model up to noise: A's interval is
    [1, 1], B's and C's both span 2..3."""
    rng = np.random.default_rng(4)
    specs = {"seg": TaskSpec("seg", ("miou",), ("miou",), frozenset()),
             "depth": TaskSpec("depth", ("rmse",), ("rmse",), frozenset({"rmse"}))}
    rows = []
    for task, metric, best in (("seg", "miou", 0.9), ("depth", "rmse", 0.1)):
        for q in range(40):
            base = rng.random() * 0.2 + 0.3
            for model, v in (("A", best), ("B", base + rng.normal(0, 0.05)), ("C", base + rng.normal(0, 0.05))):
                rows.append(Scored(model, model, "d1", task, 1, f"q{q}", "ok", {metric: v}))
    aggs = aggregate(rows, specs)
    assert all(a.ci_low <= a.mean <= a.ci_high for a in aggs)
    tables = rank_models(aggs, specs, ["A", "B", "C"])
    attach_rank_intervals(tables, rows, specs, resamples=2_000)
    overall = tables[0].intervals["*"]["*"]
    assert overall["A"] == (1.0, 1.0)
    for m in ("B", "C"):
        assert overall[m][0] <= 2.0 and overall[m][1] >= 2.75
    seg = tables[0].intervals["seg"]["miou"]
    assert seg["B"] == (2.0, 3.0) and seg["C"] == (2.0, 3.0)
    # the same rows in another order: the same intervals
    again = rank_models(aggregate(rows[::-1], specs), specs, ["A", "B", "C"])
    attach_rank_intervals(again, rows[::-1], specs, resamples=2_000)
    assert again[0].intervals == tables[0].intervals


def test_many_columns_from_one_draw_equal_each_column_resampled_alone():
    # the index stream (icl.ops.bootstrap) gives every column the same draws, so a column's
    # totals are the same bits whether it is resampled with others or alone
    rng = np.random.default_rng(8)
    num, den = rng.random((300, 6)), rng.random((300, 6)) + 0.5
    tn, td = stats.resample_totals(num, den, 12, 700)
    for j in range(6):
        alone_n, alone_d = stats.resample_totals(num[:, j], den[:, j], 12, 700)
        np.testing.assert_array_equal(tn[:, j], alone_n[:, 0])
        np.testing.assert_array_equal(td[:, j], alone_d[:, 0])


def test_pairs_of_a_group_from_one_draw_agree_with_each_pair_alone():
    rng = np.random.default_rng(6)
    keys = [f"q{i}" for i in range(150)]
    base = rng.normal(size=150)
    cols = [stats.cluster_totals(base + shift + rng.normal(0, 0.3, 150), keys) for shift in (0.0, 0.05, 0.4)]
    together = stats.pairwise_differences(cols, identity="g")
    for (i, j), c in together.items():
        alone = stats.paired_difference(cols[i], cols[j], identity="g")
        assert c.difference == pytest.approx(alone.difference, abs=1e-12) and c.n == alone.n == 150
        width = alone.ci_high - alone.ci_low
        assert c.ci_low == pytest.approx(alone.ci_low, abs=0.1 * width)
        assert c.ci_high == pytest.approx(alone.ci_high, abs=0.1 * width)
    assert together[(0, 2)].p_value < 0.001 and together[(1, 2)].ci_high < 0
