"""``python -m icl.run vlicl --fast``: all ten tasks through the one runner, judge included."""

import csv
import json

from icl.benchmarks.vlicl.tasks import TASKS
from icl.run.__main__ import main


def test_fast_run_covers_every_task_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["vlicl", "--fast", "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-progress"]
    assert main(args) == 0
    with open(out / "accuracy.csv", newline="") as f:
        acc = list(csv.DictReader(f))
    assert {r["task"] for r in acc} == set(TASKS) and {r["model"] for r in acc} == {"copy-last"}
    for name in ("shot_summary.csv", "ranks.csv", "capabilities.csv", "episodes.csv", "report.md", "results.json"):
        assert (out / name).is_file(), name
    assert list((out / "plots").glob("*.png"))
    meta = json.loads((out / "results.json").read_text())
    assert meta["judge"]["adapter"] == "vlicl-judge" and meta["artifacts"]["episodes.csv"]
    # text-to-image items were judged: the judge's answers are in the store under its own identity
    assert meta["counts"]["failed"] == 0 and meta["counts"]["planned"] == meta["counts"]["computed"]
    capsys.readouterr()
    assert main(args) == 0
    assert "0 items computed" in capsys.readouterr().out
