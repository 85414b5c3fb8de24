"""The one long results schema (icl.report.schema): ``python -m icl.run --fast`` writes
results.csv with exactly its columns for every benchmark, comparisons.csv and ``schema_version``;
each benchmark's long rows agree with its own wide table; the builder on hand-made score rows
(clusters, pooled ratios, failures, Holm over the pairs, row order); a results row's value split
by seed (what reproduction.csv's two-sample test reads) from the same grouping."""

from __future__ import annotations

import csv
import json
import math
import random

import pytest

from icl.report import stats
from icl.report.schema import (COLUMNS, COMPARISON_COLUMNS, SCHEMA_VERSION, Metric, ResultsSpec, common_tables,
                               comparison_rows, group_key, grouped, results_rows, values_by)
from icl.run.__main__ import main

BENCHMARKS = ("vibe", "best50", "vlicl", "cobsat", "vif")


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _f(text):
    return float(text) if text not in ("", None) else math.nan


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fast")
    assert main(["--fast", "--out", str(out), "--no-progress", "--no-plots"]) == 0
    return out


@pytest.mark.slow
def test_every_benchmark_writes_the_long_results_schema(fast_run):
    for name in BENCHMARKS:
        out = fast_run / f"{name}-fast"
        with open(out / "results.csv", newline="") as f:
            header = next(csv.reader(f))
        assert tuple(header) == COLUMNS, name
        rows = _csv(out / "results.csv")
        assert rows and {r["benchmark"] for r in rows} == {name}, name
        meta = json.loads((out / "results.json").read_text())
        assert meta["schema_version"] == SCHEMA_VERSION == 2 and "Holm" in meta["statistics"]["comparisons"]
        assert {r["protocol"] for r in rows} == {meta["protocol"]}
        assert all(r["direction"] in ("higher", "lower") and r["data"] for r in rows), name
        assert all("built-in" in r["data"] for r in rows), name  # --fast is never passed off as a release
        for r in rows:
            v, lo, hi = _f(r["value"]), _f(r["ci_low"]), _f(r["ci_high"])
            assert math.isnan(v) or lo - 1e-9 <= v <= hi + 1e-9, (name, r)
            assert int(r["n"]) >= 1 and int(r["n_failed"]) >= 0
        comps = _csv(out / "comparisons.csv")
        with open(out / "comparisons.csv", newline="") as f:
            assert tuple(next(csv.reader(f))) == COMPARISON_COLUMNS
        assert len(comps) == len(meta["comparisons"]), name
        for c in comps:
            assert c["model_a"] < c["model_b"] and float(c["p_value"]) <= float(c["p_holm"]) + 1e-12


@pytest.mark.slow
def test_long_rows_agree_with_each_benchmark_s_own_tables(fast_run):
    # vibe: the means and intervals of vibe_results.csv (Aggregate.ci_low/ci_high), bit for bit
    vibe = fast_run / "vibe-fast"
    wide = {(r["model"], r["task"], r["dataset"], r["shots"], r["metric"]): r for r in _csv(vibe / "vibe_results.csv")}
    long = _csv(vibe / "results.csv")
    assert len(long) == sum(1 for k in wide if k[4] != "encoding_lossless")
    for r in long:
        w = wide[(r["model"], r["task"], r["subset"], r["shots"], r["metric"])]
        assert (r["value"], r["ci_low"], r["ci_high"]) == (w["mean"], w["ci_low"], w["ci_high"])
        assert r["direction"] == ("lower" if r["metric"] in ("rmse", "abs_rel", "lpips") else "higher")
    ranks = _csv(vibe / "ranks.csv")
    assert all(_f(r["rank_low"]) <= _f(r["rank"]) <= _f(r["rank_high"]) for r in ranks if r["rank"] != "nan")
    # best50: the pooled ratios of best50_results.csv
    b50 = fast_run / "best50-fast"
    pooled = {(r["model"], r["k"]): r for r in _csv(b50 / "best50_results.csv")
              if r["kind"] == "pooled" and r["group"] == "all"}
    for r in _csv(b50 / "results.csv"):
        if r["task"] == "all":
            assert _f(r["value"]) == pytest.approx(_f(pooled[(r["model"], r["shots"])][r["metric"]]), abs=1e-12)
    # vlicl: accuracy and its clustered interval of accuracy.csv
    acc = {(r["model"], r["task"], r["shots"], "/".join(r[c] for c in ("variant", "description", "cot", "prompt",
                                                                        "repeat"))): r
           for r in _csv(fast_run / "vlicl-fast" / "accuracy.csv")}
    for r in _csv(fast_run / "vlicl-fast" / "results.csv"):
        if r["metric"] == "accuracy":
            a = acc[(r["model"], r["task"], r["shots"], r["subset"])]
            assert _f(r["value"]) == pytest.approx(_f(a["accuracy"]), abs=1e-9)
            assert (r["ci_low"], r["ci_high"]) == (a["ci_low"], a["ci_high"]) and r["unit"] == "%"
    vl_ranks = _csv(fast_run / "vlicl-fast" / "ranks.csv")
    assert vl_ranks and all(_f(r["peak_rank_low"]) <= _f(r["peak_rank"]) <= _f(r["peak_rank_high"])
                            for r in vl_ranks)
    # cobsat: overall accuracy of accuracy.csv; vif: the criteria table's means
    cob = {(r["model"], r["task"], r["shots"]): r for r in _csv(fast_run / "cobsat-fast" / "accuracy.csv")}
    for r in _csv(fast_run / "cobsat-fast" / "results.csv"):
        assert _f(r["value"]) == pytest.approx(_f(cob[(r["model"], r["task"], r["shots"])][r["metric"]]))
    crit = {(r["model"], r["variant"]): r for r in _csv(fast_run / "vif-fast" / "criteria.csv")}
    for r in _csv(fast_run / "vif-fast" / "results.csv"):
        assert _f(r["value"]) == pytest.approx(_f(crit[(r["model"], r["subset"])][r["metric"]]), nan_ok=True)


