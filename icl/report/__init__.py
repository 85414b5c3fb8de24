"""Aggregation, rank tables, files and plots of a benchmark run.

``write_report`` turns stored per-sample results into results.csv, ranks.csv, results.json,
report.md and PNG plots under an output folder, and returns the terminal summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from icl.report.aggregate import PSNR_CAP, Aggregate, RankTable, TaskSpec, aggregate, rank_models, rank_values
from icl.report.plots import qualitative_grid, radar_plot, rank_heatmap, safe_name
from icl.report.tables import (markdown_report, missing_lines, missing_summary, rank_rows, summary_text, write_json,
                               write_ranks_csv, write_results_csv)

__all__ = [
    "PSNR_CAP", "Aggregate", "RankTable", "Report", "TaskSpec", "aggregate", "rank_models", "rank_values",
    "write_report",
]


@dataclass
class Report:
    aggregates: list[Aggregate]
    ranks: list[RankTable]
    summary: str
    missing: list[str]
    missing_summary: list[str]
    files: list[Path] = field(default_factory=list)


def write_report(out: Path, rows: Sequence, specs: Mapping[str, TaskSpec], meta: Mapping[str, Any],
                 compute: Sequence[Mapping[str, Any]] = (), failures: Sequence[str] = (),
                 plots: bool = True, qualitative_dir: Path | None = None, model_order: Sequence[str] = ()) -> Report:
    """Write every report file for ``rows`` (``SampleResult``) into ``out``; ``meta`` goes into
    results.json as is (protocol, git revision, versions, seeds, context hash, timings...)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    aggs = aggregate(rows, specs)
    tables = rank_models(aggs, specs, model_order)
    files = [out / "results.csv", out / "ranks.csv", out / "results.json", out / "report.md"]
    write_results_csv(aggs, files[0])
    write_ranks_csv(tables, files[1])
    missing = missing_lines(aggs)
    plot_files: list[Path] = []
    if plots:
        plot_dir = out / "plots"
        plot_dir.mkdir(exist_ok=True)
        for t in tables:
            for task in t.tasks:
                p = radar_plot(specs[task], aggs, t.shots, plot_dir / f"radar_{safe_name(task)}_k{t.shots}.png",
                               t.models)
                plot_files += [p] if p else []
            p = rank_heatmap(t, plot_dir / f"ranks_k{t.shots}.png")
            plot_files += [p] if p else []
        if qualitative_dir is not None and qualitative_dir.is_dir() and tables:
            shots = tables[0].shots
            models = tables[0].models
            names = {safe_name(t) for t in specs}
            for task_dir in sorted(p for p in qualitative_dir.iterdir() if p.is_dir() and p.name in names):
                samples = sorted(p for p in task_dir.iterdir() if p.is_dir())
                p = qualitative_grid(samples, models, shots, plot_dir / f"qualitative_{task_dir.name}.png")
                plot_files += [p] if p else []
    data = dict(meta)
    data.update(
        results=aggs,
        ranks=[dict(shots=t.shots, overall=t.overall, task_ranks=t.task_ranks, metric_ranks=t.metric_ranks,
                    values=t.values, excluded=t.excluded) for t in tables],
        rank_rows=rank_rows(tables),
        missing=missing,
        compute=list(compute),
        failures=dict(count=len(failures), items=list(failures[:1000])),
        task_specs={name: dict(metrics=s.metrics, rank_metrics=s.rank_metrics, lower_is_better=s.lower_is_better)
                    for name, s in sorted(specs.items())},
    )
    write_json(data, files[2])
    rel_plots = [str(p.relative_to(out)) for p in plot_files]
    files[3].write_text(markdown_report(meta, aggs, tables, list(failures), compute, rel_plots))
    return Report(aggs, tables, summary_text(tables), missing, missing_summary(aggs), files + plot_files)
