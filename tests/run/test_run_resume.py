"""Resume after SIGKILL (nothing computed twice, results identical to an uninterrupted run),
the response cache (keyed by request and model identity) and ``rescore`` (no model is called)."""

from __future__ import annotations

import json
import sqlite3
import signal
import subprocess
import time

import pytest

from icl.models import register_model
from icl.models.registry import unregister_model
from icl.run.__main__ import main
from tests.run._adapters import Counting
from tests.run.conftest import icl_run, item_fields, score_rows

TASKS = "edges"


def _rows(db) -> list[tuple]:
    """(item_key, model, status, metrics JSON) of every stored score."""
    return [(k, m, s, j) for k, m, s, _, j, _ in score_rows(db)]


def _log(path) -> list[tuple]:
    if not path.exists():
        return []
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()]


def _common(fast_data) -> list[str]:
    return ["vibe", "--fast", "--tasks", TASKS, "--models", "counting,identity", "--shots", "1,2", "--data-root",
            str(fast_data), "--no-plots", "--no-progress", "--qualitative", "0", "--device", "cpu"]


def _in_process(args, log, monkeypatch) -> int:
    """``main(args)`` here, with ``counting`` logging to ``log``."""
    monkeypatch.setenv("ICL_TEST_COUNT_LOG", str(log))
    register_model("counting", Counting)
    try:
        return main(args)
    finally:
        unregister_model("counting")


