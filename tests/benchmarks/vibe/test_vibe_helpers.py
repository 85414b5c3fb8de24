"""A vibe run scores and draws the same whether its LPIPS and figures run in helper processes
(icl.helpers, the default) or in the run's own process (``ICL_HELPERS=0``), through real runs
of ``python -m icl.run vibe --fast`` (its ``main``, in this process)."""

import csv
import json
import math

import pytest

from icl.ops import lpips_weights
from icl.run.__main__ import main


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # two runs, one of them starting the helpers (torch and matplotlib imports)
def test_helpers_change_nothing_but_where_the_work_runs(builtin_root, tmp_path, monkeypatch):
    if lpips_weights("alex") is None:
        pytest.skip("no LPIPS weights installed")
    outs = {}
    for helpers in ("1", "0"):
        monkeypatch.setenv("ICL_HELPERS", helpers)
        out = tmp_path / f"helpers{helpers}"
        assert main(["vibe", "--fast", "--tasks", "denoising,depth,segmentation", "--datasets", "scenes-a",
                     "--limit", "2", "--models", "identity", "--out", str(out), "--data-root", str(builtin_root),
                     "--no-progress", "--qualitative", "1"]) == 0
        outs[helpers] = out
    on, off = (_rows(outs[h] / "results.csv") for h in ("1", "0"))
    assert len(on) == len(off) > 0
    for a, b in zip(on, off):
        assert {k: v for k, v in a.items() if k not in ("value", "ci_low", "ci_high")} == \
               {k: v for k, v in b.items() if k not in ("value", "ci_low", "ci_high")}
        if a["metric"] == "lpips":  # float32 trunks in two processes: equal to rounding
            assert math.isclose(float(a["value"]), float(b["value"]), rel_tol=1e-5, abs_tol=1e-7)
        else:
            assert a["value"] == b["value"]
    lpips = [r for r in on if r["metric"] == "lpips"]
    assert lpips and all(math.isfinite(float(r["value"])) and float(r["value"]) > 0 for r in lpips)
    # the same figures and grids; LPIPS recorded as run (its backend) in both
    names = {h: sorted(p.relative_to(outs[h]).as_posix() for p in outs[h].rglob("*.png")) for h in outs}
    assert names["1"] == names["0"] and any(n.startswith("plots/task_") for n in names["1"])
    for h in outs:
        backends = json.loads((outs[h] / "results.json").read_text())["backends"]
        assert backends["lpips"] == "reference"
