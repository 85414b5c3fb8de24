"""PNG plots: a radar per task over datasets, the rank heatmap, qualitative grids.

Figures are ``matplotlib.figure.Figure`` objects on the Agg canvas (:func:`new_figure`: no
display, no pyplot state, no global backend). Qualitative grids are composed with
numpy and OpenCV (one tile row per sample), which is much faster than a figure per grid.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import cv2
import numpy as np

from icl.report.aggregate import PSNR_CAP, Aggregate, RankTable, TaskSpec


def new_figure(figsize: tuple[float, float]):
    """A ``Figure`` drawn by the Agg canvas: no pyplot state and no global backend, so plotting
    never changes the caller's matplotlib session (``icl.evaluate`` in a notebook) and figures
    need no closing."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


class _Figures:
    """What benchmarks' plot code asks of pyplot (``subplots``, ``close``), served by
    :func:`new_figure`: the same drawing code, no pyplot state, no global backend."""

    @staticmethod
    def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = (6.4, 4.8),
                 dpi: Optional[float] = None, **kwargs: Any) -> tuple[Any, Any]:
        fig = new_figure(figsize)
        if dpi is not None:
            fig.set_dpi(dpi)
        return fig, fig.subplots(nrows, ncols, **kwargs)

    @staticmethod
    def close(fig: Any = None) -> None:
        """Figures are plain objects, collected like any other: nothing to close."""


figures = _Figures()


def shot_curve_panels(panels: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], path: Path, value: str,
                      std: Optional[str] = None, titles: Optional[Mapping[str, str]] = None,
                      ylabel: str = "accuracy (%)") -> Path:
    """Accuracy against shots: a panel per task (``panels`` in the order given: task -> model ->
    rows with ``shots`` and ``value``), a line per model, error bars from ``std`` when given;
    five panels a row; written to ``path`` (PNG)."""
    names = list(panels)
    cols = max(1, min(len(names), 5))
    rows = math.ceil(len(names) / cols)
    fig, axes = figures.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    for ax, task in zip(axes.flat, names):
        for model, rs in sorted(panels[task].items()):
            rs = sorted(rs, key=lambda r: r["shots"])
            x, y = [r["shots"] for r in rs], [r[value] for r in rs]
            if std is None:
                ax.plot(x, y, marker="o", label=model)
            else:
                ax.errorbar(x, y, yerr=[r[std] for r in rs], marker="o", capsize=3, label=model)
        ax.set_title((titles or {}).get(task, task), fontsize=9)
        ax.set_xlabel("shots")
        ax.set_ylabel(ylabel)
        ax.set_ylim(-2, 102)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    if names:
        axes.flat[0].legend(fontsize=7)
    fig.subplots_adjust(left=0.06, right=0.98, top=0.93, bottom=0.1, hspace=0.55, wspace=0.35)
    fig.savefig(path, dpi=90)
    return path


