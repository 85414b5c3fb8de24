"""The common files every run writes: one CSV per summary table, results.json, report.md and
plots/. Each file is written to a unique temporary name beside it and renamed
(:mod:`icl.run.atomic`), so a killed run never leaves a truncated file behind."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from icl.benchmarks.base import Benchmark
from icl.report.tables import csv_text, jsonable
from icl.run.atomic import write_text
from icl.run.meta import git_revision, package_versions
from icl.store import Failure


def provenance() -> dict[str, Any]:
    """Git revision (or the installed version), library versions, backends that ran, CUDA."""
    import icl

    info: dict[str, Any] = dict(git_revision=git_revision(), icl_version=icl.__version__,
                                packages=package_versions(),
                                created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    for name in ("transformers", "diffusers"):
        if name in sys.modules:  # recorded when a model used them
            info["packages"][name] = getattr(sys.modules[name], "__version__", None)
    torch = sys.modules.get("torch")
    if torch is not None:
        cuda = dict(torch=torch.__version__, cuda=torch.version.cuda)
        if torch.cuda.is_initialized():
            cuda["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda"] = cuda
    if "icl.ops" in sys.modules:  # the backend that ran each kernel in this process
        info["backends"] = sys.modules["icl.ops"].backends_used()
    return info


def write_outputs(out: Path, bench: Benchmark, tables: Mapping[str, list[dict[str, Any]]], meta: Mapping[str, Any],
                  failures: Sequence[Failure], answers: Optional[Callable[[str], dict[str, Any]]],
                  plots: bool = True) -> list[Path]:
    """Write every common file of a run into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, rows in tables.items():
        path = out / f"{name}.csv"
        write_text(path, csv_text(rows))
        files.append(path)
    t_plots = time.perf_counter()
    plot_files = bench.plots(tables, out / "plots", answers) if plots else []
    if isinstance(meta.get("timings"), dict):
        meta["timings"]["plots_s"] = time.perf_counter() - t_plots
    data = {**meta, **provenance(), "tables": {n: f"{n}.csv" for n in tables},
            "failures": dict(count=len(failures), items=[f.message for f in failures[:1000]])}
    write_text(out / "results.json", json.dumps(jsonable(data), indent=2, sort_keys=True, allow_nan=False) + "\n")
    files.append(out / "results.json")
    write_text(out / "report.md", report_markdown(bench, tables, data, failures,
                                                  [str(p.relative_to(out)) for p in plot_files]))
    files.append(out / "report.md")
    return files + list(plot_files)


def report_markdown(bench: Benchmark, tables: Mapping[str, list[dict[str, Any]]], meta: Mapping[str, Any],
                    failures: Sequence[Failure], plots: Sequence[str]) -> str:
    config = meta.get("config", {})
    lines = [f"# {bench.name} report: {config.get('name', '')}", ""]
    for key in ("protocol", "git_revision", "icl_version", "created", "device", "run_id"):
        if meta.get(key) is not None:
            lines.append(f"- **{key}**: `{meta[key]}`")
    if config.get("options"):
        lines.append("- **options**: " + ", ".join(f"{k}=`{v}`" for k, v in config["options"].items()))
    for label, m in (meta.get("models") or {}).items():
        lines.append(f"- **model** `{label}`: id `{m['model_id']}`")
    for name, sha in (meta.get("artifacts") or {}).items():
        lines.append(f"- **{name}** SHA-256: `{sha}`")
    counts = meta.get("counts") or {}
    if counts:
        lines.append("- **counts**: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    lines.append("")
    section = bench.report(tables)
    if section:
        lines += [section, ""]
    if failures:
        lines += [f"## Failures ({len(failures)})", ""] + [f"- [{f.stage}] {f.message}" for f in failures[:200]]
        if len(failures) > 200:
            lines.append(f"- ... and {len(failures) - 200} more (see the store's failures table)")
        lines.append("")
    compute = meta.get("compute") or []
    if compute:
        lines += ["## Compute", "", "| model | stage | device | samples | wall s | samples/s | peak memory MiB |",
                  "|---|---|---|---|---|---|---|"]
        for c in compute:
            mem = c.get("peak_memory_bytes")
            mem_s = "-" if mem is None else f"{mem / 2**20:.1f} ({c.get('memory_kind')})"
            rate = c.get("samples_per_s")
            rate_s = "-" if rate is None or not math.isfinite(rate) else f"{rate:.1f}"
            lines.append(f"| {c['model']} | {c['stage']} | {c['device']} | {c['samples']} | {c['wall_s']:.3f} | "
                         f"{rate_s} | {mem_s} |")
        lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots] + [""]
    return "\n".join(lines)