def kill_and_resume(fast_data, plugin_env, tmp_path, monkeypatch, capsys, extra=()):
    """The reference run (in this process), the same run killed (a subprocess, once some
    batches are committed), its resumption (a fresh subprocess), then a run that finds
    everything done; ``extra`` options apply to every run."""
    common = [*_common(fast_data), *extra]
    assert _in_process([*common, "--out", str(tmp_path / "a")], tmp_path / "a.log", monkeypatch) == 0
    ref_rows = _rows(tmp_path / "a" / "store.sqlite")
    ref_log = _log(tmp_path / "a.log")
    counting = {item_fields(r[0]) for r in ref_rows if r[1] == "counting"}
    assert len(ref_log) == len(set(ref_log)) == len(counting) > 20

    # each batch sleeps 100 ms
    db = tmp_path / "b" / "store.sqlite"
    proc = subprocess.Popen(icl_run([*common, "--out", str(tmp_path / "b")]), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            env=dict(plugin_env, ICL_TEST_COUNT_LOG=str(tmp_path / "b1.log"), ICL_TEST_SLEEP="0.1"))
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and len(_rows(db)) < 8:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    before = _rows(db)
    done_before = {item_fields(r[0]) for r in before if r[1] == "counting"}
    assert 8 <= len(before) < len(ref_rows) and all(r[2] == "ok" for r in before)
    assert done_before <= set(_log(tmp_path / "b1.log"))

    rerun = subprocess.run(icl_run([*common, "--out", str(tmp_path / "b")]), capture_output=True, text=True,
                           env=dict(plugin_env, ICL_TEST_COUNT_LOG=str(tmp_path / "b2.log")), timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    recomputed = _log(tmp_path / "b2.log")
    assert len(recomputed) == len(set(recomputed))
    assert not done_before & set(recomputed), "a committed item was computed again"
    assert done_before | set(recomputed) == counting
    assert f"{len(before)} already in the store" in rerun.stdout

    assert sorted(_rows(db)) == sorted(ref_rows)  # same keys, statuses and metrics JSON
    for name in ("results.csv", "ranks.csv", "contexts.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    a_json = json.loads((tmp_path / "a" / "results.json").read_text())
    b_json = json.loads((tmp_path / "b" / "results.json").read_text())
    for key in ("artifacts", "plan", "models", "fingerprints", "protocol", "scorer_version"):
        assert a_json[key] == b_json[key], key
    assert b_json["counts"]["skipped"] == len(before) and b_json["counts"]["failed"] == 0

    # a third run finds everything done and computes nothing
    capsys.readouterr()
    assert _in_process([*common, "--out", str(tmp_path / "b")], tmp_path / "b3.log", monkeypatch) == 0
    assert not (tmp_path / "b3.log").exists()
    assert f"0 items computed, {len(ref_rows)} already in the store" in capsys.readouterr().out


def test_sigkill_then_resume(fast_data, plugin_env, tmp_path, monkeypatch, capsys):
    kill_and_resume(fast_data, plugin_env, tmp_path, monkeypatch, capsys)


@pytest.fixture
def counting(tmp_path, monkeypatch):
    """``counting`` registered in this process; returns its log file."""
    log = tmp_path / "count.log"
    monkeypatch.setenv("ICL_TEST_COUNT_LOG", str(log))
    register_model("counting", Counting)
    yield log
    unregister_model("counting")


def test_responses_are_reused_by_request_and_model_identity(fast_data, tmp_path, counting, capsys, monkeypatch):
    from icl.benchmarks.vibe.benchmark import Vibe

    args = [*_common(fast_data), "--out", str(tmp_path / "out"), "--datasets", "scenes-a"]
    assert main(args) == 0
    n = len(_log(counting))
    assert n == 12 and len(set(_log(counting))) == n
    capsys.readouterr()
    # a new scorer version scores again from the stored answers: no model is called
    monkeypatch.setattr(Vibe, "scorer_version", "test-2")
    assert main(args) == 0
    assert len(_log(counting)) == n
    assert f"{2 * n} items computed, 0 already in the store, 0 failed ({2 * n} answers reused from the store)" \
        in capsys.readouterr().out
    # another precision is another model identity: asked again
    assert main([*args, "--model-arg", "counting:dtype=fp16"]) == 0
    assert len(_log(counting)) == 2 * n and sorted(_log(counting)[n:]) == sorted(_log(counting)[:n])
    out = capsys.readouterr().out
    assert f"{n} items computed, {n} already in the store, 0 failed;" in out and "counting[dtype=fp16]" in out


def test_rescore_recomputes_every_file_without_models(fast_data, tmp_path, counting, capsys, monkeypatch):
    from icl.benchmarks.vibe.benchmark import Vibe

    out = tmp_path / "out"
    assert main([*_common(fast_data), "--out", str(out), "--datasets", "scenes-a"]) == 0
    files = {name: (out / name).read_bytes() for name in ("results.csv", "ranks.csv", "contexts.csv")}
    n = len(_log(counting))
    first = json.loads((out / "results.json").read_text())
    capsys.readouterr()
    monkeypatch.setattr(Vibe, "scorer_version", "test-2")
    for name in files:
        (out / name).unlink()
    assert main(["rescore", str(out)]) == 0
    assert len(_log(counting)) == n, "rescore called a model"
    assert f"{2 * n} items computed" in capsys.readouterr().out
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    meta = json.loads((out / "results.json").read_text())
    assert meta["scorer_version"].startswith("test-2+lpips:") and meta["models"] == first["models"]
    assert meta["run_id"] != first["run_id"] and meta["config"] == first["config"]
    rows = _rows(out / "store.sqlite")
    assert len(rows) == 2 * 2 * n  # both scorer versions kept, side by side
    assert main(["rescore", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such folder" in capsys.readouterr().err


def test_a_damaged_stored_answer_is_asked_again_and_rescore_fails_only_its_item(fast_data, tmp_path, counting,
                                                                                  capsys, monkeypatch):
    """A stored image answer that cannot be read back (a body that is not a PNG, or none) is no
    answer: a run asks the model again and replaces it; rescore, which asks no model, fails that
    item alone with the reason "invalid". Both ended in a traceback before."""
    import cv2
    import numpy as np

    from icl.benchmarks.vibe.benchmark import Vibe

    out = tmp_path / "out"
    args = [*_common(fast_data), "--out", str(out), "--datasets", "scenes-a"]
    assert main(args) == 0
    n = len(_log(counting))
    model_id = json.loads((out / "results.json").read_text())["models"]["counting"]["model_id"]

    def damage(bodies: list) -> list[str]:
        """The first PNG answers of ``counting`` (by request hash) given ``bodies``; their hashes."""
        con = sqlite3.connect(out / "store.sqlite")
        with con:
            hashes = [h for (h,) in con.execute("SELECT request_hash FROM responses WHERE model_id=? AND kind='png' "
                                                "ORDER BY request_hash", (model_id,))][:len(bodies)]
            con.executemany("UPDATE responses SET body=? WHERE request_hash=? AND model_id=?",
                            [(body, h, model_id) for h, body in zip(hashes, bodies)])
        con.close()
        return hashes

    damaged = damage([b"not a png", None])
    monkeypatch.setattr(Vibe, "scorer_version", "test-2")
    capsys.readouterr()
    assert main(args) == 0
    assert len(_log(counting)) == n + 2  # the two damaged answers asked again, nothing else
    assert f"{2 * n} items computed, 0 already in the store, 0 failed ({2 * n - 2} answers reused from the store)" \
        in capsys.readouterr().out
    con = sqlite3.connect(out / "store.sqlite")
    bodies = [con.execute("SELECT body FROM responses WHERE request_hash=? AND model_id=?", (h, model_id)).fetchone()[0]
              for h in damaged]
    con.close()
    assert all(cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR) is not None for b in bodies)

    (hurt,) = damage([b"not a png"])
    monkeypatch.setattr(Vibe, "scorer_version", "test-3")
    code = main(["rescore", str(out)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and len(_log(counting)) == n + 2, "rescore called a model"
    con = sqlite3.connect(out / "store.sqlite")
    failed = con.execute("SELECT s.item_key, s.reason, s.error FROM scores s JOIN links l ON l.item_key = s.item_key "
                         "AND l.model_id = s.model_id WHERE s.scorer_version LIKE 'test-3%' AND s.status != 'ok' "
                         "AND l.request_hash = ?", (hurt,)).fetchall()
    others = con.execute("SELECT COUNT(*) FROM scores WHERE scorer_version LIKE 'test-3%' AND status != 'ok'").fetchone()
    con.close()
    assert len(failed) == 1 and failed[0][1] == "invalid" and "stored answer" in failed[0][2], failed
    assert others[0] == 1 and code == 1, (code, captured.err[-2000:])
