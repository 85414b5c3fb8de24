"""Finding run folders and telling their status without taking their lock."""

from __future__ import annotations

import json

from icl.run.outputs.lock import FolderLock
from icl.view.runs import Runs, lock_holder
from tests.view._runs import write_run


def test_runs_are_found_recursively_and_named_by_their_relative_path(tmp_path):
    write_run(tmp_path / "a" / "x", n=2, hostile=False)
    write_run(tmp_path / "b", n=2, hostile=False)
    (tmp_path / "b" / "samples").mkdir()
    (tmp_path / "b" / "samples" / "results.json").write_text("{}")  # inside a run: not a run of its own
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "results.json").write_text("{}")
    assert [r.key for r in Runs([tmp_path]).all()] == ["a/x", "b"]
    two = Runs([tmp_path / "a", tmp_path / "b"])
    assert [r.key for r in two.all()] == ["0/x", "1/."]
    assert two.get("../b") is None and two.get(str(tmp_path / "b")) is None


def test_status_running_finished_interrupted(tmp_path):
    write_run(tmp_path / "r", n=3, hostile=False)
    runs = Runs([tmp_path])
    run = runs.get("r")
    assert run.status == "finished with failures" and run.done == 5 and run.failed == 1 and run.planned == 6
    with FolderLock(tmp_path / "r", ["python", "-m", "icl.run", "toy"]):  # the run's own lock, held
        assert lock_holder(tmp_path / "r")["pid"] > 0
        assert runs.get("r").status == "running"
    assert runs.get("r").status == "finished with failures"
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    (tmp_path / "r" / "results.json").write_text(json.dumps({**results, "run_id": "an earlier run"}))
    assert runs.get("r").status == "interrupted"  # the store's last start is not the one results.json records


def test_a_run_going_on_shows_the_plan_it_recorded_when_it_started(tmp_path):
    """A first run has no results.json and no --check: its plan comes from the store's runs row,
    which the runner writes as it starts (``planned``: items x models x judges), so the runs page
    shows done/planned and an ETA while it runs."""
    from icl.store import Store

    write_run(tmp_path / "r", n=3, hostile=False)
    (tmp_path / "r" / "results.json").unlink()  # as a run that has not finished yet
    with Store(tmp_path / "r" / "store.sqlite") as store:
        store.start_run({"config": {"benchmark": "toy", "again": True}, "protocol": "toy-1", "planned": 40})
    runs = Runs([tmp_path])
    with FolderLock(tmp_path / "r", ["python", "-m", "icl.run", "toy"]):
        run = runs.get("r")
        assert run.status == "running" and run.planned == 40, (run.status, run.planned)


def test_the_runner_records_its_plan_as_it_starts(tmp_path):
    """The runs row a run writes as it starts holds the scores it plans, the count results.json
    reports at its end (``counts.planned``)."""
    import sqlite3

    from icl.run.__main__ import main

    out = tmp_path / "out"
    assert main(["best50", "--fast", "--out", str(out), "--no-progress", "--no-plots"]) == 0
    with sqlite3.connect(out / "store.sqlite") as c:
        (info,) = c.execute("SELECT info FROM runs").fetchone()
    assert json.loads(info)["planned"] == json.loads((out / "results.json").read_text())["counts"]["planned"] > 0
