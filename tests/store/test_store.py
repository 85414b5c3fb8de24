import math
import sqlite3

import pytest

from icl.store import ComputeRecord, Failure, SampleKey, SampleResult, Store


def _key(q="q1", model="oracle", shots=1, ctx="abc"):
    return SampleKey("vibe-1", "ds", "flip", q, ctx, model, "1", shots, 0)


def test_wal_mode_and_roundtrip(tmp_path):
    path = tmp_path / "sub" / "store.sqlite"
    with Store(path) as store:
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        metrics = {"psnr": math.inf, "lpips": math.nan, "ssim": 0.5}
        store.write_batch([SampleResult(_key("q2"), "ok", metrics, None, 0.1, 0.2, "r1"),
                           SampleResult(_key("q1"), "failed", {}, "boom", run_id="r1")])
        rows = store.results()
    assert [r.key.query_id for r in rows] == ["q1", "q2"]  # sorted by key
    assert rows[0].status == "failed" and rows[0].error == "boom"
    m = rows[1].metrics
    assert m["psnr"] == math.inf and math.isnan(m["lpips"]) and m["ssim"] == 0.5
    assert rows[1].model_s == 0.1 and rows[1].score_s == 0.2
    with Store(path) as again:  # reopening keeps everything
        assert again.count() == 2 and again.count("ok") == 1


def test_statuses_and_key_filter(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        store.write_batch([SampleResult(_key("q1"), "ok", {"a": 1.0}),
                           SampleResult(_key("q2", ctx="def"), "failed", {}, "x"),
                           SampleResult(_key("q1", model="identity"), "ok", {"a": 0.0}),
                           SampleResult(_key("q1", shots=2), "ok", {"a": 2.0})])
        assert store.statuses(_key()) == {("q1", "abc"): "ok", ("q2", "def"): "failed"}
        assert store.statuses(_key(model="identity")) == {("q1", "abc"): "ok"}
        assert store.statuses(_key(shots=3)) == {}
        # results of another dataset or task version never count as done
        other = SampleKey("vibe-1", "ds", "flip", "q1", "abc", "oracle", "1", 1, 0, "v2", "")
        assert store.statuses(other) == {}
        store.write_batch([SampleResult(other, "ok", {"a": 9.0})])
        assert store.statuses(other) == {("q1", "abc"): "ok"}
        assert store.results([_key("q1")])[0].metrics == {"a": 1.0}
        sel = store.results([_key("q1", shots=2), _key("q9")])
        assert [r.metrics["a"] for r in sel] == [2.0]


def test_rewrite_replaces_failed_row(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        store.write_batch([SampleResult(_key(), "failed", {}, "first try")])
        store.write_batch([SampleResult(_key(), "ok", {"a": 3.0})])
        (row,) = store.results()
        assert row.status == "ok" and row.error is None and store.count() == 1


def test_batch_is_atomic(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(ValueError, match="status"):
            store.write_batch([SampleResult(_key("q1"), "ok", {}), SampleResult(_key("q2"), "weird", {})])
        assert store.count() == 0
        # an error inside the transaction (a failure without message, after the sample rows
        # were inserted) rolls the whole batch back
        with pytest.raises(sqlite3.IntegrityError):
            store.write_batch([SampleResult(_key("q1"), "ok", {})], [Failure("data", None)])
        assert store.count() == 0 and store.failures() == []
        store.write_batch([SampleResult(_key("q1"), "ok", {})], [Failure("data", "bad file", path="/x.png")])
        assert store.count() == 1 and len(store.failures()) == 1


def test_failures_and_compute(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        r1 = store.start_run({"argv": ["--fast"]})
        r2 = store.start_run({})
        assert r1 != r2 and store.run_ids() == [r1, r2]
        store.add_failures([Failure("data", "corrupt", None, "ds", "flip", "q1", None, "/d/q1.png", r1),
                            Failure("score", "bad shape", "m", "ds", "flip", "q2", 1, None, r2)])
        assert [f.message for f in store.failures()] == ["corrupt", "bad shape"]
        (f,) = store.failures(r1)
        assert f.path == "/d/q1.png" and f.query_id == "q1" and f.stage == "data"
        store.add_compute([ComputeRecord(r1, "oracle", "model", "cpu", 10, 0.5, 1024, "process-max-rss"),
                           ComputeRecord(r2, "oracle", "score", "cpu", 4, 0.0, None, None)])
        recs = store.compute([r1])
        assert len(recs) == 1 and recs[0].samples_per_s == 20.0
        assert math.isnan(store.compute([r2])[0].samples_per_s)


def test_schema_version_mismatch(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(RuntimeError, match="schema version 99"):
        Store(path)
