"""SIGKILL at any point, then rerun: identical results, nothing answered twice (vibe, best50)."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BATCH = 3


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    site = tmp_path_factory.mktemp("kill-site")
    dist = site / "icl_kill_adapter-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-kill-adapter\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nslow-oracle = tests.run._kill_adapter:SlowOracle\n")
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), PYTHONUNBUFFERED="1")
    return e


def _cmd(bench, out, data):
    extra = (["--tasks", "edges,keypoints", "--datasets", "scenes-a", "--limit", "3", "--shots", "1,2"]
             if bench == "vibe" else ["--ks", "1,8", "--limit", "6"])
    return [sys.executable, "-m", "icl.run", bench, "--fast", "--models", "slow-oracle", "--out", str(out),
            "--data-root", str(data), "--no-plots", "--no-progress", *extra]


def _answered(log):
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("bench", ["vibe", "best50"])
def test_kill_and_rerun_gives_the_clean_result(bench, env, tmp_path, builtin_root):
    clean_log, log = tmp_path / "clean.log", tmp_path / "killed.log"
    clean = subprocess.run(_cmd(bench, tmp_path / "clean", builtin_root), env={**env, "ICL_TEST_COUNT_LOG": str(clean_log)},
                           capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr
    planned = _answered(clean_log)
    assert len(planned) == len(set(planned)) > 3 * BATCH
    out = tmp_path / "killed"
    for stop_after in (BATCH, 2 * BATCH + 1):  # kill twice, at different points
        proc = subprocess.Popen(_cmd(bench, out, builtin_root),
                                env={**env, "ICL_TEST_COUNT_LOG": str(log), "ICL_TEST_SLEEP": "0.15"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        start = len(_answered(log))
        while len(_answered(log)) < start + stop_after and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    done = subprocess.run(_cmd(bench, out, builtin_root), env={**env, "ICL_TEST_COUNT_LOG": str(log)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    counts = Counter(_answered(log))
    assert set(counts) == set(planned)
    # only what was not committed at each kill is asked again: the batch the model was answering and,
    # with scoring overlapped, the one still being scored
    assert sum(c - 1 for c in counts.values()) <= 2 * 2 * BATCH
    for name in ("results.csv", "per_sample.csv" if bench == "best50" else "ranks.csv"):
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name
    again = subprocess.run(_cmd(bench, out, builtin_root), env={**env, "ICL_TEST_COUNT_LOG": str(log)},
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and Counter(_answered(log)) == counts  # a finished run asks nothing
