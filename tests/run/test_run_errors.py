"""Bad data and bad models: failures recorded with file, model, item and sample; the run completes."""

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
from tests.run.conftest import item_fields, score_rows

TASK = "edges"


def _args(data, out, models="identity,oracle", extra=()):
    return ["vibe", "--fast", "--datasets", "scenes-a", "--tasks", TASK, "--models", models, "--data-root", str(data),
            "--out", str(out), "--no-plots", "--no-progress", "--qualitative", "0", "--device", "cpu", *extra]


def _image_path(ds, sample_id):
    return next(p for p in (ds.root / "images").iterdir() if p.stem == sample_id)


def _failures(out):
    with Store(out / "store.sqlite") as store:
        return store.failures()


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
    assert "FAILED: 0 items failed, 2 data failures" in err and str(bad_query) in err and repr(query) in err

    rows, failures = score_rows(tmp_path / "out" / "store.sqlite"), _failures(tmp_path / "out")
    assert rows and all(r[2] == "ok" for r in rows), "the rest of the run did not complete"
    assert query not in {item_fields(r[0])[2] for r in rows}
    f = next(f for f in failures if f.path == str(bad_query))
    assert f.stage == "data" and repr(query) in f.message and "'scenes-a'" in f.message and TASK in f.message
    assert any(f.path == str(bad_context) and repr(context) in f.message for f in failures)
    contexts = (tmp_path / "out" / "contexts.csv").read_text()
    assert f",{context}," not in contexts and f",{query}," not in contexts
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Failures (2)" in report and str(bad_query) in report and str(bad_context) in report


def test_corrupt_images_found_while_executing(data_copy, tmp_path, capsys, monkeypatch):
    # Files that break after planning: the samples are planned, then fail while loading.
    import icl.benchmarks.vibe.plan as plan_mod
    from icl.benchmarks.vibe.screen import Screened

    def trusting(ds, tasks, ids, need=None):
        keep = list(ids)[:need] if need else list(ids)
        return Screened({t.name: keep for t in tasks}, {t.name: {} for t in tasks})

    monkeypatch.setattr(plan_mod, "screen", trusting)
    from icl.data.dataset import Dataset

    monkeypatch.setattr(Dataset, "precheck", lambda self, sample_id: None)  # files break after the plan
    query, bad_query, context, bad_context = _corrupt(data_copy)
    assert main(_args(data_copy, tmp_path / "out")) == 1
    err = capsys.readouterr().err
    assert str(bad_query) in err and repr(query) in err

    rows, failures = score_rows(tmp_path / "out" / "store.sqlite"), _failures(tmp_path / "out")
    status = {}
    for r in rows:
        status.setdefault(item_fields(r[0])[2], set()).add(r[2])
    assert status[query] == {"failed"} and any(s == {"ok"} for s in status.values())
    f = next(f for f in failures if f.path == str(bad_query))
    assert f.stage == "data" and f.item is not None and item_fields(f.item)[:3] == ("scenes-a", TASK, query)
    failed = [r for r in rows if r[2] == "failed"]
    assert all(r[3] == "data" and r[5] for r in failed)
    # queries whose contexts hold the corrupt train image failed too, naming that file
    assert any(str(bad_context) in r[5] for r in failed if item_fields(r[0])[2] != query)
    assert any(f.path == str(bad_context) for f in failures)
    with open(tmp_path / "out" / "vibe_results.csv") as fh:
        assert any(int(r["n_failed"]) > 0 for r in csv.DictReader(fh))


