"""Acceptance: ``vibe --fast`` runs every task on the built-in data with the three baselines and
writes every file; ranked with the reference models, the oracle is first everywhere (needs
every icl.ops kernel)."""

from __future__ import annotations

import csv
import hashlib
import json

import pytest

from icl.benchmarks.vibe.tasks import list_tasks
from icl.run.__main__ import main


@pytest.mark.slow
def test_fast_run_all_tasks(fast_data, tmp_path, capsys):
    out = tmp_path / "fast"
    assert main(["vibe", "--fast", "--data-root", str(fast_data), "--out", str(out), "--no-progress",
                 "--rank-reference", "true", "--device", "cpu"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.splitlines()[0].startswith("shots=1") and "overall rank" in stdout

    for name in ("results.csv", "results.json", "ranks.csv", "report.md", "report.html", "contexts.csv",
                 "store.sqlite", "plots/ranks_k1.png"):
        assert (out / name).is_file(), name
    for task in list_tasks():
        assert (out / "plots" / f"task_{task}_k1.png").is_file() and (out / "plots" / f"task_{task}_k1.svg").is_file(), task
        assert (out / "plots" / f"qualitative_{task}.png").is_file(), task

    with open(out / "ranks.csv") as f:
        ranks = list(csv.DictReader(f))
    task_ranks = {(r["task"], r["model"]): float(r["rank"]) for r in ranks if r["metric"] == "*"}
    assert {t for t, _ in task_ranks} == {*list_tasks(), "*"}
    assert {m for _, m in task_ranks} == {"oracle", "copy-target", "identity"}
    for (task, model), rank in task_ranks.items():
        if model == "oracle":
            assert rank == 1.0, f"oracle is not first on {task}"
        else:
            assert rank > 1.0, f"{model} ties the oracle on {task}"

    # PROTOCOL §1.4: the oracle decodes back to the ground truth on every task and dataset
    # (PSNR +inf is capped at 100 dB in aggregates; SSIM of identical images is 1 up to float32)
    exact = {"miou": 1.0, "f1": 1.0, "ap50": 1.0, "psnr": 100.0, "lpips": 0.0}
    with open(out / "vibe_results.csv") as f:
        oracle_rows = [r for r in csv.DictReader(f) if r["model"] == "oracle"]
    assert {r["task"] for r in oracle_rows} == set(list_tasks())
    for r in oracle_rows:
        where, value = (r["dataset"], r["task"], r["metric"]), float(r["mean"])
        assert r["n_failed"] == r["n_missing"] == "0", where
        if r["metric"] in exact:
            assert value == exact[r["metric"]], where
        elif r["metric"] == "ssim":
            assert value == pytest.approx(1.0, abs=1e-6), where
        elif r["metric"] == "rmse":  # quantisation floor: below half a bin of the widest range
            assert value < 0.5 * 20.0 / 256, where

    data = json.loads((out / "results.json").read_text())
    assert data["protocol"] == "vibe-1" and data["benchmark"] == "vibe" and data["config"]["fast"] is True
    assert data["config"]["options"]["rank_reference"] is True
    assert data["artifacts"]["contexts.csv"] == hashlib.sha256((out / "contexts.csv").read_bytes()).hexdigest()
    assert set(data["fingerprints"]) == {"dataset:photos", "dataset:scenes-a", "dataset:scenes-b", "lpips:alex"}
    assert "git_revision" in data and data["packages"]["numpy"] and data["packages"]["icl"]
    stages = {(c["model"], c["stage"]) for c in data["compute"]}
    for model in ("oracle", "copy-target", "identity"):
        assert {(model, "model"), (model, "score")} <= stages
    assert ("*", "data") in stages
    assert set(data["timings"]) >= {"plan_s", "execute_s"}
    counts = data["counts"]
    assert counts["failed"] == counts["missing"] == 0 and counts["computed"] == counts["planned"] > 0
    assert counts["planned"] == 3 * data["plan"]["items"]
