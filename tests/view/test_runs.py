"""Finding run folders and telling their status without taking their lock."""

from __future__ import annotations

import json
import time

from icl.run.outputs.lock import FolderLock
from icl.view.runs import Runs, lock_holder
from icl.store.sqlite import Score, ScoreKey, Store
from tests.view._runs import BENCHMARK, PROTOCOL, SCORER, write_run


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


def _store_steps(monkeypatch):
    """A counter of the SQLite virtual-machine steps (in hundreds) run on the connections opened
    from now on: the viewer's reads of the run's store (its own index was opened before)."""
    import icl.store.sqlite as store_module

    steps = [0]
    connect = store_module.sqlite3.connect

    def counting(*args, **kwargs):
        conn = connect(*args, **kwargs)
        conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1) or 0, 100)
        return conn

    monkeypatch.setattr(store_module.sqlite3, "connect", counting)
    return steps


def _poll_steps(folder, items, monkeypatch):
    """The store steps of one poll of a live run of ``2 * items`` scores, after its writer stored
    10 more, and the run's count of scores before and after."""
    import icl.store.sqlite as store_module

    clock = store_module.time.time
    with monkeypatch.context() as m:  # the run's scores but the new ones written an hour ago
        m.setattr(store_module.time, "time", lambda: clock() - 3600)
        ids = write_run(folder / "live", n=items, hostile=False, judged=False, samples=False)
    runs = Runs([folder])
    run = runs.get("live")
    while run.index.building:
        time.sleep(0.02)
    runs.all()
    before = run.done + run.failed
    with Store(folder / "live" / "store.sqlite") as store:
        store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, f"new/{j}", ids["alpha"], "", SCORER), "ok",
                                        {"acc": 0.5}) for j in range(10)])
    with monkeypatch.context() as m:
        steps = _store_steps(m)
        runs.all()
    return steps[0], before, run.done + run.failed


def test_a_poll_reads_what_the_store_gained_not_the_whole_store(tmp_path, monkeypatch):
    """The runs page polls every second; a live run's store changes between polls. One poll's work
    in the store stays the same whether it holds 1,000 scores or 10,000."""
    small, n0, n1 = _poll_steps(tmp_path / "small", 500, monkeypatch)
    assert (n0, n1) == (1000, 1010)
    large, n0, n1 = _poll_steps(tmp_path / "large", 5_000, monkeypatch)
    assert (n0, n1) == (10_000, 10_010)
    print(f"store steps of a poll: {small} (1,000 scores), {large} (10,000)")
    assert large < 2 * small + 50, (small, large)  # reading every row: 10 times the small store's


def test_counts_stay_exact_when_a_score_is_written_again(tmp_path):
    """A failed score stored again as ok replaces its row: counted once, as ok."""
    ids = write_run(tmp_path / "r", n=6, hostile=False, judged=False)
    runs = Runs([tmp_path])
    run = runs.get("r")
    assert (run.done, run.failed) == (11, 1)
    key = next(iter(Store(tmp_path / "r" / "store.sqlite", readonly=True).read(
        "SELECT item_key FROM scores WHERE status='failed'")))[0]
    with Store(tmp_path / "r" / "store.sqlite") as store:
        store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, key, ids["alpha"], "", SCORER), "ok",
                                        {"acc": 1.0}),
                                  Score(ScoreKey(BENCHMARK, PROTOCOL, "new", ids["beta"], "", SCORER), "failed",
                                        {}, "boom")])
    run = runs.get("r")
    assert (run.done, run.failed) == (12, 1)