def _rows():
    """Two models, one task at two shot counts, three queries with two seeds each; model b
    fails one item (no score)."""
    rows = []
    for model, offset in (("a", 0.0), ("b", 0.25)):
        for shots in (0, 2):
            for q in range(3):
                for seed in range(2):
                    key = f"t/{shots}/{q}/{seed}"
                    if model == "b" and key == "t/2/0/1":
                        rows.append({"model": model, "key": key, "status": "failed", "task": "t", "shots": shots,
                                     "query": f"q{q}", "seed": seed})
                        continue
                    rows.append({"model": model, "key": key, "status": "ok", "task": "t", "shots": shots,
                                 "query": f"q{q}", "seed": seed, "acc": float((q + seed) % 2) * 0.5 + offset,
                                 "tp": float(q), "pred": 2.0})
    return rows


SPEC = ResultsSpec(task="task", shots="shots", cluster="query", metrics=(
    Metric("accuracy", unit="%", scale=100.0, column="acc"), Metric("precision", column="tp", denominator="pred")))


def test_builder_on_hand_rows_counts_clusters_and_pools_ratios():
    rows = _rows()
    out = results_rows("demo", "demo-1", rows, SPEC, {"d": "built-in synthetic"}, resamples=500)
    assert [tuple(r) for r in out] == [COLUMNS] * len(out)
    cell = {(r["model"], r["shots"], r["metric"]): r for r in out}
    a0 = cell[("a", 0, "accuracy")]
    assert a0["value"] == pytest.approx(100 * 0.25) and a0["n"] == 6 and a0["n_failed"] == 0 and a0["unit"] == "%"
    assert a0["data"] == "d: built-in synthetic" and a0["subset"] == "all"
    b2 = cell[("b", 2, "accuracy")]
    assert b2["n"] == 5 and b2["n_failed"] == 1
    p = cell[("a", 0, "precision")]
    assert p["value"] == pytest.approx((0 + 0 + 1 + 1 + 2 + 2) / 12)  # sum(tp) / sum(pred)
    # the interval is the clustered one of icl.report.stats with the group's identity
    mine = [r for r in rows if r["model"] == "a" and r["shots"] == 0]
    want = stats.mean_ci([r["acc"] for r in mine], [r["query"] for r in mine], scale=100.0, benchmark="demo",
                         identity=stats.group_identity("t", "all", 0, "accuracy"), resamples=500)
    assert (a0["ci_low"], a0["ci_high"]) == (want.ci_low, want.ci_high)


