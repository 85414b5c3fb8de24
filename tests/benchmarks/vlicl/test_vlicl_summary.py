"""shot_summary on the protocol's worked example and on rows of the source's Tables 2/3 recomputed
from its per-shot Tables 16-29; seed statistics, ranks and capability aggregates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icl.benchmarks.vlicl.summary import (accuracy_tables, average_ranks, bootstrap_interval, capability_table,
                                          item_key, paired_table, rank_table, shot_summary, summary_table)

FIVE = (0, 1, 2, 4, 5)
EIGHT = (0, 1, 2, 4, 8)


def test_worked_example() -> None:
    s = shot_summary(FIVE, [0, 39.50, 58.17, 51.17, 54.50])
    assert s["zero_shot"] == 0
    assert s["peak"] == 58.17
    assert s["efficiency"] == pytest.approx(46.152, abs=1e-9)
    assert round(s["efficiency"], 2) == 46.15


# (per-shot accuracies from Tables 16-29, shot grid, Table 2/3 zero-shot, peak, |efficiency| with the sign
# recomputed; the extracted text of Tables 2/3 lost the signs, docs/protocol.md §3.3)
PAPER_ROWS = [
    ("OpenFlamingo-9B open_mi (T16)", [0.00, 39.50, 58.17, 51.17, 54.50], FIVE, (0.0, 58.2, 46.2)),
    ("IDEFICS-9B open_mi (T16)", [0.00, 22.00, 52.00, 53.83, 59.17], FIVE, (0.0, 59.2, 42.1)),
    ("OpenFlamingo-9B operator induction (T18)", [5.00, 2.22, 1.67, 2.78, 7.78], EIGHT, (5.0, 7.8, -1.1)),
    ("IDEFICS2-8B CLEVR (T20)", [2.00, 51.00, 48.83, 43.83, 51.50], EIGHT, (2.0, 51.5, 43.0)),
    ("GILL fast counting (T28)", [34.17, 8.33, 3.33, 3.33, 7.50], FIVE, (34.2, 34.2, -26.3)),
    ("SEED-LLaMA-14B CoBSAT total (T24)", [5.50, 26.83, 33.33, 40.83, 43.83], EIGHT, (5.5, 43.8, 30.7)),
    ("LLaVA-OneVision-72B TextOCR (T19)", [48.50, 50.67, 51.17, 50.67, 51.67], EIGHT, (48.5, 51.7, 2.4)),
]


@pytest.mark.parametrize("name, acc, shots, table", PAPER_ROWS, ids=[r[0] for r in PAPER_ROWS])
def test_paper_tables(name: str, acc: list, shots: tuple, table: tuple) -> None:
    s = shot_summary(shots, acc)
    assert s["zero_shot"] == pytest.approx(table[0], abs=0.051)
    assert s["peak"] == pytest.approx(table[1], abs=0.051)
    assert s["efficiency"] == pytest.approx(table[2], abs=0.1)


def test_shot_summary_edges() -> None:
    assert shot_summary([0, 2], [50, 30])["efficiency"] == pytest.approx(-10)
    assert math.isnan(shot_summary([0], [12.0])["efficiency"])
    # the efficiency can never pass 100 - zero_shot (the front of the source's Fig. 14)
    s = shot_summary(FIVE, [20, 100, 100, 100, 100])
    assert s["zero_shot"] + s["efficiency"] <= 100
    with pytest.raises(ValueError, match="from 0"):
        shot_summary([1, 2], [3, 4])
    with pytest.raises(ValueError, match="strictly"):
        shot_summary([0, 2, 2], [3, 4, 5])
    with pytest.raises(ValueError, match="equal-length"):
        shot_summary([0, 1], [3])


def test_average_ranks() -> None:
    assert average_ranks([10, 30, 20]) == [3, 1, 2]
    assert average_ranks([5, 5, 1]) == [1.5, 1.5, 3]
    assert average_ranks([math.nan, 2, math.nan]) == [2.5, 1, 2.5]


def _rows(model: str, task: str, per_seed_correct: dict[int, dict[int, list[int]]]) -> list[dict]:
    rows = []
    for shots, seeds in per_seed_correct.items():
        for seed, correct in seeds.items():
            for q, c in enumerate(correct):
                rows.append({"model": model, "key": item_key(task, "image", "detailed", "direct", seed, shots, f"q{q}"),
                             "task": task, "shots": shots, "seed": seed, "variant": "image",
                             "description": "detailed", "cot": "direct", "correct": float(c),
                             "failed": 0.0, "overflow": 0.0})
    return rows


def test_accuracy_mean_and_population_std() -> None:
    rows = _rows("m", "clevr", {0: {0: [0, 0, 0, 0], 1: [0, 0, 0, 0]},
                                1: {0: [1, 1, 0, 0], 1: [1, 0, 0, 0], 2: [1, 1, 1, 0]}})
    rows[-1]["overflow"] = 1.0  # a context overflow stays in the denominator as a wrong answer
    rows[-1]["failed"] = 1.0
    per_seed, acc = accuracy_tables(rows)
    one = next(r for r in acc if r["shots"] == 1)
    assert [r["accuracy"] for r in per_seed if r["shots"] == 1] == [50, 25, 75]
    assert one["accuracy"] == pytest.approx(50)
    assert one["std"] == pytest.approx(np.std([50, 25, 75]))  # ddof 0
    assert one["seeds"] == 3 and one["queries"] == 4 and one["overflow"] == 1 and one["failed"] == 1
    assert one["ci_low"] <= one["accuracy"] <= one["ci_high"]
    # clustered by query: query means over seeds are 1, 2/3, 1/3, 0
    lo, hi = bootstrap_interval(np.array([1, 2 / 3, 1 / 3, 0]), "x")
    assert (lo, hi) == bootstrap_interval(np.array([1, 2 / 3, 1 / 3, 0]), "x")
    assert 0 <= lo < 50 < hi <= 100


def test_summary_ranks_capabilities() -> None:
    rows = (_rows("a", "clevr", {0: {0: [0, 0]}, 1: {0: [1, 1]}}) + _rows("b", "clevr", {0: {0: [1, 0]}, 1: {0: [1, 0]}})
            + _rows("a", "open_mi", {0: {0: [0, 0]}, 1: {0: [0, 1]}}) + _rows("b", "open_mi", {0: {0: [0, 0]}, 1: {0: [1, 1]}})
            + _rows("a", "cobsat", {0: {0: [0, 0]}, 1: {0: [1, 0]}}))
    _, acc = accuracy_tables(rows)
    summ = summary_table(acc)
    by = {(r["model"], r["task"]): r for r in summ}
    assert by[("a", "clevr")]["efficiency"] == pytest.approx(50)
    assert by[("b", "clevr")]["zero_shot"] == pytest.approx(50)
    assert by[("b", "clevr")]["efficiency"] == pytest.approx(0)
    ranks = {(r["model"], r["direction"]): r for r in rank_table(summ)}
    # clevr: a eff 50 > b 0; open_mi: a eff 25 < b 50 -> both average 1.5
    assert ranks[("a", "I2T")]["efficiency_rank"] == 1.5 and ranks[("b", "I2T")]["efficiency_rank"] == 1.5
    assert ranks[("a", "I2T")]["zero_shot_rank"] == 1.75  # clevr 2, open_mi tie 1.5
    assert ranks[("a", "T2I")]["tasks"] == 1
    caps = {(r["model"], r["capability"]): r for r in capability_table(summ)}
    assert caps[("a", "Fast Binding")]["efficiency"] == pytest.approx(25)  # open_mi only
    assert caps[("a", "Induction")]["tasks"] == 2  # clevr and cobsat
    assert caps[("a", "I2T")]["peak"] == pytest.approx((100 + 50) / 2)


def test_paired_differences() -> None:
    a = _rows("a", "clevr", {1: {0: [1, 1, 1, 0], 1: [1, 1, 0, 0]}})
    b = _rows("b", "clevr", {1: {0: [1, 0, 0, 0], 1: [1, 0, 0, 0]}})
    (row,) = paired_table(a + b)
    assert (row["model_a"], row["model_b"], row["queries"]) == ("a", "b", 4)
    # per query (mean over seeds): a = 1, 1, .5, 0; b = 1, 0, 0, 0 -> differences 0, 1, .5, 0
    assert row["difference"] == pytest.approx(37.5)
    assert 0 <= row["ci_low"] <= 37.5 <= row["ci_high"] <= 100
    same = paired_table(a + _rows("c", "clevr", {1: {0: [1, 1, 1, 0], 1: [1, 1, 0, 0]}}))
    assert same[0]["difference"] == 0 and same[0]["ci_low"] == same[0]["ci_high"] == 0
