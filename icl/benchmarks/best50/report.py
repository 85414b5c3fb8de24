"""Write best50 results: results.csv, per_sample.csv, results.json, report.md and PNG plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from icl.benchmarks.best50.score import COUNTS, METRICS, Scores

PLOT_FILES = {"P@50": "plot_p50.png", "R@50": "plot_r50.png", "F1@50": "plot_f1_50.png",
              "mF1@50:95": "plot_mf1_50_95.png", "mIoU@50:95": "plot_miou_50_95.png", "mIoU_best": "plot_miou_best.png"}
_COLUMNS = ("k", "kind", "group", *COUNTS, *METRICS)


def _label(row: dict) -> str:
    return row["group"] if row["kind"] == "class" else f"{row['kind']} ({row['group']})"


def markdown_table(rows: list[dict]) -> str:
    """One markdown table: a line per row (class, mean, pooled), counts and the six metrics."""
    head = ["", *COUNTS, *METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        name = _label(r) if r["kind"] == "class" else f"**{_label(r)}**"
        lines.append("| " + " | ".join([name, *(str(r[c]) for c in COUNTS), *(f"{r[m]:.4f}" for m in METRICS)]) + " |")
    return "\n".join(lines)


def write_csv(path: Path, rows: list[dict], columns: tuple[str, ...]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow([f"{r[c]:.6f}" if isinstance(r[c], float) else ("" if r[c] is None else r[c]) for c in columns])


def plot_metrics(scores: Scores, out: Path) -> list[Path]:
    """One PNG per metric: the metric against K, a line per class plus mean and pooled (clean7)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = scores.ks
    paths = []
    classes = sorted({r["group"] for r in scores.rows if r["kind"] == "class"})
    # one figure redrawn per metric, fixed margins (tight_layout costs more than the drawing)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=90)
    fig.subplots_adjust(left=0.1, right=0.72, top=0.91, bottom=0.13)
    for metric, name in PLOT_FILES.items():
        ax.cla()
        series = [(c, "class", c, dict(lw=1.2, marker="o", ms=3)) for c in classes]
        series += [("mean (all)", "mean", "all", dict(lw=2.4, color="black")),
                   ("pooled (clean7)", "pooled", "clean7", dict(lw=2.0, color="black", ls="--"))]
        for label, kind, group, style in series:
            pts = [(r["k"], r[metric]) for r in scores.rows if r["kind"] == kind and r["group"] == group]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        ax.set_xlabel("K (marked support examples)")
        ax.set_ylabel(metric)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"best50: {metric} against K")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
        path = out / name
        fig.savefig(path)
        paths.append(path)
    plt.close(fig)
    return paths


def write_report(out: str | Path, scores: Scores, meta: dict[str, Any], plots: bool = True) -> dict[str, Path]:
    """Write every output file into ``out`` (created); return their paths by kind."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"results.csv": out / "results.csv", "per_sample.csv": out / "per_sample.csv",
             "results.json": out / "results.json", "report.md": out / "report.md"}
    write_csv(files["results.csv"], scores.rows, _COLUMNS)
    write_csv(files["per_sample.csv"], scores.per_sample(),
              ("k", "class", "sample_id", "line", "n_pred", "n_gt", "tp@50", *METRICS))
    payload = {**meta, "rows": scores.rows}
    files["results.json"].write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    md = [f"# best50 results ({meta.get('protocol')})", ""]
    for key in ("source", "package", "predictions", "model", "icl_version", "timestamp"):
        if meta.get(key) is not None:
            value = meta[key]
            if isinstance(value, dict):
                value = ", ".join(f"{k}: `{v}`" for k, v in value.items())
            md.append(f"- {key}: {value}")
    md.append(f"- thresholds: {', '.join(f'{t:.2f}' for t in scores.thresholds)}; "
              f"clean7 excludes: {', '.join(scores.clean_exclude)}")
    md.append("")
    for k in scores.ks:
        md += [f"## K = {k}", "", markdown_table(scores.table(k)), ""]
    if plots:
        for path in plot_metrics(scores, out):
            files[path.name] = path
        md += ["## Metrics against K", ""] + [f"![{m}]({n})" for m, n in PLOT_FILES.items()] + [""]
    files["report.md"].write_text("\n".join(md), encoding="utf-8")
    return files
