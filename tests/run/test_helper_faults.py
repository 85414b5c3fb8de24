"""A run whose LPIPS helper (icl.helpers) is stopped (SIGSTOP) or killed (SIGKILL) mid-run:
the run ends as it would have, nothing lost (the helper's jobs run in the run), with one line;
and SIGTERM still ends a run waiting for a stopped helper within seconds, exit 130."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from icl.ops import lpips_weights

    if lpips_weights("alex") is None:
        pytest.skip("no LPIPS weights installed: no LPIPS helper")
    site = tmp_path_factory.mktemp("helper-faults-site")
    dist = site / "icl_helper_faults-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-helper-faults\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nslow-identity = tests.run._kill_adapter:SlowIdentity\n")
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), PYTHONUNBUFFERED="1")
    e.pop("ICL_HELPERS", None)
    return e


def _cmd(out, data):
    return [sys.executable, "-m", "icl.run", "vibe", "--fast", "--models", "slow-identity", "--out", str(out),
            "--data-root", str(data), "--tasks", "denoising,colorization", "--datasets", "scenes-a",
            "--limit", "4", "--shots", "1,2", "--no-plots", "--no-progress", "--eval", "host"]


def _children(pid):
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _lpips_helper(proc, log, timeout=60):
    """The pid of the run's LPIPS helper, once the model has answered a first batch."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for child in _children(proc.pid):
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"icl.ops.lpips:warm_up" in cmd and log.exists() and log.read_text().strip():
                return child
        time.sleep(0.02)
    raise AssertionError(f"no LPIPS helper seen (run exit {proc.poll()})")


def _lpips(out):
    with open(out / "results.csv", newline="") as f:
        return {(r["task"], r["shots"]): float(r["value"]) for r in csv.DictReader(f) if r["metric"] == "lpips"}


@pytest.fixture(scope="module")
def clean(env, tmp_path_factory, builtin_root):
    out = tmp_path_factory.mktemp("helper-faults-clean") / "run"
    done = subprocess.run(_cmd(out, builtin_root), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return _lpips(out)


def _faulted(env, out, data, sig, **extra):
    """The run, its LPIPS helper sent ``sig`` after the model's first batch: (exit, stderr)."""
    log = out.parent / f"{out.name}.log"
    proc = subprocess.Popen(_cmd(out, data), env={**env, "ICL_TEST_COUNT_LOG": str(log), "ICL_TEST_SLEEP": "0.2",
                                                  **extra},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    helper = None
    try:
        helper = _lpips_helper(proc, log)
        os.kill(helper, sig)
        _, err = proc.communicate(timeout=120)
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if helper is not None:
            try:
                os.kill(helper, signal.SIGKILL)
            except OSError:
                pass


def _check(out, err, clean):
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["failed"] == 0 and meta["counts"]["computed"] == meta["counts"]["planned"], err
    assert "partially initialized" not in err and "Traceback" not in err, err
    got = _lpips(out)
    assert got.keys() == clean.keys()
    for k in clean:  # computed here instead of in the helper: equal to float32 rounding
        assert got[k] == pytest.approx(clean[k], rel=1e-5, abs=1e-6), k


def test_a_stopped_lpips_helper_is_killed_and_the_run_loses_nothing(env, tmp_path, builtin_root, clean):
    code, err = _faulted(env, tmp_path / "run", builtin_root, signal.SIGSTOP, ICL_HELPER_SILENCE_S="2")
    assert code == 0, err
    told = [line for line in err.splitlines() if "killed it, its jobs run in this process" in line]
    assert len(told) == 1 and "for 2 s (stopped or frozen?)" in told[0], err  # no heartbeat, or its job not taken
    _check(tmp_path / "run", err, clean)


def test_sigterm_ends_a_run_waiting_for_a_stopped_helper(env, tmp_path, builtin_root):
    """The default silence limit (30 s) is longer than the test waits: only the stop flag ends it."""
    out, log = tmp_path / "run", tmp_path / "run.log"
    proc = subprocess.Popen(_cmd(out, builtin_root),
                            env={**env, "ICL_TEST_COUNT_LOG": str(log), "ICL_TEST_SLEEP": "0.2"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    helper = None
    try:
        helper = _lpips_helper(proc, log)
        os.kill(helper, signal.SIGSTOP)
        time.sleep(2.5)  # every batch answered: the run waits for the helper's LPIPS
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            stdout, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGTERM did not end the run within 15 s")
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if helper is not None:
            try:
                os.kill(helper, signal.SIGKILL)
            except OSError:
                pass
    assert proc.returncode == 130, err
    assert took < 8, took
    assert "interrupted" in err and "Traceback" not in err, err
    assert not (out / "results.json").exists()  # an interrupted run writes no results


@pytest.mark.slow  # five runs, each with its LPIPS helper killed at another point
def test_killing_the_lpips_helper_loses_nothing_in_a_loop(env, tmp_path, builtin_root, clean):
    """A dead helper loses nothing: its jobs run in the run (once the race on the fallback's
    torch import, 'partially initialized module torch', failed items in 5 of 14 tries)."""
    for i in range(5):
        out = tmp_path / f"run{i}"
        code, err = _faulted(env, out, builtin_root, signal.SIGKILL)
        assert code == 0, (i, err)
        _check(out, err, clean)
