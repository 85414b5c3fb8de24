"""Acceptance: ``--fast`` runs every task on the built-in data with the three baselines and
writes every file; the oracle ranks first everywhere (needs every icl.ops kernel)."""

from __future__ import annotations

import csv
import hashlib
import json

import pytest

from icl.run.__main__ import main
from icl.tasks import list_tasks


@pytest.mark.slow
def test_fast_run_all_tasks(fast_data, tmp_path, capsys):
    out = tmp_path / "fast"
    assert main(["--fast", "--data-root", str(fast_data), "--out", str(out), "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.splitlines()[0].startswith("shots=1") and "overall rank" in stdout

    for name in ("results.csv", "results.json", "ranks.csv", "report.md", "contexts.csv", "store.sqlite",
                 "plots/ranks_k1.png"):
        assert (out / name).is_file(), name
    for task in list_tasks():
        assert (out / "plots" / f"radar_{task}_k1.png").is_file(), task
        assert (out / "plots" / f"qualitative_{task}.png").is_file(), task

    with open(out / "ranks.csv") as f:
        ranks = list(csv.DictReader(f))
    task_ranks = {(r["task"], r["model"]): float(r["rank"]) for r in ranks if r["metric"] == "*"}
    assert {t for t, _ in task_ranks} == {*list_tasks(), "*"}
    for (task, model), rank in task_ranks.items():
        if model == "oracle":
            assert rank == 1.0, f"oracle is not first on {task}"
        else:
            assert rank > 1.0, f"{model} ties the oracle on {task}"

    data = json.loads((out / "results.json").read_text())
    assert data["protocol"] == "vibe-1" and data["seeds"] == {"global_seed": 0}
    assert data["context_csv_sha256"] == hashlib.sha256((out / "contexts.csv").read_bytes()).hexdigest()
    assert "git_revision" in data and data["packages"]["numpy"] and data["packages"]["icl"]
    stages = {(c["model"], c["stage"]) for c in data["compute"]}
    for model in ("oracle", "copy-target", "identity"):
        assert {(model, "model"), (model, "score")} <= stages
    assert ("*", "data") in stages
    assert set(data["timings"]) >= {"plan_s", "execute_s", "report_s", "total_s"}
    assert data["counts"]["failed"] == 0 and data["counts"]["computed"] == data["counts"]["planned"]
