"""SIGKILL a VL-ICL text-to-image run of tiny ``janus`` once a batch is stored, then rerun: the
results equal an uninterrupted run's byte for byte, and what was stored is not generated again
(each request's own seed makes the resumed images the same images)."""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _cmd(out: Path, data: Path, janus: Path) -> list[str]:
    model = f"janus:weights={janus},max_batch=2"
    return [sys.executable, "-m", "icl.run", "vlicl", "--fast", "--models", model, "--tasks",
            "fast_count_t2i,fast_attr_t2i", "--seeds", "0", "--shots", "0,1,2", "--queries", "3", "--out", str(out),
            "--data-root", str(data), "--no-plots", "--no-progress", "--device", "cpu"]


def _stored(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_kill_and_resume_gives_the_clean_result(tmp_path, janus_folder):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    data = tmp_path / "data"
    clean = subprocess.run(_cmd(tmp_path / "clean", data, janus_folder), env=env, capture_output=True, text=True,
                           timeout=600)
    assert clean.returncode == 0, clean.stderr[-3000:]
    out = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(out, data, janus_folder), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while _stored(out / "store.sqlite") < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    kept = _stored(out / "store.sqlite")
    done = subprocess.run(_cmd(out, data, janus_folder), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    computed, skipped = (int(x) for x in re.search(r"(\d+) items computed, (\d+) already", done.stdout).groups())
    assert skipped >= 2 and computed + skipped == 2 * 3 * 3 and kept >= 2
    for name in ("accuracy.csv", "shot_summary.csv", "episodes.csv"):
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name