def test_bad_shape_names_model_and_item(fast_data, tmp_path, capsys):
    register_model("bad-shape-local", BadShape)
    try:
        assert main(_args(fast_data, tmp_path / "out", models="bad-shape-local,identity")) == 1
    finally:
        unregister_model("bad-shape-local")
    err = capsys.readouterr().err
    rows, failures = score_rows(tmp_path / "out" / "store.sqlite"), _failures(tmp_path / "out")
    bad = [r for r in rows if r[2] == "failed"]
    assert bad and all(r[1] == "bad-shape-local" for r in bad)
    assert len(bad) == -(-len([r for r in rows if r[1] == "identity"]) // BadShape.batch_size)  # one per batch
    for r in bad:
        assert r[3] == "invalid" and "model 'bad-shape-local' returned an invalid answer" in r[5]
        assert "expected an image of shape [H, W, 3], got shape [" in r[5]
    assert {(f.stage, f.model) for f in failures} == {("model", "bad-shape-local")}
    assert sorted(f.item for f in failures) == sorted(r[0] for r in bad)
    assert all(repr(f.item) in f.message for f in failures)  # the item key names dataset, task and sample
    assert f"[model] model bad-shape-local: {len(bad)} x, first: " in err and failures[0].message in err
    # every other answer of the bad model was scored, and identity is untouched
    assert [r for r in rows if r[1] == "bad-shape-local" and r[2] == "ok"]
    assert all(r[2] == "ok" for r in rows if r[1] == "identity")


def test_crashing_model_recorded_others_run(fast_data, tmp_path, capsys):
    register_model("crashing-local", Crashing)
    try:
        assert main(_args(fast_data, tmp_path / "out", models="crashing-local,oracle")) == 1
    finally:
        unregister_model("crashing-local")
    err = capsys.readouterr().err
    assert "weights exploded" in err
    # one failure policy: a model that fails its whole first batch is stopped with one line and
    # nothing of it is scored (no 0 in any mean); the other models run
    assert sum("STOPPED crashing-local" in line for line in err.splitlines()) == 1
    rows, failures = score_rows(tmp_path / "out" / "store.sqlite"), _failures(tmp_path / "out")
    assert not [r for r in rows if r[1] == "crashing-local"]
    assert {r[2] for r in rows if r[1] == "oracle"} == {"ok"}
    assert len(failures) == Crashing.batch_size  # the first batch only
    assert failures and all(f.stage == "model" and "crashing-local" in f.message and "weights exploded" in f.message
                            for f in failures)
    with Store(tmp_path / "out" / "store.sqlite") as store:
        assert store.count("responses", "failed") == len(failures)  # kept, asked again next time


@pytest.mark.parametrize("flag,value,known", [("--models", "qqqq", "oracle"), ("--tasks", "qqqq", TASK),
                                              ("--datasets", "qqqq", "scenes-a")])
def test_unknown_names_exit_2(fast_data, tmp_path, capsys, flag, value, known):
    args = _args(fast_data, tmp_path / "out")
    args[args.index(flag) + 1] = value
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "'qqqq'" in err and known in err and err.count("\n") == 1  # names what is known


def test_store_rows_and_batch_size_independence(fast_data, tmp_path):
    assert main(_args(fast_data, tmp_path / "one", models="copy-target,oracle")) == 0
    con = sqlite3.connect(tmp_path / "one" / "store.sqlite")
    n, n_ok = con.execute("SELECT COUNT(*), SUM(status='ok') FROM scores").fetchone()
    assert n == n_ok > 0 and con.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == n
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    # the batch size is not part of a model's identity (model_version), nor of its results
    assert main(_args(fast_data, tmp_path / "two", "copy-target,oracle", ["--model-arg", "batch_size=1"])) == 0
    assert (tmp_path / "one" / "contexts.csv").read_bytes() == (tmp_path / "two" / "contexts.csv").read_bytes()
    for name in ("results.csv", "vibe_results.csv", "ranks.csv"):
        one, two = (_table(tmp_path / d / name) for d in ("one", "two"))
        assert one and [{**r, "model": r["model"] + "[batch_size=1]"} for r in one] == two, name
    assert {r["model"] for r in _table(tmp_path / "one" / "ranks.csv")} == {"copy-target"}


def _table(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