def test_builder_does_not_depend_on_row_order_and_holm_runs_over_the_pairs():
    rows = _rows()
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    assert results_rows("demo", "demo-1", shuffled, SPEC, {}, 500) == results_rows("demo", "demo-1", rows, SPEC, {}, 500)
    comps = comparison_rows("demo", "demo-1", rows, SPEC, 500)
    assert comps == comparison_rows("demo", "demo-1", shuffled, SPEC, 500)
    acc = [c for c in comps if c["metric"] == "accuracy"]
    assert [(c["model_a"], c["model_b"], c["shots"]) for c in acc] == [("a", "b", 0), ("a", "b", 2)]
    assert acc[0]["difference"] == pytest.approx(-25.0) and acc[0]["ci_high"] < 0
    assert all(c["p_holm"] == c["p_value"] for c in comps)  # one pair per row group: a family of one
    # three models: Holm over the three pairs of each row group
    third = [{**r, "model": "c"} for r in rows if r["model"] == "a"]
    comps = [c for c in comparison_rows("demo", "demo-1", rows + third, SPEC, 500)
             if c["metric"] == "accuracy" and c["shots"] == 0]
    assert len(comps) == 3
    assert [c["p_holm"] for c in comps] == pytest.approx(stats.holm([c["p_value"] for c in comps]))


def test_default_spec_reports_every_numeric_score_column():
    rows = [{"model": "m", "key": f"k{i}", "status": "ok", "parity": "even", "seed": i % 3,
             "accuracy": float(i % 2)} for i in range(6)]

    class Plugin:  # what common_tables reads of a benchmark
        name, protocol, results_spec = "parity", "parity-1", ResultsSpec()

        def result_rows(self, rows):
            return rows

        def data_origin(self):
            return {"numbers": "built-in"}

    out = common_tables(Plugin(), rows, {"parity", "seed"})["results"]  # seed: a group column, no metric
    assert [(r["task"], r["shots"], r["metric"], r["value"], r["direction"], r["data"]) for r in out] == [
        ("all", "", "accuracy", 0.5, "higher", "numbers: built-in")]
    with pytest.raises(ValueError, match="direction"):
        Metric("x", direction="up")


def test_values_by_splits_each_results_row_as_results_rows_computes_it():
    """``values_by`` on a row set with several seeds, two prompt lists (a subset column), a
    pooled task, shots given as text on some rows, and a pooled ratio metric: each part is the
    value ``results_rows`` gives the same rows alone, for every results.csv row."""
    spec = ResultsSpec(task="task", subset=("prompt",), shots="shots", cluster="query", pooled_task="pooled",
                       metrics=(Metric("accuracy", scale=100.0, column="acc"),
                                Metric("precision", column="tp", denominator="pred")))
    rows = []
    for task in ("t1", "t2"):
        for prompt in ("p0", "p1"):
            for seed in range(3):
                for q in range(4):
                    shots = 2 if q % 2 else "2"  # a stored row may carry its shots as text
                    rows.append({"model": "m", "key": f"{task}/{prompt}/{seed}/{q}", "status": "ok", "task": task,
                                 "prompt": prompt, "shots": shots, "seed": seed, "query": f"q{q}",
                                 "acc": float((q + seed + len(prompt)) % 3 == 0), "tp": float(q + seed),
                                 "pred": float(1 + q * (seed + 1))})
    table = results_rows("demo", "demo-1", rows, spec, {}, resamples=50)
    groups = grouped(rows, spec)
    assert len(table) == len(groups) * 2 and {r["task"] for r in table} == {"t1", "t2", "pooled"}
    metric = {m.name: m for m in spec.metrics}
    for r in table:
        group = groups[group_key(r["task"], r["subset"], r["shots"], r["model"])]
        whole = values_by(group, spec, metric[r["metric"]], "model")  # one part: the row itself
        assert whole == {"m": pytest.approx(r["value"], abs=1e-12)}
        per_seed = values_by(group, spec, metric[r["metric"]], "seed")
        assert sorted(per_seed) == ["0", "1", "2"]
        for seed, value in per_seed.items():
            alone = [x for x in rows if str(x["seed"]) == seed]
            want = next(a for a in results_rows("demo", "demo-1", alone, spec, {}, resamples=50)
                        if (a["task"], a["subset"], a["metric"]) == (r["task"], r["subset"], r["metric"]))
            assert value == pytest.approx(want["value"], abs=1e-12)
    # the pooled ratio, not the mean of the column: the two differ on these rows
    pooled = next(r for r in table if (r["task"], r["subset"], r["metric"]) == ("t1", "p0", "precision"))
    seed0 = values_by(groups[group_key("t1", "p0", pooled["shots"], "m")], spec, metric["precision"], "seed")["0"]
    tp = [float(q) for q in range(4)]
    pred = [float(1 + q) for q in range(4)]
    assert seed0 == pytest.approx(sum(tp) / sum(pred)) and seed0 != pytest.approx(sum(t / p for t, p in zip(tp, pred)) / 4)
