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
