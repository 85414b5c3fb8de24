"""Scale-out on Ray (``--ray``): items/s of one run with 1 and 2 CPU workers beside the same run
in one process, with an instant model (what Ray adds per batch) and with a model that sleeps
50 ms per batch (what a second worker gives when the model, not the driver, is the bottleneck).

    python bench/bench_scale.py [--items N] [--json OUT]

The run is best50 ``--fast`` (text answers, cheap scoring on the driver) with batches of one
item (64 batches), answered by the test suite's oracle (``tests/run/_adapters.py``: DiesOnce, which sleeps
``$ICL_TEST_SLEEP`` s per batch and never dies unless asked); items/s is planned items over the engine's ``execute_s`` less the model's load (workers
are started before it, Ray itself once for all runs; a worker's first batch unpickles the
adapter, importing its modules, and that load is taken out, averaged over the workers, which
load in parallel); every run's CSVs are checked equal to the one-process run's. A
local Ray instance on 127.0.0.1 with two CPUs. Not a pytest module (no ``test_`` functions):
CI collects nothing here.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
BATCH = 1  # items per model call


def _csvs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.csv"))}


def measure(items: int = 64, workers: tuple[int, ...] = (1, 2)) -> dict:
    from icl.models import register_model
    from icl.run.planning.config import ModelSpec, RunConfig
    from icl.run.execution.pool import connect
    from icl.run.runner import run

    register_model("dies-once", "tests.run._adapters:DiesOnce", replace=True)
    os.environ.pop("ICL_TEST_KILL_MARKER", None)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p)
    t0 = time.perf_counter()
    where = connect("auto", max(workers), gpus=False)
    ray_start = time.perf_counter() - t0
    limit = max(1, items // 4)  # best50 --fast plans 4 shot counts per question
    report: dict = {"benchmark": "best50 --fast", "limit": limit, "ray": where, "ray_start_s": ray_start, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ICL_TEST_COUNT_LOG"] = str(Path(tmp) / "answered.log")  # read by the workers' model
        for model, sleep in (("instant", "0"), ("sleep50", "0.05")):
            os.environ["ICL_TEST_SLEEP"] = sleep
            rows: dict = {}
            reference = None
            for w in (0, *workers):
                out = Path(tmp) / f"{model}-{w}"
                config = RunConfig(benchmark="best50", fast=True, options={"limit": limit},
                                   models=[ModelSpec("dies-once", {"batch_size": BATCH})], out=out, plots=False, progress=False,
                                   ray="auto" if w else None,
                                   workers=w or None)
                outcome = run(config, io.StringIO(), io.StringIO())
                assert outcome.exit_code == 0, outcome.failures[:3]
                n = outcome.stats.computed
                compute = json.loads((out / "results.json").read_text())["compute"]
                load_s = sum(c["wall_s"] for c in compute if c["stage"] == "load") / max(w, 1)
                seconds = outcome.timings["execute_s"] - load_s
                rows["local" if not w else f"ray_{w}"] = {"items": n, "execute_s": outcome.timings["execute_s"],
                                                          "load_s": load_s, "items_per_s": n / seconds}
                files = _csvs(out)
                reference = reference or files
                assert files == reference, f"{model} with {w} workers: results differ from the one-process run"
            one = rows["ray_1"]["items_per_s"]
            rows["ray_overhead_per_batch_ms"] = 1e3 * BATCH * (1 / one - 1 / rows["local"]["items_per_s"])
            rows["speedup_2_vs_1"] = rows["ray_2"]["items_per_s"] / one if "ray_2" in rows else None
            report["models"][model] = rows
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=64, help="items planned (best50 --fast, 4 per question; at most 64)")
    p.add_argument("--json", type=Path, help="write the figures here too")
    args = p.parse_args(argv)
    report = measure(args.items)
    print(f"{report['benchmark']}, {report['limit'] * 4} items in batches of {BATCH}; Ray started in "
          f"{report['ray_start_s']:.1f} s ({report['ray']})")
    for model, rows in report["models"].items():
        line = "  ".join(f"{k} {v['items_per_s']:7.1f} items/s" for k, v in rows.items() if isinstance(v, dict))
        print(f"{model:<14} {line}  | Ray adds {rows['ray_overhead_per_batch_ms']:.1f} ms per batch; "
              f"2 workers: {rows['speedup_2_vs_1']:.2f}x of 1")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
