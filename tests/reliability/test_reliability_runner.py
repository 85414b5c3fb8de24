"""Runner-level reliability (issue 12): timeouts, vandal and quitting models, concurrent runs,
each leaving the rest of the run equal to a clean run."""

import csv
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icl.models import register_model
from icl.models.registry import unregister_model
from icl.run import ModelSpec, RunConfig, run
from tests.reliability._runner_models import Quitter, Sleepy, Vandal

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = dict(tasks=("flip",), datasets=("scenes-a",), limit=4)


@pytest.fixture
def models():
    for cls in (Sleepy, Vandal, Quitter):
        register_model(cls.name, cls, replace=True)
    yield
    for cls in (Sleepy, Vandal, Quitter):
        unregister_model(cls.name)


def _run(out, data, *specs):
    config = RunConfig("vibe", options=dict(OPTIONS), models=[ModelSpec(n, a) for n, a in specs], fast=True,
                       data_root=data, out=out, plots=False, progress=False)
    return run(config, stdout=io.StringIO(), stderr=io.StringIO())


def _means(out, model):
    with open(out / "vibe_results.csv", newline="") as f:
        return {(r["dataset"], r["task"], r["metric"]): r["mean"] for r in csv.DictReader(f) if r["model"] == model}


def _per_item(outcome, label):
    return {r["query"]: (r["status"], r.get("psnr")) for r in outcome.rows if r["model"] == label}


def test_a_hung_model_times_out_and_the_run_goes_on(tmp_path, builtin_root, models):
    clean = _per_item(_run(tmp_path / "clean", builtin_root, ("copy-target", {})), "copy-target")
    slow_query = sorted(clean)[1]
    o = _run(tmp_path / "run", builtin_root, ("sleepy", {"seconds": 3.0, "slow": slow_query, "timeout": 0.5}))
    got = _per_item(o, f"sleepy[seconds=3.0,slow={slow_query},timeout=0.5]")
    assert got[slow_query][0] == "failed" and o.exit_code == 1
    assert [r["reason"] for r in o.rows if r["query"] == slow_query] == ["timeout"]
    # the model stays hung until its thread returns: items after it time out at once, then it recovers
    assert all(v[1] == clean[q][1] for q, v in got.items() if v[0] == "ok")
    assert sum(v[0] == "ok" for v in got.values()) >= 1


def test_a_model_editing_its_inputs_changes_nothing_for_the_next(tmp_path, builtin_root, models):
    clean = _run(tmp_path / "clean", builtin_root, ("identity", {}))
    both = _run(tmp_path / "both", builtin_root, ("vandal", {}), ("identity", {}))
    assert both.exit_code == 0
    assert _means(tmp_path / "both", "identity") == _means(tmp_path / "clean", "identity")
    assert _means(tmp_path / "both", "vandal") == _means(tmp_path / "clean", "identity")  # answered the query
    assert clean.exit_code == 0


def test_sys_exit_in_a_model_fails_only_its_item(tmp_path, builtin_root, models):
    clean = _per_item(_run(tmp_path / "clean", builtin_root, ("identity", {})), "identity")
    victim = sorted(clean)[0]
    o = _run(tmp_path / "run", builtin_root, ("quitter", {"quit_on": victim}))
    got = _per_item(o, f"quitter[quit_on={victim}]")
    assert got[victim][0] == "failed" and o.exit_code == 1
    assert {q: v for q, v in got.items() if q != victim} == {q: v for q, v in clean.items() if q != victim}
    assert any("SystemExit" in f.message for f in o.failures)


def _env(tmp_path):
    site = tmp_path / "site"
    dist = site / "icl_rel-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-rel\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nsleepy = tests.reliability._runner_models:Sleepy\n"
                                           "configured = tests.reliability._runner_models:Configured\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), PYTHONUNBUFFERED="1")


def _cmd(out, data):
    return [sys.executable, "-m", "icl.run", "vibe", "--fast", "--tasks", "flip", "--datasets", "scenes-a",
            "--limit", "4", "--models", "sleepy", "--out", str(out), "--data-root", str(data), "--no-plots",
            "--no-progress"]


def _wait_for(path, timeout=60):
    deadline = time.time() + timeout
    while not path.exists() and time.time() < deadline:
        time.sleep(0.05)


def _scored(db):
    import sqlite3

    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_two_runs_on_one_folder_the_second_exits_2_naming_the_holder(tmp_path, builtin_root):
    env, out = _env(tmp_path), tmp_path / "out"
    # the holder sleeps long (it is killed below): a slow start of the second process under load
    # must still find it running
    first = subprocess.Popen(_cmd(out, builtin_root), env={**env, "ICL_TEST_SLEEP": "30"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(out / "store.sqlite")
        second = subprocess.run(_cmd(out, builtin_root), env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        assert str(first.pid) in second.stderr and "Traceback" not in second.stderr
    finally:
        first.kill()
        first.wait(timeout=30)
    # the holder was killed: the lock went with it, and the folder runs to completion
    done = subprocess.run(_cmd(out, builtin_root), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# SIGTERM and SIGINT at every moment of a run: test_reliability_signals.py
