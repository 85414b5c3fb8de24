import math
import sqlite3

import pytest

from icl.store import ComputeRecord, Failure, Response, Score, ScoreKey, Store, StoreError
from icl.store.sqlite import SCHEMA_VERSION


def _key(item="q1", model="m-oracle", judge="", scorer="1", protocol="vibe-1"):
    return ScoreKey("vibe", protocol, item, model, judge, scorer)


def test_wal_mode_and_score_roundtrip(tmp_path):
    path = tmp_path / "sub" / "store.sqlite"
    with Store(path) as store:
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        metrics = {"psnr": math.inf, "lpips": math.nan, "ssim": 0.5}
        store.write_batch(scores=[Score(_key("q2"), "ok", metrics, None, None, 0.1, 0.2, "r1"),
                                  Score(_key("q1"), "failed", {}, "boom", "error", run_id="r1")])
        rows = store.scores([_key("q1"), _key("q9"), _key("q2")])
    assert [r.key.item_key for r in rows] == ["q1", "q2"]  # the order of the keys, absent ones left out
    assert rows[0].status == "failed" and rows[0].error == "boom" and rows[0].reason == "error"
    m = rows[1].metrics
    assert m["psnr"] == math.inf and math.isnan(m["lpips"]) and m["ssim"] == 0.5
    assert rows[1].model_s == 0.1 and rows[1].score_s == 0.2 and rows[1].run_id == "r1"
    with Store(path) as again:  # reopening keeps everything
        assert again.count() == 2 and again.count("scores", "ok") == 1 and again.count("responses") == 0
        with pytest.raises(ValueError, match="table"):
            again.count("models")


