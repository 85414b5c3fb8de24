"""Runs are folders (issue 28): results.json names the run's own files by absolute paths,
``rescore`` started anywhere works on the folder it is given and never creates a store, and an
output folder holding another benchmark's run is refused with one line.

The audit ran ``rescore`` from another directory on a run made with a relative ``--out``: it
created a new empty store under the working directory and overwrote the run's results.csv with
one byte. vibe then best50 into one ``--out`` silently mixed their files.
"""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from icl.run import ModelSpec, RunConfig, rescore, run
from icl.run.errors import ConfigError
from tests.reliability.test_reliability_runner import ROOT



def _icl(args, cwd):
    return subprocess.run([sys.executable, "-m", "icl.run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
def test_rescore_from_another_directory_reproduces_the_csvs_and_creates_nothing_there(tmp_path, builtin_root,
                                                                                     monkeypatch):
    """The run made with a relative ``--out`` (in this process), rescored by a real
    ``python -m icl.run rescore`` started in another directory."""
    made_in, elsewhere = tmp_path / "made-in", tmp_path / "elsewhere"
    made_in.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(made_in)
    first = RunConfig("vibe", options=dict(tasks=("flip",), datasets=("scenes-a",), limit=3),
                      models=[ModelSpec("identity"), ModelSpec("copy-target")], fast=True, data_root=builtin_root,
                      out=Path("runs/r"), plots=False, progress=False)
    assert _quiet(first).exit_code == 0
    monkeypatch.undo()
    out = made_in / "runs" / "r"
    recorded = json.loads((out / "results.json").read_text())["config"]
    assert recorded["out"] == str(out) and recorded["store"] == str(out / "store.sqlite")
    assert recorded["data_root"] == str(builtin_root)
    csvs = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    assert {"results.csv", "ranks.csv"} <= set(csvs) and len(csvs["results.csv"]) > 100
    again = _icl(["rescore", "../made-in/runs/r"], cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert {p.name: p.read_bytes() for p in out.glob("*.csv")} == csvs
    assert _tree(elsewhere) == []


def _config(out, data, benchmark="vibe"):
    return RunConfig(benchmark, options=dict(tasks=("flip",), datasets=("scenes-a",), limit=2),
                     models=[ModelSpec("identity")], fast=True, data_root=data, out=out, plots=False, progress=False)


def _quiet(config):
    return run(config, stdout=io.StringIO(), stderr=io.StringIO())


def test_a_moved_run_folder_rescores_from_its_own_store(tmp_path, builtin_root):
    _quiet(_config(tmp_path / "a", builtin_root))
    csvs = {p.name: p.read_bytes() for p in (tmp_path / "a").glob("*.csv")}
    shutil.move(tmp_path / "a", tmp_path / "b")
    outcome = rescore(tmp_path / "b", stdout=io.StringIO(), stderr=io.StringIO())
    assert outcome.exit_code == 0 and outcome.stats.computed == 2
    assert {p.name: p.read_bytes() for p in (tmp_path / "b").glob("*.csv")} == csvs
    assert not (tmp_path / "a").exists()


def test_rescore_never_creates_a_store(tmp_path, builtin_root):
    out = tmp_path / "run"
    _quiet(_config(out, builtin_root))
    (out / "store.sqlite").unlink()
    before = _tree(out)
    with pytest.raises(ConfigError, match="never creates a store"):
        rescore(out, stdout=io.StringIO(), stderr=io.StringIO())
    assert _tree(out) == before


def test_an_out_folder_holding_another_benchmarks_run_is_refused_in_one_line(tmp_path, builtin_root):
    out = tmp_path / "shared"
    _quiet(_config(out, builtin_root))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    other = _icl(["vlicl", "--fast", "--out", str(out), "--data-root", str(tmp_path / "vlicl-data"), "--no-plots",
                  "--no-progress"], cwd=tmp_path)
    assert other.returncode == 2
    lines = other.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds a vibe run" in lines[0] and "--out" in lines[0], other.stderr
    # every file as it was (the lock's holder record aside; SQLite's -wal/-shm of the read-only look)
    ours = lambda p: p.is_file() and p.name not in (".icl.lock", "store.sqlite-wal", "store.sqlite-shm")
    assert {p: p.read_bytes() for p in out.rglob("*") if ours(p)} == {p: b for p, b in before.items() if ours(p)}


def test_a_run_recorded_in_the_folders_store_counts_a_shared_stores_other_runs_do_not(tmp_path):
    """The store's runs table holds each run's resolved config (as ``run`` records it): a run
    of another benchmark into this folder (killed before its results.json) refuses the folder;
    runs that only shared the store from other folders do not."""
    from icl.run.outputs.files import claim_folder
    from icl.store import Store

    out = tmp_path / "v"
    out.mkdir()
    with Store(out / "store.sqlite") as store:
        store.start_run(dict(config=RunConfig("best50", out=tmp_path / "b").resolved(), protocol="best50-1"))
    claim_folder(out, "vibe")
    with Store(out / "store.sqlite") as store:
        store.start_run(dict(config=RunConfig("vlicl", out=out).resolved(), protocol="vlicl-1"))
    with pytest.raises(ConfigError, match="holds a vlicl run"):
        claim_folder(out, "vibe")


def test_a_run_recorded_with_relative_paths_by_an_earlier_version_rescores_from_anywhere(tmp_path, builtin_root,
                                                                                        monkeypatch):
    """results.json of earlier versions held ``out``, ``store`` and ``data_root`` as given
    (relative to where the run started): rescore finds all three from the run folder."""
    made_in = tmp_path / "made-in"
    shutil.copytree(builtin_root, made_in / "data")
    out = made_in / "runs" / "r"
    _quiet(_config(out, made_in / "data"))
    csvs = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    meta = json.loads((out / "results.json").read_text())
    meta["config"].update(out="runs/r", store="runs/r/store.sqlite", data_root="data")
    (out / "results.json").write_text(json.dumps(meta))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert rescore(Path("../made-in/runs/r"), stdout=io.StringIO(), stderr=io.StringIO()).exit_code == 0
    assert {p.name: p.read_bytes() for p in out.glob("*.csv")} == csvs
    assert _tree(tmp_path / "elsewhere") == []
    assert json.loads((out / "results.json").read_text())["config"]["data_root"] == str(made_in / "data")
