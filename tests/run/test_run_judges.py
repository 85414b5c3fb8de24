"""Several judges per run (``--judge`` repeated): judge answers stored and linked per judge, one
score per (item, model, judge), a judge added later asks only that judge (the model's stored
answers reused, no model call), rows with a ``judge`` column, every judge in results.json,
``rescore`` reading them all (and the one ``judge_id`` of runs made before). Driven through
``vif`` (the benchmark taking several judges, PROTOCOL §5) with its deterministic spatial judge
and ``logging-judge`` (``tests/run/_adapters.py``), which records every question it is sent."""

from __future__ import annotations

import csv
import json
import math
import sqlite3

import pytest

from icl.benchmarks.base import Benchmark
from icl.benchmarks.vif.rubric import CRITERIA
from icl.models import register_model
from icl.models.registry import unregister_model
from icl.run.__main__ import main, parse_judges
from icl.run.errors import ConfigError
from tests.run._adapters import LoggingJudge

SPATIAL = "vif-spatial-judge"
B = "logging-judge:score=4"
B_LABEL = "logging-judge[score=4]"


@pytest.fixture
def judge_log(tmp_path, monkeypatch):
    log = tmp_path / "judge.log"
    monkeypatch.setenv("ICL_TEST_JUDGE_LOG", str(log))
    register_model(LoggingJudge.name, LoggingJudge, replace=True)
    yield log
    unregister_model(LoggingJudge.name)


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _meta(out):
    return json.loads((out / "results.json").read_text())


def _stages(meta):
    return {(c["model"], c["stage"]) for c in meta["compute"]}


def _base(out):
    return ["vif", "--fast", "--tasks", "syn000,syn001,syn002", "--variants", "visual,ti-dense", "--out", str(out),
            "--no-progress", "--no-plots"]


def test_a_judge_added_later_asks_only_that_judge(tmp_path, judge_log, capsys):
    out = tmp_path / "out"
    assert main([*_base(out), "--judge", SPATIAL]) == 0
    first = _meta(out)
    n = first["plan"]["items"]
    assert n == 5 and first["counts"]["computed"] == n and not judge_log.exists()

    assert main([*_base(out), "--judge", SPATIAL, "--judge", B]) == 0
    meta = _meta(out)
    # the collage's answers and the spatial judge's scores come from the store: only B is asked
    asked = judge_log.read_text().splitlines()
    assert sorted(asked) == sorted(f"vif-synthetic/{k}" for k in _item_keys(out))
    c = meta["counts"]
    assert (c["planned"], c["skipped"], c["computed"], c["failed"]) == (2 * n, n, n, 0)
    assert c["model_calls"] == math.ceil(n / LoggingJudge.batch_size)  # B's batches, nothing else
    stages = _stages(meta)
    assert (B_LABEL, "judge") in stages and (B_LABEL, "model") in stages
    assert not {s for s in stages if s[0] == SPATIAL or s in (("collage", "model"), ("collage", "load"))}
    assert ("collage", "score") in stages  # B's scores
    assert [j["label"] for j in meta["judges"]] == [SPATIAL, B_LABEL]
    assert [j["identity"]["adapter"] for j in meta["judges"]] == [SPATIAL, "logging-judge"]
    assert meta["judge_id"] == meta["judges"][0]["judge_id"] != meta["judges"][1]["judge_id"]
    assert meta["config"]["judges"] == [{"name": SPATIAL, "args": {}}, {"name": "logging-judge", "args": {"score": 4}}]
    report = (out / "report.md").read_text()
    assert f"**judge** `{SPATIAL}`" in report and f"**judge** `{B_LABEL}`" in report

    # judge answers linked per judge: the same (item|model, judge:0) under each judge's id
    links = _judge_links(out / "store.sqlite")
    ids = [j["judge_id"] for j in meta["judges"]]
    assert {k for k in links} == set(ids) and links[ids[0]] == links[ids[1]] and len(links[ids[0]]) == n

    # the headline: per item and criterion the mean of the two judges (B gives 4 everywhere; the
    # spatial judge gives reference consistency and cleanliness 10 to the collage and no text
    # following, coherence or quality), the average the mean of those six
    by_judge = {(r["judge"], r["variant"]): r for r in _rows(out / "criteria_by_judge.csv")}
    assert set(by_judge) == {(j, v) for j in (SPATIAL, B_LABEL) for v in ("visual", "ti-dense")}
    for variant in ("visual", "ti-dense"):
        head = next(r for r in _rows(out / "criteria.csv") if r["variant"] == variant)
        spatial_via = float(by_judge[(SPATIAL, variant)]["visual_instruction_adherence"])
        via = (spatial_via + 4) / 2
        assert float(head["visual_instruction_adherence"]) == pytest.approx(via)
        assert float(head["reference_consistency"]) == pytest.approx(7.0)
        assert float(head["visual_instruction_cleanliness"]) == pytest.approx(7.0)
        assert float(head["scene_coherence"]) == float(head["visual_quality"]) == 4.0
        assert float(head["average"]) == pytest.approx((4 + 7 + via + 7 + 4 + 4) / 6)
        assert math.isnan(float(by_judge[(SPATIAL, variant)]["average"]))
        assert float(by_judge[(B_LABEL, variant)]["average"]) == 4.0

    # a third run computes nothing; rescore reads both judges' stored answers, asks no one
    capsys.readouterr()
    assert main([*_base(out), "--judge", SPATIAL, "--judge", B]) == 0
    assert f"0 scores (item x judge) computed, {2 * n} already in the store" in capsys.readouterr().out
    before = {name: (out / name).read_text() for name in ("criteria.csv", "criteria_by_judge.csv")}
    assert main(["rescore", str(out)]) == 0
    assert {name: (out / name).read_text() for name in before} == before
    assert judge_log.read_text().splitlines() == asked
    rescored = _meta(out)
    assert rescored["judges"] == meta["judges"] and rescored["counts"]["computed"] == 2 * n


