"""Plots are drawn on ``Figure`` objects: no pyplot state and no global backend switch, so a
notebook's matplotlib session is left as it was (``icl.evaluate``; issue 19, issue 29)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_plots_leave_pyplot_and_the_backend_alone(tmp_path):
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        import matplotlib
        matplotlib.use("svg")  # the caller's choice, which plotting must keep
        from icl.report.aggregate import Aggregate, RankTable, TaskSpec
        from icl.report.plots import rank_heatmap, task_plot

        task = TaskSpec("flip", ("psnr", "lpips"), ("psnr", "lpips"), frozenset({{"lpips"}}))
        aggs = [Aggregate(m, "1", d, "flip", 1, k, v, 0.0, 4, 0, 0)
                for m in ("a", "b") for d in ("x", "y", "z") for k, v in (("psnr", 20.0), ("lpips", 0.3))]
        out = Path({str(tmp_path)!r})
        radar = task_plot(task, aggs, 1, out / "radar.png")[0]
        table = RankTable(1, ["a", "b"], ["flip"], task_ranks={{"flip": {{"a": 1.0, "b": 2.0}}}},
                          overall={{"a": 1.0, "b": 2.0}})
        heat = rank_heatmap(table, out / "ranks.png")[0]
        print(json.dumps({{"backend": matplotlib.get_backend(), "pyplot": "matplotlib.pyplot" in sys.modules,
                          "files": [radar.stat().st_size > 1000, heat.stat().st_size > 1000]}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"backend": "svg", "pyplot": False, "files": [True, True]}
