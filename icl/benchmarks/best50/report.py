"""best50 report pieces: the markdown table of one model and K, and the plots against K."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from icl.benchmarks.best50.score import COUNTS, METRICS

PLOT_FILES = {"P@50": "plot_p50.png", "R@50": "plot_r50.png", "F1@50": "plot_f1_50.png",
              "mF1@50:95": "plot_mf1_50_95.png", "mIoU@50:95": "plot_miou_50_95.png", "mIoU_best": "plot_miou_best.png"}


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


def plot_metrics(rows: Sequence[dict], out: Path, prefix: str = "") -> list[Path]:
    """One PNG per metric (``{prefix}plot_*.png``): the metric against K, a line per class plus
    mean and pooled (clean7); ``rows`` are one model's summary rows (:class:`Scores` rows)."""
    from icl.report.plots import figures as plt  # Figure objects: no pyplot state, no global backend
    from icl.report.plots import metric_label, save_figure

    ks = sorted({r["k"] for r in rows})
    paths = []
    classes = sorted({r["group"] for r in rows if r["kind"] == "class"})
    # one figure redrawn per metric, fixed margins (tight_layout costs more than the drawing)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    fig.subplots_adjust(left=0.1, right=0.72, top=0.91, bottom=0.13)
    for metric, name in PLOT_FILES.items():
        ax.cla()
        series = [(c, "class", c, dict(lw=1.2, marker="o", ms=3)) for c in classes]
        series += [("mean (all)", "mean", "all", dict(lw=2.4, color="black")),
                   ("pooled (clean7)", "pooled", "clean7", dict(lw=2.0, color="black", ls="--"))]
        for label, kind, group, style in series:
            pts = [(r["k"], r[metric]) for r in rows if r["kind"] == kind and r["group"] == group]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        ax.set_xlabel("K (marked support examples, log scale)")
        ax.set_ylabel(metric_label(metric, False, "0-1"))
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"best50: {metric} against K")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
        paths += save_figure(fig, out / f"{prefix}{name}")
    plt.close(fig)
    return paths
