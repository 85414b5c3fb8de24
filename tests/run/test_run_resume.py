"""Resume after SIGKILL: nothing computed twice, results identical to an uninterrupted run."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time

import pytest

from tests.run.conftest import icl_run

TASKS = "edges"


def _rows(db) -> list[tuple]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            return con.execute("SELECT dataset, task, query_id, shots, model, status, metrics FROM samples").fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:  # not created yet
        return []


def _log(path) -> list[tuple]:
    if not path.exists():
        return []
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()]


def _common(fast_data) -> list[str]:
    return ["--fast", "--tasks", TASKS, "--models", "counting,identity", "--shots", "1,2", "--data-root",
            str(fast_data), "--no-plots", "--no-progress", "--qualitative", "0"]


@pytest.mark.slow
def test_sigkill_then_resume(fast_data, plugin_env, tmp_path):
    common = _common(fast_data)
    ref = subprocess.run(icl_run([*common, "--out", str(tmp_path / "a")]), capture_output=True, text=True,
                         env=dict(plugin_env, ICL_TEST_COUNT_LOG=str(tmp_path / "a.log")), timeout=300)
    assert ref.returncode == 0, ref.stderr
    ref_rows = _rows(tmp_path / "a" / "store.sqlite")
    ref_log = _log(tmp_path / "a.log")
    counting = {r[:4] for r in ref_rows if r[4] == "counting"}
    assert len(ref_log) == len(set(ref_log)) == len(counting) > 20

    # the same run, killed once some batches are committed (each batch sleeps 100 ms)
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
    done_before = {r[:4] for r in before if r[4] == "counting"}
    assert 8 <= len(before) < len(ref_rows) and all(r[5] == "ok" for r in before)
    assert done_before <= set(_log(tmp_path / "b1.log"))

    rerun = subprocess.run(icl_run([*common, "--out", str(tmp_path / "b")]), capture_output=True, text=True,
                           env=dict(plugin_env, ICL_TEST_COUNT_LOG=str(tmp_path / "b2.log")), timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    recomputed = _log(tmp_path / "b2.log")
    assert len(recomputed) == len(set(recomputed))
    assert not done_before & set(recomputed), "a committed sample was computed again"
    assert done_before | set(recomputed) == counting
    assert f"{len(before)} already in the store" in rerun.stdout

    assert sorted(_rows(db)) == sorted(ref_rows)  # same keys, statuses and metrics JSON
    for name in ("results.csv", "ranks.csv", "contexts.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    a_json = json.loads((tmp_path / "a" / "results.json").read_text())
    b_json = json.loads((tmp_path / "b" / "results.json").read_text())
    assert a_json["context_csv_sha256"] == b_json["context_csv_sha256"]
    assert a_json["results"] == b_json["results"] and a_json["ranks"] == b_json["ranks"]

    # a third run finds everything done and computes nothing
    again = subprocess.run(icl_run([*common, "--out", str(tmp_path / "b")]), capture_output=True, text=True,
                           env=dict(plugin_env, ICL_TEST_COUNT_LOG=str(tmp_path / "b3.log")), timeout=300)
    assert again.returncode == 0 and not (tmp_path / "b3.log").exists()
    assert f"0 samples computed, {len(ref_rows)} already in the store" in again.stdout
