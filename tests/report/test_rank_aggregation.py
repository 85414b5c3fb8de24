import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import rankdata

from icl.report import Scored, aggregate, rank_models, rank_values
from icl.report.aggregate import PSNR_CAP

from tests.report._rows import SPECS, hand_rows, row


def test_rank_values_ties_and_missing():
    assert rank_values([3.0, 1.0, 3.0, math.nan, 2.0], lower_is_better=True) == [3.5, 1.0, 3.5, 5.0, 2.0]
    assert rank_values([3.0, 1.0, 3.0, math.nan, 2.0], lower_is_better=False) == [1.5, 4.0, 1.5, 5.0, 3.0]
    assert rank_values([math.nan, math.nan, 0.0], lower_is_better=False) == [2.5, 2.5, 1.0]
    assert rank_values([], lower_is_better=True) == []


@pytest.mark.parametrize("n", [1, 2, 7, 40])
def test_rank_values_matches_scipy(n):
    rng = np.random.default_rng(n)
    v = rng.integers(0, 5, n).astype(float)  # many ties
    np.testing.assert_array_equal(rank_values(list(v), lower_is_better=True), rankdata(v, method="average"))
    np.testing.assert_array_equal(rank_values(list(v), lower_is_better=False), rankdata(-v, method="average"))


def test_aggregate_mean_population_std_and_psnr_cap():
    aggs = {(a.model, a.dataset, a.task, a.metric): a for a in aggregate(hand_rows(), SPECS)}
    a = aggs[("A", "d1", "img", "psnr")]
    assert a.mean == pytest.approx((PSNR_CAP + 20.0) / 2) and a.std == pytest.approx(40.0)  # ddof=0
    b = aggs[("B", "d1", "seg", "miou")]
    assert b.mean == pytest.approx(0.5) and b.std == pytest.approx(0.1) and b.n == 2 and b.n_failed == 0


def test_aggregate_missing_is_reported_not_dropped():
    rows = [row("A", "d", "img", "q1", dict(psnr=10.0, ssim=0.5, lpips=math.nan)),
            row("A", "d", "img", "q2", dict(psnr=20.0, ssim=0.7, lpips=0.2)),
            row("A", "d", "img", "q3", {}, status="failed")]
    aggs = {a.metric: a for a in aggregate(rows, SPECS)}
    assert math.isnan(aggs["lpips"].mean) and aggs["lpips"].n_missing == 1 and aggs["lpips"].n == 2
    assert aggs["psnr"].mean == 15.0 and aggs["psnr"].n_failed == 1 and aggs["psnr"].n_missing == 0
    # every metric of the spec appears, even when no sample has it
    only_failed = aggregate([row("B", "d", "img", "q1", {}, status="failed")], SPECS)
    assert [a.metric for a in only_failed] == ["psnr", "ssim", "lpips"]
    assert all(math.isnan(a.mean) and a.n == 0 and a.n_failed == 1 for a in only_failed)


def test_rank_aggregation_hand_computed():
    (table,) = rank_models(aggregate(hand_rows(), SPECS), SPECS)
    assert table.models == ["A", "B", "C"] and table.tasks == ["seg", "img"]  # the order of SPECS
    # seg: dataset averages A 0.7, B 0.7 (tie), C 0.3
    assert table.values["seg"]["miou"] == pytest.approx({"A": 0.7, "B": 0.7, "C": 0.3})
    assert table.metric_ranks["seg"]["miou"] == {"A": 1.5, "B": 1.5, "C": 3.0}
    # img: PSNR A (100+20)/2 = 60 ties C 60, B 30; SSIM 0.9 > 0.8 > 0.7; LPIPS (lower) A = B 0.1 < C 0.3
    assert table.metric_ranks["img"] == {"psnr": {"A": 1.5, "B": 3.0, "C": 1.5},
                                         "ssim": {"A": 1.0, "B": 2.0, "C": 3.0},
                                         "lpips": {"A": 1.5, "B": 1.5, "C": 3.0}}
    assert table.task_ranks["img"] == pytest.approx({"A": 4 / 3, "B": 6.5 / 3, "C": 7.5 / 3})
    assert table.task_ranks["seg"] == {"A": 1.5, "B": 1.5, "C": 3.0}
    assert table.overall == pytest.approx({"A": (1.5 + 4 / 3) / 2, "B": (1.5 + 6.5 / 3) / 2, "C": (3 + 2.5) / 2})


def test_missing_metric_ranks_last_or_is_left_out():
    # LPIPS weights absent for everyone
    rows = [replace(r, metrics=dict(r.metrics, lpips=math.nan)) for r in hand_rows() if r.task == "img"]
    (table,) = rank_models(aggregate(rows, SPECS), SPECS)
    assert table.excluded["img"] == ["lpips"] and set(table.metric_ranks["img"]) == {"psnr", "ssim"}
    assert table.task_ranks["img"] == pytest.approx({"A": 1.25, "B": 2.5, "C": 2.25})
    rows = [r for r in hand_rows() if r.task == "seg" and not (r.model == "A" and r.dataset == "d2")]
    (table,) = rank_models(aggregate(rows, SPECS), SPECS)
    # A lacks dataset d2: no task average, ranked after B and C
    assert math.isnan(table.values["seg"]["miou"]["A"])
    assert table.metric_ranks["seg"]["miou"] == {"A": 3.0, "B": 1.0, "C": 2.0}


def test_model_versions_are_separate_groups():
    rows = [row("A", "d", "seg", "q1", {"miou": 0.2}), Scored("A", "2", "d", "seg", 1, "q1", "ok", {"miou": 0.6})]
    aggs = aggregate(rows, SPECS)
    assert [(a.model_version, a.mean) for a in aggs] == [("1", 0.2), ("2", 0.6)]


def test_model_order_is_kept():
    (table,) = rank_models(aggregate(hand_rows(), SPECS), SPECS, ["C", "A"])
    assert table.models == ["C", "A", "B"]  # listed first, then the others sorted


def test_one_table_per_shot_count():
    rows = hand_rows() + [row("A", "d1", "seg", "q1", {"miou": 0.1}, shots=2),
                          row("B", "d1", "seg", "q1", {"miou": 0.2}, shots=2)]
    tables = rank_models(aggregate(rows, SPECS), SPECS)
    assert [t.shots for t in tables] == [1, 2]
    assert tables[1].overall == {"A": 2.0, "B": 1.0}
