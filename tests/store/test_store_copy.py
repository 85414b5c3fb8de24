"""``Store.copy_from`` (icl.store.copy): every table copied generically, columns and tables the
target does not know carried, equal rows skipped, conflicting rows refused in one rolled-back
transaction, sources never written (real SQLite files)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from icl.store import Failure, Response, Score, ScoreKey, Store
from icl.store.copy import CopyConflict, is_bookkeeping, open_read_only


def _key(item: str) -> ScoreKey:
    return ScoreKey("vibe", "vibe-1", item, "m1", "", "1")


def _source(path, items, run_id, body="A", seconds=0.1) -> None:
    with Store(path) as s:
        s.put_model("m1", "oracle", {"adapter": "oracle"})
        s.write_batch(responses=[Response("h-shared", "m1", "ok", "text", body, seconds=seconds, run_id=run_id)],
                      links=[(i, "m1", "answer:0", "h-shared") for i in items],
                      scores=[Score(_key(i), "ok", {"x": 1.0}, run_id=run_id, model_s=seconds) for i in items],
                      failures=[Failure("model", f"{run_id} failed once", "oracle", items[0], None, run_id)])


def _digest(folder) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_copy_two_stores_and_again(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _source(tmp_path / "a" / "s.sqlite", ["q1", "q2"], "run-a", seconds=0.1)
    _source(tmp_path / "b" / "s.sqlite", ["q3"], "run-b", seconds=0.7)  # the same response, timed otherwise
    before = [_digest(tmp_path / "a"), _digest(tmp_path / "b")]
    with Store(tmp_path / "t.sqlite") as t:
        first = t.copy_from([tmp_path / "a" / "s.sqlite", tmp_path / "b" / "s.sqlite"])
        assert first[0].added["scores"] == 2 and first[1].added["scores"] == 1
        assert first[1].present == dict(compute=0, failures=0, links=0, models=1, responses=1, runs=0, scores=0)
        again = t.copy_from([tmp_path / "a" / "s.sqlite", tmp_path / "b" / "s.sqlite"])
        assert all(sum(c.added.values()) == 0 for c in again)
        assert t.count() == 3 and t.count("responses") == 1
        assert t.responses(["h-shared"], "m1")["h-shared"].seconds == 0.1  # the first copy's bookkeeping kept
        assert sorted(f.message for f in t.failures()) == ["run-a failed once", "run-b failed once"]
    assert [_digest(tmp_path / "a"), _digest(tmp_path / "b")] == before  # nothing written beside the sources


def test_new_columns_and_tables_are_carried(tmp_path):
    """A source written by a newer schema (a column and a table this target does not have)."""
    src = tmp_path / "src.sqlite"
    _source(src, ["q1"], "run-a")
    con = sqlite3.connect(src)
    with con:
        con.execute("ALTER TABLE scores ADD COLUMN peak_bytes INTEGER")
        con.execute("UPDATE scores SET peak_bytes = 1234")
        con.execute("CREATE TABLE samples (item_key TEXT PRIMARY KEY, payload BLOB NOT NULL)")
        con.execute("INSERT INTO samples VALUES ('q1', x'00ff')")
    con.close()
    with Store(tmp_path / "t.sqlite") as t:
        t.copy_from([src])
    con = sqlite3.connect(tmp_path / "t.sqlite")
    assert con.execute("SELECT item_key, peak_bytes FROM scores").fetchall() == [("q1", 1234)]
    assert con.execute("SELECT item_key, payload FROM samples").fetchall() == [("q1", b"\x00\xff")]
    con.close()


def test_conflicting_content_refused_and_rolled_back(tmp_path):
    _source(tmp_path / "a.sqlite", ["q1"], "run-a", body="A")
    _source(tmp_path / "b.sqlite", ["q2"], "run-b", body="B")  # the same request answered otherwise
    with Store(tmp_path / "t.sqlite") as t:
        with pytest.raises(CopyConflict, match=r"table responses: the row request_hash='h-shared', model_id='m1' "
                                               r"differs in body"):
            t.copy_from([tmp_path / "a.sqlite", tmp_path / "b.sqlite"])
        assert t.count() == 0 and t.count("responses") == 0


def test_a_log_not_yet_checkpointed_is_read_and_left_alone(tmp_path):
    """A store whose last commits are still in its -wal file (its writer is open, or was killed)."""
    path = tmp_path / "live" / "s.sqlite"
    writer = Store(path)
    writer.write_batch(scores=[Score(_key("q1"), "ok", {"x": 2.0}, run_id="r")])
    assert (tmp_path / "live" / "s.sqlite-wal").stat().st_size > 0
    before = _digest(tmp_path / "live")
    with open_read_only(path) as con:
        assert con.execute("SELECT item_key FROM scores").fetchall() == [("q1",)]
    assert _digest(tmp_path / "live") == before
    writer.close()


def test_bookkeeping_columns():
    assert all(map(is_bookkeeping, ("run_id", "created", "started", "seconds", "model_s", "wall_s")))
    assert not any(map(is_bookkeeping, ("body", "metrics", "status", "identity", "samples")))
