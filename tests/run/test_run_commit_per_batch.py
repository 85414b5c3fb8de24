"""Issue 45.4: every benchmark commits a generation batch as soon as it is answered and scored,
not after the next batch (vif used to hold one back while the model generated the next). A
monitored kill: a subprocess run of a slow generator (3 s a batch of one) is watched through
its store (SQLite, read-only); when the first score appears the second batch must still be
generating; then kill -9, and the rerun must not generate what was committed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLEEP_S = 3.0

pytestmark = pytest.mark.slow  # two subprocess runs per benchmark, one with 3 s batches


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    site = tmp_path_factory.mktemp("slow-gen-site")
    dist = site / "icl_slow_generator-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-slow-generator\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nslow-generator = tests.run._slow_generator:SlowGenerator\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), PYTHONUNBUFFERED="1")


ARGS = {"vif": ["--size", "64", "--judge", "vif-spatial-judge"],
        "cobsat": ["--tasks", "Color-I", "--shots", "2", "--prompts", "3"]}


def _cmd(bench, out, data):
    return [sys.executable, "-m", "icl.run", bench, "--fast", "--models", "slow-generator", "--out", str(out),
            "--data-root", str(data), "--no-plots", "--no-progress", "--device", "cpu", *ARGS[bench]]


def _log(path):
    return path.read_text().splitlines() if path.exists() else []


def _stored(store):
    """(scores, png answers) committed, read without writing (None while the store is not there)."""
    if not store.exists():
        return None
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=0.2) as c:
            return (c.execute("SELECT COUNT(*) FROM scores").fetchone()[0],
                    c.execute("SELECT COUNT(*) FROM responses WHERE kind = 'png'").fetchone()[0])
    except sqlite3.Error:  # not created yet, or its schema being written
        return None


@pytest.mark.parametrize("bench", ["vif", "cobsat"])
def test_a_batch_is_committed_while_the_next_one_generates(bench, env, tmp_path, builtin_root):
    out, log = tmp_path / "out", tmp_path / "gen.log"
    proc = subprocess.Popen(_cmd(bench, out, builtin_root),
                            env={**env, "ICL_TEST_COUNT_LOG": str(log), "ICL_TEST_SLEEP": str(SLEEP_S)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        seen = None
        while proc.poll() is None and time.time() < deadline:
            seen = _stored(out / "store.sqlite")
            if seen and seen[0]:
                break
            time.sleep(0.05)
        lines = _log(log)  # what the model had done when the first commit became visible
        assert seen and seen[0], (seen, proc.poll(), lines)
        # the next batch may log its start a moment after the commit shows (a loaded machine):
        # waited for, well within one batch's SLEEP_S, so that it cannot have ended meanwhile
        assert sum(x.startswith("end ") for x in lines) == 1, lines  # committed before the next batch ended
        until = time.time() + SLEEP_S / 2
        while sum(x.startswith("start ") for x in lines) < 2 and time.time() < until:
            time.sleep(0.02)
            lines = _log(log)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    ended = [x.split()[1] for x in lines if x.startswith("end ")]
    started = [x.split()[1] for x in lines if x.startswith("start ")]
    # the first batch's answer and score are in the store while the second batch still generates
    assert len(ended) == 1 and len(started) == 2, lines
    assert seen == (1, 1)
    first = ended[0]
    log.unlink()
    done = subprocess.run(_cmd(bench, out, builtin_root), env={**env, "ICL_TEST_COUNT_LOG": str(log)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    again = [x.split()[1] for x in _log(log) if x.startswith("start ")]
    assert first not in again and started[1] in again  # the committed one is reused, the one in flight redone
    assert " items computed, 1 already in the store, 0 failed" in done.stdout, done.stdout
