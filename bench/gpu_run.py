"""End-to-end runs for ``bench/gpu_check.py``: ``python -m icl.run vibe --fast`` with a real
model family at its full size (Painter ViT-L, the official 896x448 canvas) with random weights,
through the runner itself (requests, store, scoring, files).

Configurations, each a fresh run of the same plan:

- ``bf16_b{B}_device``: bf16, batches of B, answers decoded and scored on the device, scoring
  overlapped with the model's next batch (``--eval device``, the default on CUDA);
- ``bf16_b{B}_host``: the same model, answers copied back and scored by the host's numpy path;
- ``fp32_b1_host``: fp32, one request per call, host scoring (the naive baseline);
- ``bf16_b{B}_device_ray{W}``: the first configuration through ``--ray`` with W workers (one per
  GPU), when ``ray_workers`` >= 2 (two or more GPUs visible).

Samples/s is items over the engine's time less the model's load (random weights are built on
the host at load; a Ray run's loads overlap, so their mean is taken out). Random weights are
fine: the work does not depend on the values. ``python bench/gpu_run.py --dry-run-cpu`` runs the
same code on the CPU with a small Painter on a small plan (a check of the script, no meaningful
figures; ``tests/ops/gpu/test_gpu_check_script.py`` runs it).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icl.models.vicl.painter import Painter, PainterNet  # noqa: E402

MODEL = "painter-random"


class RandomPainter(Painter):
    """Painter with random weights (no weight file; built at load, on the host in float32)."""

    name = MODEL

    def model_files(self):
        return ()

    def build(self):
        from bench.gpu_models import _random_

        return _random_(PainterNet(self.cfg), 0)


def _scores(store: Path) -> dict[str, dict[str, float]]:
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {k: json.loads(m) for k, m in con.execute("SELECT item_key, metrics FROM scores")}
    finally:
        con.close()


def _max_diff(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, row in a.items():
        for name, x in row.items():
            y = b.get(key, {}).get(name, math.nan)
            d = 0.0 if (x == y or (math.isnan(x) and math.isnan(y))) else abs(x - y)
            out[name] = max(out.get(name, 0.0), d)
    return out


def run(out_dir: Path, device: str = "cuda", dry_run: bool = False, ray_workers: int = 0,
        batch: Optional[int] = None) -> dict[str, Any]:
    from icl.models import register_model
    from icl.run.planning.config import ModelSpec, RunConfig
    from icl.run.runner import run as run_benchmark

    register_model(MODEL, "bench.gpu_run:RandomPainter", replace=True)
    out_dir = Path(out_dir)
    b = batch or (4 if dry_run else 32)
    args: dict[str, Any] = {}
    options: dict[str, Any] = {}
    if dry_run:  # a small Painter on a small plan: the same code, seconds on the CPU
        from bench.gpu_models import SMALL

        args["config"] = json.dumps(SMALL["painter"])
        options = {"tasks": ("edges", "denoising"), "datasets": ("scenes-a",), "limit": 4}
    configs = {f"bf16_b{b}_device": ("bf16", b, "device", 0), f"bf16_b{b}_host": ("bf16", b, "host", 0),
               "fp32_b1_host": ("fp32", 1, "host", 0)}
    if ray_workers >= 2:
        configs[f"bf16_b{b}_device_ray{ray_workers}"] = ("bf16", b, "device", ray_workers)
    report: dict[str, Any] = {"model": "painter (ViT-L, 896x448) random weights" if not dry_run else "painter (small)",
                              "benchmark": "vibe --fast", "device": device, "runs": {}}
    for name, (dtype, bs, where, workers) in configs.items():
        out = out_dir / f"run-{name}"
        spec = ModelSpec(MODEL, {**args, "dtype": dtype, "batch_size": bs})
        config = RunConfig(benchmark="vibe", fast=True, options=dict(options), models=[spec], out=out, device=device,
                           evaluate=where, plots=False, progress=False, ray="auto" if workers else None,
                           workers=workers or None)
        t0 = time.perf_counter()
        try:
            outcome = run_benchmark(config, io.StringIO(), io.StringIO())
        except Exception as exc:  # one configuration failing keeps the others' figures
            report["runs"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"e2e run {name}: FAILED {type(exc).__name__}: {exc}", flush=True)
            continue
        meta = json.loads((out / "results.json").read_text())
        loads = [c for c in meta["compute"] if c["stage"] == "load"]
        load_s = sum(c["wall_s"] for c in loads) / max(1, workers or 1)
        execute_s = outcome.timings["execute_s"]
        n = outcome.stats.computed
        row = {"items": n, "failed": outcome.failed_items, "execute_s": execute_s, "load_s": load_s,
               "wall_s": time.perf_counter() - t0, "samples_per_s": n / max(execute_s - load_s, 1e-9),
               "stages": {c["stage"]: {"wall_s": c["wall_s"], "samples": c["samples"]} for c in meta["compute"]}}
        if workers:
            row["ray"] = meta.get("ray")
        report["runs"][name] = row
        print(f"e2e run {name:<24} {n} items, {row['samples_per_s']:8.1f} samples/s (load {load_s:.1f} s, "
              f"{outcome.failed_items} failed)", flush=True)
    runs = report["runs"]
    first = f"bf16_b{b}_device"
    if all("samples_per_s" in runs.get(k, {}) for k in (first, f"bf16_b{b}_host", "fp32_b1_host")):
        fast = runs[first]["samples_per_s"]
        report["device_vs_host"] = fast / runs[f"bf16_b{b}_host"]["samples_per_s"]
        report["device_vs_fp32_b1"] = fast / runs["fp32_b1_host"]["samples_per_s"]
        report["max_abs_diff_device_vs_host"] = _max_diff(_scores(out_dir / f"run-{first}" / "store.sqlite"),
                                                          _scores(out_dir / f"run-bf16_b{b}_host" / "store.sqlite"))
        ray_name = f"bf16_b{b}_device_ray{ray_workers}"
        if "samples_per_s" in runs.get(ray_name, {}):
            report["ray_vs_one_process"] = runs[ray_name]["samples_per_s"] / fast
            report["ray_csvs_identical"] = all(
                p.read_bytes() == (out_dir / f"run-{ray_name}" / p.name).read_bytes()
                for p in (out_dir / f"run-{first}").glob("*.csv"))
        print(f"e2e: device {report['device_vs_host']:.2f}x host, {report['device_vs_fp32_b1']:.2f}x fp32 batch 1"
              + (f", Ray x{ray_workers} {report['ray_vs_one_process']:.2f}x one process (CSVs identical: "
                 f"{report['ray_csvs_identical']})" if "ray_vs_one_process" in report else ""), flush=True)
    return report


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("gpu_run_out"))
    p.add_argument("--dry-run-cpu", action="store_true", help="a small Painter on the CPU (checks the script)")
    p.add_argument("--ray-workers", type=int, default=0, help="also run through Ray with this many workers")
    args = p.parse_args(argv)
    report = run(args.out, "cpu" if args.dry_run_cpu else "cuda", args.dry_run_cpu, args.ray_workers)
    (args.out / "gpu_run.json").write_text(json.dumps(report, indent=2))
    return 1 if any("error" in r or r.get("failed") for r in report["runs"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
