"""Bad data and bad models: failures recorded with file, model, task and sample; run completes."""

from __future__ import annotations

import csv
import sqlite3

import pytest

from icl.data.contexts import split_ids
from icl.data.registry import get_dataset
from icl.models import register_model
from icl.models.registry import unregister_model
from icl.run.__main__ import main
from icl.store import Store
from tests.run._adapters import BadShape, Crashing

TASK = "edges"


def _args(data, out, models="identity,oracle", extra=()):
    return ["--fast", "--datasets", "scenes-a", "--tasks", TASK, "--models", models, "--data-root", str(data),
            "--out", str(out), "--no-plots", "--no-progress", "--qualitative", "0", *extra]


def _image_path(ds, sample_id):
    return next(p for p in (ds.root / "images").iterdir() if p.stem == sample_id)


def _rows(out):
    with Store(out / "store.sqlite") as store:
        return store.results(), store.failures()


def _corrupt(data_copy):
    ds = get_dataset("scenes-a", root=data_copy, fast=True)
    splits = split_ids(ds.ids(), 0, "scenes-a")
    query, context = splits["test"][0], splits["train"][0]
    bad_query, bad_context = _image_path(ds, query), _image_path(ds, context)
    bad_query.write_bytes(b"this is not a png")
    bad_context.write_bytes(bad_context.read_bytes()[:40])  # truncated
    return query, bad_query, context, bad_context


def test_corrupt_images_screened_at_plan_time(data_copy, tmp_path, capsys):
    query, bad_query, context, bad_context = _corrupt(data_copy)
    assert main(_args(data_copy, tmp_path / "out")) == 1
    err = capsys.readouterr().err
    assert "FAILED" in err and str(bad_query) in err and repr(query) in err and str(bad_context) in err

    rows, failures = _rows(tmp_path / "out")
    assert rows and all(r.status == "ok" for r in rows), "the rest of the run did not complete"
    assert query not in {r.key.query_id for r in rows}
    f = next(f for f in failures if f.query_id == query)
    assert f.stage == "data" and f.path == str(bad_query) and f.dataset == "scenes-a" and f.task == TASK
    assert any(f.query_id == context and f.path == str(bad_context) for f in failures)
    contexts = (tmp_path / "out" / "contexts.csv").read_text()
    assert f",{context}," not in contexts and f",{query}," not in contexts
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Failures" in report and str(bad_query) in report


def test_corrupt_images_found_while_executing(data_copy, tmp_path, capsys, monkeypatch):
    # Files that break after planning: the samples are planned, then fail while loading.
    import icl.run.plan as plan_mod
    from icl.run.screen import Screened

    def trusting(ds, tasks, ids, need=None):
        keep = list(ids)[:need] if need else list(ids)
        return Screened({t.name: keep for t in tasks}, {t.name: {} for t in tasks})

    monkeypatch.setattr(plan_mod, "screen", trusting)
    query, bad_query, context, bad_context = _corrupt(data_copy)
    assert main(_args(data_copy, tmp_path / "out")) == 1
    err = capsys.readouterr().err
    assert str(bad_query) in err and repr(query) in err

    rows, failures = _rows(tmp_path / "out")
    status = {}
    for r in rows:
        status.setdefault(r.key.query_id, set()).add(r.status)
    assert status[query] == {"failed"} and any(s == {"ok"} for s in status.values())
    f = next(f for f in failures if f.query_id == query)
    assert f.stage == "data" and f.path == str(bad_query) and f.task == TASK
    failed = [r for r in rows if r.status == "failed"]
    assert all(r.error for r in failed)
    # queries whose first context is the corrupt train image failed too, naming that file
    assert any(str(bad_context) in r.error for r in failed if r.key.query_id != query)
    assert any(f.path == str(bad_context) for f in failures)
    with open(tmp_path / "out" / "results.csv") as fh:
        assert any(int(r["n_failed"]) > 0 for r in csv.DictReader(fh))


def test_bad_shape_names_model_task_sample(fast_data, tmp_path, capsys):
    register_model("bad-shape-local", BadShape)
    try:
        assert main(_args(fast_data, tmp_path / "out", models="bad-shape-local,identity")) == 1
    finally:
        unregister_model("bad-shape-local")
    err = capsys.readouterr().err
    rows, failures = _rows(tmp_path / "out")
    bad = [r for r in rows if r.status == "failed"]
    assert bad and all(r.key.model == "bad-shape-local" for r in bad)
    for r in bad:
        assert "'bad-shape-local'" in r.error and f"'{TASK}'" in r.error and repr(r.key.query_id) in r.error
    assert f"[score] model bad-shape-local, dataset scenes-a, task {TASK}: {len(bad)} x, first: " in err
    assert bad[0].error in err
    assert {f.stage for f in failures} == {"score"}
    # every other prediction of the bad model was scored, and identity is untouched
    ok_bad = [r for r in rows if r.key.model == "bad-shape-local" and r.status == "ok"]
    assert ok_bad and all(r.status == "ok" for r in rows if r.key.model == "identity")


def test_crashing_model_recorded_others_run(fast_data, tmp_path, capsys):
    register_model("crashing-local", Crashing)
    try:
        assert main(_args(fast_data, tmp_path / "out", models="crashing-local,oracle")) == 1
    finally:
        unregister_model("crashing-local")
    assert "weights exploded" in capsys.readouterr().err
    rows, failures = _rows(tmp_path / "out")
    assert {r.status for r in rows if r.key.model == "crashing-local"} == {"failed"}
    assert {r.status for r in rows if r.key.model == "oracle"} == {"ok"}
    assert all(f.stage == "model" and "crashing-local" in f.message for f in failures)


@pytest.mark.parametrize("flag,value,known", [("--models", "nope", "oracle"), ("--tasks", "nope", TASK),
                                              ("--datasets", "nope", "scenes-a")])
def test_unknown_names_exit_2(fast_data, tmp_path, capsys, flag, value, known):
    args = _args(fast_data, tmp_path / "out")
    args[args.index(flag) + 1] = value
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "'nope'" in err and known in err


def test_store_rows_and_parallel_data_jobs(fast_data, tmp_path):
    assert main(_args(fast_data, tmp_path / "one")) == 0
    con = sqlite3.connect(tmp_path / "one" / "store.sqlite")
    n, n_ok = con.execute("SELECT COUNT(*), SUM(status='ok') FROM samples").fetchone()
    assert n == n_ok > 0
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    assert main(_args(fast_data, tmp_path / "two", extra=["--jobs", "2"])) == 0
    for name in ("results.csv", "ranks.csv", "contexts.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
