"""The visual benchmark's diagnostics (icl.benchmarks.vibe.diagnostics, issue 26) on models whose
behaviour is known, through real runs of ``python -m icl.run vibe --fast`` (its ``main``, in this
process): the built-in baselines
(icl/models/builtin.py) are the constructed models: ``identity`` hands the query through and
ignores the context, ``copy-target`` copies the first context output (so it also keeps to the
context's palette and depends on the context), ``oracle`` returns the encoded target whatever
the context."""

import csv
import json
import math
import sqlite3
import numpy as np
import pytest

from icl.benchmarks.vibe import diagnostics as diag
from icl.benchmarks.vibe.benchmark import Vibe

from icl.run.__main__ import main

TASKS = "edges,segmentation,denoising"


def _run(out, data, *extra):
    args = ["vibe", "--fast", "--tasks", TASKS, "--datasets", "scenes-a,photos", "--limit", "2", "--out", str(out),
            "--data-root", str(data), "--no-plots", "--no-progress", *extra]
    assert main(args) == 0


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def full_run(builtin_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("diag") / "run"
    _run(out, builtin_root, "--sensitivity-fraction", "1")
    return out


def test_constructed_models_score_one_on_their_behaviour(full_run):
    rows = {(r["model"], r["task"]): r for r in _csv(full_run / "diagnostics.csv")}
    assert {m for m, _ in rows} == {"oracle", "copy-target", "identity"}
    colour_coded = {"edges", "segmentation"}
    for task in TASKS.split(","):
        hand, copy = rows[("identity", task)], rows[("copy-target", task)]
        assert float(hand["handthrough_ssim"]) == pytest.approx(1.0, abs=1e-9), task
        assert float(copy["copy_ssim"]) == pytest.approx(1.0, abs=1e-9), task
        # neither is the other: the diagnostics tell the two behaviours apart
        assert float(hand["copy_ssim"]) < 0.9 and float(copy["handthrough_ssim"]) < 0.9, task
        if task in colour_coded:
            assert float(copy["palette_adherence"]) == 1.0, task  # its pixels are the context's colours
            assert float(hand["palette_adherence"]) < 0.5, task  # a photograph is not the palette
        else:
            assert copy["palette_adherence"] == "" and hand["palette_adherence"] == "", task


def test_context_sensitivity_zero_for_context_ignoring_models(full_run):
    rows = _csv(full_run / "diagnostics.csv")
    for r in rows:
        assert int(r["sensitivity_n"]) >= 1, r
        if r["model"] in ("identity", "oracle"):  # the same answer whatever the context
            assert float(r["output_change"]) == 0.0 and float(r["metric_change"]) == 0.0, r
        else:
            assert float(r["output_change"]) > 0.05, r
    changes = [r for r in rows if r["model"] == "copy-target"]
    assert any(float(r["metric_change"]) > 0 for r in changes)
    per_sample = _csv(full_run / "context_sensitivity.csv")
    assert {r["model"] for r in per_sample} == {"oracle", "copy-target", "identity"}
    for r in per_sample:
        assert r["donor"] != r["query"]
        if r["model"] == "copy-target":
            assert float(r["output_change"]) > 0
    report = (full_run / "report.md").read_text()
    assert "### Diagnostics" in report and "| copy-target | edges | 1 |" in report
    meta = json.loads((full_run / "results.json").read_text())
    assert "diagnostics.csv" not in meta["artifacts"] and "context_sensitivity.csv" in meta["artifacts"]


def test_diagnostics_are_stored_per_sample_and_never_ranked(full_run, builtin_root, tmp_path, capsys):
    with sqlite3.connect(full_run / "store.sqlite") as db:
        metrics = [json.loads(m) for (m,) in db.execute("SELECT metrics FROM scores WHERE status='ok'")]
    assert metrics and all("handthrough_ssim" in m and "copy_ssim" in m for m in metrics)
    assert any("palette_adherence" in m for m in metrics) and any("palette_adherence" not in m for m in metrics)
    # the subset switched off: no extra item, and the results and ranks are byte-identical
    off = tmp_path / "off"
    _run(off, builtin_root, "--sensitivity-fraction", "0")
    for name in ("results.csv", "vibe_results.csv", "comparisons.csv", "ranks.csv", "oracle_ceiling.csv"):
        assert (off / name).read_bytes() == (full_run / name).read_bytes(), name
    assert not (off / "context_sensitivity.csv").exists()
    assert {r["sensitivity_n"] for r in _csv(off / "diagnostics.csv")} == {"0"}
    planned = json.loads((full_run / "results.json").read_text())["plan"]["items"]
    assert planned > json.loads((off / "results.json").read_text())["plan"]["items"]
    # a second run computes nothing, the extra items included
    capsys.readouterr()
    _run(full_run, builtin_root, "--sensitivity-fraction", "1")
    assert "0 items computed" in capsys.readouterr().out


def test_subset_and_donor_are_seeded_and_deterministic(builtin_root):
    def swapped(fraction, seed=0):
        bench = Vibe({"tasks": ("edges",), "sensitivity_fraction": fraction, "seed": seed, "fast": True,
                      "data_root": builtin_root})
        return bench, [it for it in bench.items() if it.group.get("context") == "swapped"]

    bench, items = swapped(0.5)
    assert items and [it.key for it in items] == [it.key for it in swapped(0.5)[1]]
    assert len(swapped(1.0)[1]) > len(items) and not swapped(0.0)[1]
    for it in items:
        p = it.payload
        assert p.donor != p.query and p.donor_contexts != p.contexts[:p.shots]
        assert len(bench.request(it).context_outputs) == p.shots
        g = next(g for g in bench.plan.groups if g.dataset == p.dataset)
        assert list(p.donor_contexts) == g.contexts[p.donor][:p.shots]
    # PROTOCOL §1.1: the subset is a stable hash of (seed, dataset, query, task), not of run order
    picked = {(it.payload.dataset, it.payload.query) for it in items}
    for dataset, query in picked:
        assert diag.sensitivity_picked(0, dataset, "edges", query, 0.5)
    with pytest.raises(ValueError, match="sensitivity_fraction"):
        Vibe({"sensitivity_fraction": 1.5, "fast": True, "data_root": builtin_root})


def test_swapped_item_is_scored_against_its_own_target_and_shows_the_donor_context(builtin_root):
    bench = Vibe({"tasks": ("segmentation",), "sensitivity_fraction": 1.0, "fast": True, "data_root": builtin_root})
    items = bench.items()
    s = next(it for it in items if it.group.get("context") == "swapped")
    own = next(it for it in items if it.key == s.key.split("/swap:")[0])
    a, b = bench.request(own, privileged=True), bench.request(s, privileged=True)
    assert np.array_equal(a.query, b.query) and np.array_equal(a.oracle_target, b.oracle_target)
    assert not all(np.array_equal(x, y) for x, y in zip(a.context_inputs, b.context_inputs))
    # the same prediction scores the same task metrics under either context
    m_own, m_swapped = bench.score(own, a.oracle_target), bench.score(s, a.oracle_target)
    assert m_own["miou"] == m_swapped["miou"] == 1.0
    assert m_own["handthrough_ssim"] == m_swapped["handthrough_ssim"]


def test_palette_adherence_radius_is_pinned():
    context = np.zeros((4, 4, 3), np.uint8)
    context[:2] = (200, 10, 10)
    pred = np.zeros((2, 2, 3), np.uint8)
    pred[0, 0] = (200, 10, 10)
    pred[0, 1] = (200 - 16, 10, 10)  # at the radius: in
    pred[1, 0] = (200, 10 + 17, 10)  # beyond: out
    pred[1, 1] = (9, 12, 0)  # sqrt(81 + 144) = 15 from black: in
    assert diag.PALETTE_RADIUS == 16.0
    assert diag.palette_adherence(pred, [context]) == 0.75
    assert diag.palette_adherence(pred, [context[:2]]) == 0.5  # colours of the outputs given only
    assert math.isnan(diag.output_change(np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8, 3), np.uint8)))