def test_responses_and_links_roundtrip(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        png = bytes(range(256)) * 3
        store.write_batch(responses=[Response("h1", "m1", "ok", "png", png, seconds=0.5, run_id="r"),
                                     Response("h2", "m1", "ok", "text", "a cat", run_id="r"),
                                     Response("h3", "m1", "failed", "none", None, "timed out", "timeout"),
                                     Response("h1", "m2", "ok", "text", "other model")],
                          links=[("item-a", "m1", "answer:0", "h1"), ("item-a", "m1", "answer:1", "h2"),
                                 ("item-b", "m1", "answer:0", "h3"), ("item-a", "m2", "answer:0", "h1")])
        got = store.responses(["h1", "h2", "h3", "h4", "h1"], "m1")
        assert set(got) == {"h1", "h2", "h3"}
        assert got["h1"].body == png and isinstance(got["h1"].body, bytes) and got["h1"].seconds == 0.5
        assert got["h2"].kind == "text" and got["h2"].body == "a cat"
        assert (got["h3"].status, got["h3"].reason, got["h3"].error, got["h3"].body) == \
            ("failed", "timeout", "timed out", None)
        assert store.responses(["h1"], "m2")["h1"].body == "other model"  # keyed by model identity too
        assert store.links(["item-a", "item-b", "item-c"], "m1") == {
            "item-a": {"answer:0": "h1", "answer:1": "h2"}, "item-b": {"answer:0": "h3"}}
        # a later answer to the same request replaces the failed one
        store.write_batch(responses=[Response("h3", "m1", "ok", "text", "late")])
        assert store.responses(["h3"], "m1")["h3"].status == "ok" and store.count("responses") == 4
        with pytest.raises(ValueError, match="status"):
            store.write_batch(responses=[Response("h9", "m1", "maybe", "text", "x")])


def test_done_is_keyed_by_protocol_model_judge_and_scorer(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        store.write_batch(scores=[Score(_key("q1"), "ok", {"a": 1.0}),
                                  Score(_key("q2"), "failed", {}, "x"),
                                  Score(_key("q1", model="m-id"), "ok", {"a": 0.0}),
                                  Score(_key("q3", judge="j1"), "ok", {"a": 2.0})])
        assert store.done("vibe", "vibe-1", "m-oracle", "", "1") == {"q1"}  # failed items are not done
        assert store.done("vibe", "vibe-1", "m-id", "", "1") == {"q1"}
        assert store.done("vibe", "vibe-1", "m-oracle", "j1", "1") == {"q3"}
        # another scorer version, protocol or benchmark never counts as done
        assert store.done("vibe", "vibe-1", "m-oracle", "", "2") == set()
        assert store.done("vibe", "vibe-2", "m-oracle", "", "1") == set()
        assert store.done("best50", "vibe-1", "m-oracle", "", "1") == set()
        store.write_batch(scores=[Score(_key("q1", scorer="2"), "ok", {"a": 9.0})])
        assert store.done("vibe", "vibe-1", "m-oracle", "", "2") == {"q1"}
        assert store.scores([_key("q1")])[0].metrics == {"a": 1.0}
        assert [s.metrics["a"] for s in store.scores([_key("q1", scorer="2"), _key("q9")])] == [9.0]


def test_rewrite_replaces_failed_row(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        store.write_batch(scores=[Score(_key(), "failed", {}, "first try", "error")])
        store.write_batch(scores=[Score(_key(), "ok", {"a": 3.0})])
        (row,) = store.scores([_key()])
        assert row.status == "ok" and row.error is None and row.reason is None and store.count() == 1


def test_batch_is_atomic(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(ValueError, match="status"):
            store.write_batch(scores=[Score(_key("q1"), "ok", {}), Score(_key("q2"), "weird", {})])
        assert store.count() == 0
        # an error inside the transaction (a failure without message, after the response and
        # score rows were inserted) rolls the whole batch back
        with pytest.raises(sqlite3.IntegrityError):
            store.write_batch([Response("h", "m", "ok", "text", "x")], [("q1", "m", "answer:0", "h")],
                              [Score(_key("q1"), "ok", {})], [Failure("data", None)])
        assert store.count() == 0 and store.count("responses") == 0 and store.failures() == []
        assert store.links(["q1"], "m") == {}
        store.write_batch(scores=[Score(_key("q1"), "ok", {})], failures=[Failure("data", "bad file", path="/x.png")])
        assert store.count() == 1 and len(store.failures()) == 1


def test_runs_models_failures_and_compute(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        r1 = store.start_run({"argv": ["--fast"]})
        r2 = store.start_run({})
        assert r1 != r2 and store.run_ids() == [r1, r2]
        store.put_model("m1", "painter[dtype=bf16]", {"adapter": "painter", "precision": "bf16"})
        store.put_model("m1", "painter[dtype=bf16]", {"adapter": "painter", "precision": "bf16", "v": 2})
        assert store.models() == {"m1": ("painter[dtype=bf16]", {"adapter": "painter", "precision": "bf16", "v": 2})}
        store.add_failures([Failure("data", "corrupt", None, None, "/d/q1.png", r1),
                            Failure("model", "bad shape", "m", "vibe-item/q2", None, r2)])
        assert [f.message for f in store.failures()] == ["corrupt", "bad shape"]
        (f,) = store.failures(r1)
        assert (f.stage, f.path, f.item, f.model, f.run_id) == ("data", "/d/q1.png", None, None, r1)
        (g,) = store.failures(r2)
        assert (g.stage, g.model, g.item) == ("model", "m", "vibe-item/q2")
        store.add_compute([ComputeRecord(r1, "oracle", "model", "cpu", 10, 0.5, 1024, "process-max-rss"),
                           ComputeRecord(r2, "oracle", "score", "cpu", 4, 0.0, None, None)])
        recs = store.compute([r1])
        assert len(recs) == 1 and recs[0].samples_per_s == 20.0 and recs[0].peak_memory_bytes == 1024
        assert math.isnan(store.compute([r2])[0].samples_per_s) and len(store.compute()) == 2


def test_schema_version_mismatch(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")  # a store of the old runner
    con.commit()
    con.close()
    with pytest.raises(StoreError, match=f"schema version 1, this icl writes version {SCHEMA_VERSION}.*--out"):
        Store(path)
    assert issubclass(StoreError, RuntimeError)


# The version-2 schema exactly as icl wrote it before compute per sample (git ed1aa53,
# icl/store/sqlite.py ``_SCHEMA``), the tables a migration touches.
_V2_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE models (model_id TEXT PRIMARY KEY, label TEXT NOT NULL, identity TEXT NOT NULL);
CREATE TABLE responses (
    request_hash TEXT NOT NULL, model_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), reason TEXT,
    kind TEXT NOT NULL CHECK (kind IN ('text', 'png', 'none')), body BLOB, error TEXT,
    seconds REAL NOT NULL, run_id TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (request_hash, model_id)
);
CREATE TABLE links (
    item_key TEXT NOT NULL, model_id TEXT NOT NULL, step TEXT NOT NULL, request_hash TEXT NOT NULL,
    PRIMARY KEY (item_key, model_id, step)
);
CREATE TABLE scores (
    benchmark TEXT NOT NULL, protocol TEXT NOT NULL, item_key TEXT NOT NULL, model_id TEXT NOT NULL,
    judge_id TEXT NOT NULL, scorer_version TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), reason TEXT,
    metrics TEXT NOT NULL, error TEXT, model_s REAL NOT NULL, score_s REAL NOT NULL,
    run_id TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (benchmark, protocol, item_key, model_id, judge_id, scorer_version)
);
INSERT INTO meta VALUES ('schema_version', '2');
INSERT INTO responses VALUES ('h1', 'm1', 'ok', NULL, 'text', 'a cat', NULL, 0.25, 'r0', 1.0);
INSERT INTO scores VALUES ('vibe', 'vibe-1', 'q1', 'm-oracle', '', '1', 'ok', NULL, '{"a": 1.0}', NULL, 0.5, 0.1,
                           'r0', 1.0);
"""


def test_version_2_store_is_migrated_by_adding_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.executescript(_V2_SCHEMA)
    con.close()
    with Store(path) as store:
        (old,) = store.scores([_key("q1")])
        assert old.metrics == {"a": 1.0} and old.model_s == 0.5 and old.run_id == "r0"
        assert old.peak_memory_bytes is None and old.memory_kind is None and old.energy_j is None
        r = store.responses(["h1"], "m1")["h1"]
        assert r.body == "a cat" and r.seconds == 0.25 and r.generation is None and r.energy_j is None
        gen = {"seed": 7, "steps": 2, "guidance": 7.5, "size": [16, 16]}
        store.write_batch(responses=[Response("h2", "m1", "ok", "text", "x", seconds=0.2, run_id="r1",
                                              peak_memory_bytes=123, memory_kind="process-max-rss", energy_j=1.5,
                                              generation=gen)],
                          scores=[Score(_key("q2"), "ok", {"a": 0.0}, None, None, 0.2, 0.0, "r1", 123,
                                        "process-max-rss", 1.5)])
    with Store(path) as again:  # reopened: version 3, the old rows and the new ones as written
        assert again._schema_version() == SCHEMA_VERSION == 3
        new = again.responses(["h2"], "m1")["h2"]
        assert (new.peak_memory_bytes, new.memory_kind, new.energy_j, new.generation) == \
            (123, "process-max-rss", 1.5, gen)
        (s2,) = again.scores([_key("q2")])
        assert (s2.peak_memory_bytes, s2.memory_kind, s2.energy_j) == (123, "process-max-rss", 1.5)
    con = sqlite3.connect(path)
    cols = {t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")] for t in ("responses", "scores")}
    con.close()
    assert cols["responses"][:10] == ["request_hash", "model_id", "status", "reason", "kind", "body", "error",
                                      "seconds", "run_id", "created"]  # nothing dropped or reordered
    assert cols["responses"][10:] == ["peak_memory_bytes", "memory_kind", "energy_j", "generation"]
    assert cols["scores"][-3:] == ["peak_memory_bytes", "memory_kind", "energy_j"]


def test_newer_store_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    Store(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version 4, this icl writes version 3"):
        Store(path)


def test_final_and_judge_answers_follow_the_numbered_steps(tmp_path):
    """The scored answer is the highest ``answer:N`` step; judge answers come in ``judge:N``
    order (numerically: judge:10 after judge:2) under the ``item|model`` link."""
    with Store(tmp_path / "s.sqlite") as store:
        texts = {f"a{i}": f"answer {i}" for i in range(4)} | {f"j{i}": f"verdict {i}" for i in (0, 2, 10)}
        responses = [Response(h, "judge" if h.startswith("j") else "m", "ok", "text", t) for h, t in texts.items()]
        links = [("q", "m", f"answer:{i}", f"a{i}") for i in (0, 3, 1)] + [
            ("q|m", "judge", f"judge:{i}", f"j{i}") for i in (10, 0, 2)] + [("q|m", "judge", "judge:5", "missing")]
        store.write_batch(responses, links)
        assert store.final_answers(["q", "unknown"], "m")["q"].body == "answer 3"
        assert set(store.final_answers(["q", "unknown"], "m")) == {"q"}
        found = store.judge_answers(["q"], "m", "judge")["q"]
        assert [r.body if r else None for r in found] == ["verdict 0", "verdict 2", None, "verdict 10"]


def test_readonly_store_reads_and_writes_nothing(tmp_path):
    """``Store(readonly=True)`` (``--check``): the scores read as the run reads them, the file's
    bytes and mtime unchanged, no -wal/-shm left beside it, a write refused, a missing store
    not created."""
    path = tmp_path / "s.sqlite"
    key = ScoreKey("b", "p1", "item", "m", "", "1")
    with Store(path) as s:
        s.write_batch(scores=[Score(key, "ok", {"acc": 1.0}, None, None, 0.5, 0.25, "r")])
    before = (path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in tmp_path.iterdir()))
    with Store(path, readonly=True) as ro:
        assert ro.done("b", "p1", "m", "", "1") == {"item"}
        assert ro.model_seconds("m") == (1, 0.5, 0.25)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ro.write_batch(scores=[Score(key, "failed", {}, "x", "error", 0.0, 0.0, "r")])
    assert (path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in tmp_path.iterdir())) == before
    with pytest.raises(StoreError, match="no store there"):
        Store(tmp_path / "none.sqlite", readonly=True)
    assert not (tmp_path / "none.sqlite").exists()


def test_judge_seconds_counts_the_items_a_judge_was_asked_about_in_runs_that_ended(tmp_path):
    """``judge_seconds`` (--check's judge time): the items of runs that wrote their compute
    (a run killed before holds scores, no time: left out), judged ones only (``ok`` or failed
    for the judge's reason; an answer that failed before the judge is not), the ``judge`` stage
    seconds of those runs under the judge's label, and the latest load."""
    with Store(tmp_path / "s.sqlite") as store:
        ended, killed, later = (store.start_run({"n": i}) for i in range(3))
        rows = [("a", "ok", None, ended), ("b", "failed", "judge", ended), ("c", "failed", "error", ended),
                ("d", "ok", None, killed), ("e", "ok", None, later)]
        store.write_batch(scores=[Score(ScoreKey("b", "p", key, "m", "j", "1"), status, {}, None, reason, 0.1, 0.0, run)
                                  for key, status, reason, run in rows])
        store.add_compute([ComputeRecord(ended, "judge-label", "judge", "cpu", 3, 1.5, None, None),
                           ComputeRecord(ended, "judge-label", "load", "cpu", 0, 2.0, None, None),
                           ComputeRecord(ended, "other-label", "judge", "cpu", 3, 9.0, None, None),
                           ComputeRecord(later, "m", "model", "cpu", 1, 0.1, None, None)])
        assert store.judge_seconds("j", "judge-label") == (3, 1.5, 2.0)  # a, b (ended) and e (later: asked nothing)
        assert store.judge_seconds("j", "other-label") == (3, 9.0, None)
        assert store.judge_seconds("unknown", "judge-label") == (0, 0.0, None)