def _item_keys(out):
    con = sqlite3.connect(f"file:{out / 'store.sqlite'}?mode=ro", uri=True)
    try:
        return sorted({k for (k,) in con.execute("SELECT item_key FROM scores")})
    finally:
        con.close()


def _judge_links(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out: dict[str, set] = {}
        for model_id, key, step in con.execute("SELECT model_id, item_key, step FROM links WHERE step LIKE 'judge:%'"):
            out.setdefault(model_id, set()).add((key, step))
        return out
    finally:
        con.close()


def test_a_run_of_an_earlier_version_still_rescores(tmp_path):
    """results.json as runs made before several judges wrote it (``config.judge``, ``judge``,
    ``judge_id``; no ``judges``): rescore finds the one judge's answers and scores."""
    out = tmp_path / "out"
    assert main(_base(out)) == 0  # the default judge
    meta = _meta(out)
    before = (out / "criteria.csv").read_text()
    old = dict(meta)
    old.pop("judges")
    old["config"] = {k: v for k, v in meta["config"].items() if k != "judges"} | {"judge": None}
    (out / "results.json").write_text(json.dumps(old))
    assert main(["rescore", str(out)]) == 0
    assert (out / "criteria.csv").read_text() == before
    again = _meta(out)
    assert [j["label"] for j in again["judges"]] == [SPATIAL] and again["judge_id"] == meta["judge_id"]
    assert again["counts"]["computed"] == meta["plan"]["items"]
    assert {r["judge"] for r in _rows(out / "criteria_by_judge.csv")} == {SPATIAL}


def test_several_judges_refused_where_one_is_taken(tmp_path, capsys):
    assert main(["cobsat", "--fast", "--out", str(tmp_path / "c"), "--judge", "cobsat-judge",
                 "--judge", "cobsat-judge:batch_size=2"]) == 2
    assert "benchmark 'cobsat' takes 1 judge(s); got 2 (cobsat-judge, cobsat-judge)" in capsys.readouterr().err
    assert main([*_base(tmp_path / "v"), "--judge", f"{SPATIAL},{SPATIAL}"]) == 2
    assert f"--judge lists {SPATIAL!r} twice" in capsys.readouterr().err
    assert not (tmp_path / "c").exists() and not (tmp_path / "v").exists()


def test_check_judge_declares_how_many():
    from icl.benchmarks.cobsat.benchmark import CoBSAT
    from icl.benchmarks.vif.benchmark import VIF

    class OneJudgeVIF(VIF):  # the declaration alone decides
        max_judges = 1

    vif, one = VIF(VIF.fast_config()), OneJudgeVIF(VIF.fast_config())
    vif.check_judge((SPATIAL, "a", "b"))
    for judges in (None, SPATIAL, (SPATIAL,)):  # none, one name as earlier versions passed it, a tuple
        one.check_judge(judges)
    with pytest.raises(ValueError, match="benchmark 'vif' takes 1 judge"):
        one.check_judge((SPATIAL, "b"))
    with pytest.raises(ValueError, match="benchmark 'cobsat' takes 1 judge"):
        CoBSAT(CoBSAT.fast_config()).check_judge(("a", "b"))
    assert Benchmark.max_judges == 1 and CoBSAT.max_judges == 1 and VIF.max_judges is None


def test_judges_from_flags_and_run_toml(tmp_path):
    assert [s.label for s in parse_judges(["a", "b:x=1,y=2"])] == ["a", "b[x=1,y=2]"]
    assert [s.label for s in parse_judges("a,b")] == ["a", "b"]
    assert parse_judges(None) == []
    with pytest.raises(ConfigError, match="judge must be a model spec or a list of them"):
        parse_judges(3, "run.toml")
    toml = tmp_path / "run.toml"
    toml.write_text(f'judge = ["{SPATIAL}", "logging-judge:score=4"]\n')
    from icl.benchmarks.vif.benchmark import VIF
    from icl.run.__main__ import build_config, common_parser

    args = common_parser("icl.run").parse_args(["--config", str(toml)])
    assert [j.label for j in build_config("vif", args, VIF, []).judges] == [SPATIAL, B_LABEL]
    args = common_parser("icl.run").parse_args(["--config", str(toml), "--judge", "x"])
    assert [j.label for j in build_config("vif", args, VIF, []).judges] == ["x"]  # the flag wins


def test_rows_carry_the_judge_column(tmp_path, judge_log):
    """From Python (``icl.evaluate(judge=[...])``): one row per item and judge, named by its label."""
    import icl

    res = icl.evaluate("vif", fast=True, tasks="syn000", variants="visual", judge=[SPATIAL, B],
                       out=tmp_path / "out", plots=False, table="criteria_by_judge")
    assert sorted(r["judge"] for r in res) == sorted([SPATIAL, B_LABEL])
    rows = res.outcome.rows
    assert sorted(r["judge"] for r in rows) == sorted([SPATIAL, B_LABEL]) and {r["key"] for r in rows} == {
        "synthetic/visual/syn000"}
    assert all(set(CRITERIA) <= set(r) for r in rows)