def safe_name(text: str) -> str:
    """A file-name-safe form of a model, task, dataset or sample id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def radar_plot(task: TaskSpec, aggs: Sequence[Aggregate], shots: int, path: Path,
               models: Sequence[str] = (), reference: Sequence[str] = ()) -> Optional[Path]:
    """One panel per rank metric: datasets on the axes, one polygon per model (a grouped bar
    chart when the task has fewer than three datasets). Missing values are drawn at 0 and
    marked 'missing' in the legend. The PSNR axis ends a little above the best value of the
    compared models (not ``reference`` ones such as the oracle, whose identical images sit at
    the 100 dB cap); values beyond it are drawn at the edge."""
    rows = [a for a in aggs if a.task == task.name and a.shots == shots and a.metric in task.rank_metrics]
    if not rows:
        return None
    datasets = sorted({a.dataset for a in rows})
    present = {a.model for a in rows}
    models = [m for m in models if m in present] + sorted(present - set(models))
    metrics = [m for m in task.rank_metrics if any(a.metric == m for a in rows)]
    value = {(a.model, a.dataset, a.metric): a.mean for a in rows}
    polar = len(datasets) >= 3
    fig = new_figure((4.2 * len(metrics), 4.4))
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(1, len(metrics), i + 1)
        arrow = "lower is better" if metric in task.lower_is_better else "higher is better"
        # a fixed title height: the automatic one measures every tick label (40 ms an axes)
        ax.set_title(f"{task.name}: {metric} ({arrow})", fontsize=9, y=1.04)
        edge = math.inf
        if metric.lower() == "psnr":
            compared = [m for m in models if m not in reference] or list(models)
            finite = [v for m in compared for d in datasets
                      if math.isfinite(v := value.get((m, d, metric), math.nan)) and v < PSNR_CAP]
            edge = 1.1 * max(finite) if finite else PSNR_CAP
        series = []
        for model in models:
            vals = [value.get((model, d, metric), math.nan) for d in datasets]
            label = model + (" (missing)" if any(math.isnan(v) for v in vals) else "")
            series.append((label, [0.0 if math.isnan(v) else min(v, edge) for v in vals]))
        if polar:
            _radar_axes(ax, datasets, series, edge)
        else:
            width = 0.8 / len(models)
            for j, (label, vals) in enumerate(series):
                ax.bar(np.arange(len(datasets)) + (j - (len(models) - 1) / 2) * width, vals, width=width, label=label)
            if math.isfinite(edge):
                ax.set_ylim(0, edge)
            ax.set_xticks(np.arange(len(datasets)))
            ax.set_xticklabels(datasets, fontsize=7, rotation=20)
        ax.legend(fontsize=7, loc="lower right" if polar else "best")
    # fixed margins: tight_layout costs a full extra draw per figure
    fig.subplots_adjust(left=0.06, right=0.96, bottom=0.14, top=0.84, wspace=0.45)
    fig.savefig(path, dpi=80)
    return path


def _radar_axes(ax, datasets: Sequence[str], series: Sequence[tuple[str, list[float]]], edge: float) -> None:
    """A radar chart drawn on plain axes: spokes, four rings and one closed polygon per series,
    values from 0 (centre) to ``edge`` (or the largest value). Matplotlib's polar projection
    draws the same picture at 5x the cost (its tick and grid machinery: 0.5 s a figure)."""
    top = edge if math.isfinite(edge) else max([v for _, vals in series for v in vals] + [0.0])
    top = top if top > 0 else 1.0
    angles = np.linspace(0, 2 * np.pi, len(datasets), endpoint=False)
    ring = np.linspace(0, 2 * np.pi, 65)
    for frac in (0.25, 0.5, 0.75, 1.0):
        ax.plot(frac * np.cos(ring), frac * np.sin(ring), color="0.85", linewidth=0.6, zorder=0)
        ax.text(frac * np.cos(np.pi / 8), frac * np.sin(np.pi / 8), f"{frac * top:.3g}", fontsize=6, color="0.4")
    for a, name in zip(angles, datasets):
        ax.plot([0, np.cos(a)], [0, np.sin(a)], color="0.85", linewidth=0.6, zorder=0)
        ax.text(1.12 * np.cos(a), 1.12 * np.sin(a), name, fontsize=7, ha="center", va="center")
    for label, vals in series:
        r = np.clip(np.asarray(vals, float), 0.0, top) / top
        xs, ys = np.append(r * np.cos(angles), r[0]), np.append(r * np.sin(angles), 0.0)
        ys[-1] = r[0] * np.sin(angles[0])
        line, = ax.plot(xs, ys, label=label, linewidth=1.5)
        ax.fill(xs, ys, alpha=0.08, color=line.get_color())
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_aspect("equal")
    ax.axis("off")


def rank_heatmap(table: RankTable, path: Path) -> Optional[Path]:
    """Models x (tasks, overall) coloured by rank (1 = best), values written in the cells."""
    if not table.task_ranks:
        return None
    cols = [t for t in table.tasks if t in table.task_ranks] + ["overall"]
    grid = np.array([[table.task_ranks[t][m] for t in cols[:-1]] + [table.overall[m]] for m in table.models])
    fig = new_figure((1.0 + 0.75 * len(cols), 1.2 + 0.45 * len(table.models)))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(grid, cmap="viridis_r", vmin=1, vmax=max(len(table.models), 2), aspect="auto")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(table.models)))
    ax.set_yticklabels(table.models, fontsize=8)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            light = grid[i, j] < 1 + 0.5 * (max(len(table.models), 2) - 1)  # viridis_r is light near rank 1
            ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if light else "white")
    ax.set_title(f"ranks (1 = best), shots = {table.shots}", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    return path


def read_rgb(path: Path) -> Optional[np.ndarray]:
    """An RGB uint8 image, or None when the file is absent or unreadable."""
    if not path.is_file():
        return None
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    return None if img is None else img[..., ::-1]


def write_rgb(path: Path, image: np.ndarray) -> None:
    """Write an RGB uint8 image atomically (a killed run never leaves half a PNG)."""
    from icl.run.atomic import write_bytes  # a unique temporary name, never a fixed one

    path.parent.mkdir(parents=True, exist_ok=True)
    ok, png = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]))
    if not ok:
        raise ValueError(f"cannot encode image {path} (shape {image.shape}, {image.dtype})")
    write_bytes(path, png.tobytes(), durable=False)  # a plot: whole or absent matters, not a power cut


def _tile(image: Optional[np.ndarray], label: str, size: int) -> np.ndarray:
    tile = np.full((size + 16, size, 3), 255, np.uint8)
    if image is not None:
        h, w = image.shape[:2]
        s = size / max(h, w)
        nh, nw = max(1, round(h * s)), max(1, round(w * s))
        small = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_NEAREST if s > 1 else cv2.INTER_AREA)
        y, x = 16 + (size - nh) // 2, (size - nw) // 2
        tile[y:y + nh, x:x + nw] = small
    else:
        cv2.line(tile, (0, 16), (size - 1, size + 15), (200, 0, 0), 1)
    cv2.putText(tile, label[: size // 7], (2, 12), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (0, 0, 0), 1, cv2.LINE_AA)
    return tile


def qualitative_grid(sample_dirs: Sequence[Path], models: Sequence[str], shots: int, path: Path,
                     size: int = 128) -> Optional[Path]:
    """Rows = samples; columns: context in, context out (first pair), query, one prediction
    per model at ``shots``, ground truth. A missing prediction is a crossed tile."""
    rows = []
    for d in sample_dirs:
        tiles = [_tile(read_rgb(d / "context_in_0.png"), "context in", size),
                 _tile(read_rgb(d / "context_out_0.png"), "context out", size),
                 _tile(read_rgb(d / "query.png"), d.name, size)]
        tiles += [_tile(read_rgb(d / f"pred_k{shots}_{safe_name(m)}.png"), m, size) for m in models]
        tiles.append(_tile(read_rgb(d / "target.png"), "ground truth", size))
        rows.append(np.concatenate([np.pad(t, ((2, 2), (2, 2), (0, 0)), constant_values=255) for t in tiles], axis=1))
    if not rows:
        return None
    write_rgb(path, np.concatenate(rows, axis=0))
    return path
