"""Figures: per task grouped bars with interval whiskers (a radar from five datasets on), metric
against shots, the rank heatmap, qualitative grids. Every figure is written as a 200-dpi PNG and
an SVG beside it (:func:`save_figure`); axis labels carry units and ↑/↓ (:func:`metric_label`).

Figures are ``matplotlib.figure.Figure`` objects on the Agg canvas (:func:`new_figure`: no
display, no pyplot state, no global backend). Qualitative grids are composed with
numpy and OpenCV (one tile row per sample), which is much faster than a figure per grid.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

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


def warm_up() -> None:
    """Imports, font caches and first-use set-up of the figures (a figure helper process runs
    this when it starts, :mod:`icl.helpers`): one small bar figure, as :func:`task_plot` draws
    them (PNG and SVG), and one qualitative grid, into a temporary folder. The first real
    figure of a process took 2-3x the next ones."""
    import tempfile

    spec = TaskSpec("warm-up", ("psnr", "lpips"), ("psnr", "lpips"), frozenset({"lpips"}))
    aggs = [Aggregate(m, "", d, "warm-up", 1, metric, 1.0 + i, 0.1, 4, 0, 0, 0.9 + i, 1.1 + i)
            for i, (m, d, metric) in enumerate((m, d, metric) for m in ("a", "b") for d in ("x", "y")
                                               for metric in ("psnr", "lpips"))]
    tile = np.zeros((40, 48, 3), np.uint8)
    with tempfile.TemporaryDirectory(prefix="icl-warm-up-") as tmp:
        task_plot(spec, aggs, 1, Path(tmp) / "warm-up.png", ["a", "b"])
        qualitative_task([("s", Path(tmp) / "s", {stem: tile for stem in qualitative_stems(["a"], 1)})], ["a"], 1,
                         Path(tmp) / "grid.png")


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


def collect(parts: Sequence[Any]) -> list[Path]:
    """The paths of what ``Benchmark.plots`` returned, in order: paths as they are, and the
    paths of each figure job (``result()``: waits for a helper's figure, :mod:`icl.helpers`)."""
    return [p for part in parts for p in (part.result() if hasattr(part, "result") else [part])]


#: dots per inch of every PNG figure (the SVG beside it is resolution-free)
FIGURE_DPI = 200

#: units of metrics whose scale is fixed; axis labels and table headers read "psnr (dB) ↑"
METRIC_UNITS = {"psnr": "dB", "rmse": "m", "abs_rel": "ratio", "ssim": "0-1", "lpips": "0-1", "f1": "0-1",
                "precision": "0-1", "recall": "0-1", "miou": "0-1", "ap50": "0-1", "accuracy": "%"}
#: metrics for which lower is better when nothing else says so (a benchmark's own list wins)
LOWER_IS_BETTER = frozenset({"lpips", "rmse", "abs_rel", "mse", "mae", "latency_s", "wall_s"})

UP, DOWN = "\u2191", "\u2193"  # ↑ higher is better, ↓ lower is better


def metric_label(metric: str, lower_is_better: Optional[bool] = None, unit: Optional[str] = None) -> str:
    """``metric (unit) ↑`` (or ``↓``): the axis label and table header of a metric; the unit from
    ``METRIC_UNITS`` when not given, the direction from ``LOWER_IS_BETTER`` when not given."""
    unit = unit if unit is not None else METRIC_UNITS.get(metric.lower(), "")
    lower = lower_is_better if lower_is_better is not None else metric.lower() in LOWER_IS_BETTER
    return f"{metric}" + (f" ({unit})" if unit else "") + f" {DOWN if lower else UP}"


def save_figure(fig: Any, path: Path) -> list[Path]:
    """``fig`` as a ``FIGURE_DPI`` PNG at ``path`` and an SVG beside it (same stem); returns both.
    One Agg draw at the final resolution, encoded by OpenCV at a fast level (PIL's default level
    took as long as the drawing) in a thread while the SVG is drawn (the encoder releases the
    GIL). The SVG keeps its text as text (smaller, and written in half the time of glyph
    outlines) and is byte-stable: fixed id salt, no date."""
    import io
    import threading

    import matplotlib

    fig.set_dpi(FIGURE_DPI)
    fig.canvas.draw()
    bgr = cv2.cvtColor(np.asarray(fig.canvas.buffer_rgba()), cv2.COLOR_RGBA2BGR)  # a copy: the SVG draw follows
    failed: list[BaseException] = []

    def encode() -> None:
        try:
            ok, png = cv2.imencode(".png", bgr, png_params(1))
            if not ok:
                raise ValueError(f"cannot encode figure {path} ({bgr.shape})")
            write_whole(path, _with_dpi(png.tobytes(), FIGURE_DPI))
        except BaseException as exc:  # raised by the caller below: never a thread's traceback
            failed.append(exc)

    worker = threading.Thread(target=encode, name="icl-png")
    worker.start()
    svg = path.with_suffix(".svg")
    try:
        text = io.BytesIO()
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "icl"}):
            fig.savefig(text, format="svg", metadata={"Date": None})
        write_whole(svg, text.getvalue())
    finally:
        worker.join()
    if failed:  # the PNG failed while the SVG was written: the figure failed, and the SVG goes too
        svg.unlink(missing_ok=True)
        raise failed[0]
    return [path, svg]


def png_params(level: int) -> list[int]:
    """OpenCV's PNG parameters for a figure or grid: zlib ``level`` and, where OpenCV can set it
    (4.11 on), one row filter ("up") instead of libpng's choice per row, which took 3x the
    encoding time (12 against 4 ms for a task figure, 12 against 5 for a grid) for 4% smaller
    files."""
    params = [cv2.IMWRITE_PNG_COMPRESSION, level]
    if hasattr(cv2, "IMWRITE_PNG_FILTER"):
        params += [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_UP]
    return params


def _with_dpi(png: bytes, dpi: float) -> bytes:
    """``png`` with a ``pHYs`` chunk (pixels per metre) after its header, so viewers and
    typesetters read the figure at ``dpi`` (OpenCV writes none)."""
    import struct
    import zlib

    ppm = round(dpi / 0.0254)
    body = b"pHYs" + struct.pack(">IIB", ppm, ppm, 1)
    chunk = struct.pack(">I", 9) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    end_of_header = 8 + 4 + 4 + 13 + 4  # signature, IHDR length, type, data, CRC
    return png[:end_of_header] + chunk + png[end_of_header:]


def interval(a: Any) -> tuple[float, float, bool]:
    """The whisker of an aggregate (an :class:`Aggregate` or a row mapping): its 95% confidence
    interval ``ci_low``/``ci_high`` where the run computed one (third value True), else the
    normal approximation mean ± 1.96 standard errors from the std over ``n`` samples (False);
    NaN when neither exists."""
    def get(key: str) -> Any:
        return a.get(key) if isinstance(a, Mapping) else getattr(a, key, None)

    lo, hi = get("ci_low"), get("ci_high")
    if _finite(lo) and _finite(hi):
        return float(lo), float(hi), True
    mean, std, n = get("mean"), get("std"), get("n")
    if _finite(mean) and _finite(std) and isinstance(n, (int, float)) and n > 1:
        half = 1.96 * float(std) / math.sqrt(n - 1)  # population std (ddof=0) -> standard error
        return float(mean) - half, float(mean) + half, False
    return math.nan, math.nan, False


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


CI_NOTE = "whiskers: 95% bootstrap confidence interval"
SE_NOTE = "whiskers: mean \u00b1 1.96 standard errors (normal approximation; this run has no bootstrap interval)"


def shot_curve_panels(panels: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], path: Path, value: str,
                      std: Optional[str] = None, titles: Optional[Mapping[str, str]] = None,
                      ylabel: Union[str, Mapping[str, str]] = "accuracy (%) \u2191",
                      ylim: Optional[tuple[float, float]] = (-2, 102)) -> list[Path]:
    """A metric against shots: a panel per task (``panels`` in the order given: task -> model ->
    rows with ``shots`` and ``value``), a line per model; five panels a row; written to ``path``
    (PNG, and the SVG beside it). Whiskers: the rows' ``ci_low``/``ci_high`` where present (a
    bootstrap interval, or the normal approximation where a row says ``interval="normal"``), else
    ``std`` (labelled as such) when given. ``ylabel``: one label, or one per task."""
    names = list(panels)
    cols = max(1, min(len(names), 5))
    rows = math.ceil(len(names) / cols)
    fig, axes = figures.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows + 0.3), squeeze=False)
    kinds = set()
    for ax, task in zip(axes.flat, names):
        for model, rs in sorted(panels[task].items()):
            rs = sorted(rs, key=lambda r: r["shots"])
            x, y = [r["shots"] for r in rs], [r[value] for r in rs]
            whisker = [(r.get("ci_low"), r.get("ci_high")) for r in rs]
            if all(_finite(lo) and _finite(hi) for lo, hi in whisker):
                err = np.array([[v - lo for v, (lo, _) in zip(y, whisker)], [hi - v for v, (_, hi) in zip(y, whisker)]])
                kinds.add(SE_NOTE if any(r.get("interval") == "normal" for r in rs) else CI_NOTE)
            elif std is not None:
                err = np.array([r[std] for r in rs], float)
                kinds.add(f"whiskers: \u00b1 {std}")
            else:
                err = None
            if err is None:
                ax.plot(x, y, marker="o", label=model)
            else:
                ax.errorbar(x, y, yerr=np.clip(np.nan_to_num(err), 0, None), marker="o", capsize=3, label=model)
        ax.set_title((titles or {}).get(task, task), fontsize=9)
        ax.set_xlabel("shots (context examples)")
        ax.set_ylabel(ylabel if isinstance(ylabel, str) else ylabel.get(task, ""))
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_xticks(sorted({r["shots"] for rs in panels[task].values() for r in rs}))
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    if names:
        axes.flat[0].legend(fontsize=7)
    if kinds:
        fig.text(0.01, 0.005, "; ".join(sorted(kinds)), fontsize=7, color="0.3", va="bottom")
    top = 1 - 0.35 / (2.8 * rows + 0.3)
    fig.subplots_adjust(left=0.06, right=0.98, top=top, bottom=0.1 + 0.1 / rows, hspace=0.6, wspace=0.4)
    return save_figure(fig, path)


def safe_name(text: str) -> str:
    """A file-name-safe form of a model, task, dataset or sample id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


#: a task with at least this many datasets is drawn as a radar (one axis per dataset); with
#: fewer, a radar's polygon says little and hides the intervals, so grouped bars are drawn
RADAR_MIN_AXES = 5


def task_plot(task: TaskSpec, aggs: Sequence[Aggregate], shots: int, path: Path,
              models: Sequence[str] = (), reference: Sequence[str] = ()) -> list[Path]:
    """One panel per rank metric of ``task`` at ``shots``: grouped bars (datasets on the x axis,
    a bar per model, interval whiskers: :func:`interval`) or, with ``RADAR_MIN_AXES`` datasets or
    more, a radar (datasets on the axes, a polygon per model). Missing values are drawn at 0 and
    marked 'missing' in the legend. The PSNR axis ends a little above the best value of the
    compared models (not ``reference`` ones such as the oracle, whose identical images sit at
    the 100 dB cap); values beyond it are drawn at the edge. Returns the PNG and SVG (none when
    the task has no value at ``shots``)."""
    rows = [a for a in aggs if a.task == task.name and a.shots == shots and a.metric in task.rank_metrics]
    if not rows:
        return []
    datasets = sorted({a.dataset for a in rows})
    present = {a.model for a in rows}
    models = [m for m in models if m in present] + sorted(present - set(models))
    metrics = [m for m in task.rank_metrics if any(a.metric == m for a in rows)]
    cell = {(a.model, a.dataset, a.metric): a for a in rows}
    polar = len(datasets) >= RADAR_MIN_AXES
    fig = new_figure((2.6 * len(metrics) + 1.1, 2.6))
    notes: set[str] = set()
    handles: list[Any] = []
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(1, len(metrics), i + 1)
        label = metric_label(metric, metric in task.lower_is_better)
        edge = math.inf
        if metric.lower() == "psnr":
            compared = [m for m in models if m not in reference] or list(models)
            finite = [a.mean for m in compared for d in datasets
                      if (a := cell.get((m, d, metric))) is not None and math.isfinite(a.mean) and a.mean < PSNR_CAP]
            edge = 1.1 * max(finite) if finite else PSNR_CAP
        series = []
        for model in models:
            found = [cell.get((model, d, metric)) for d in datasets]
            vals = [math.nan if a is None else a.mean for a in found]
            name = model + (" (missing)" if any(math.isnan(v) for v in vals) else "")
            series.append((name, [0.0 if math.isnan(v) else min(v, edge) for v in vals], found))
        if polar:
            # a fixed title height: the automatic one measures every tick label (40 ms an axes)
            ax.set_title(label, fontsize=8, y=1.02)
            _radar_axes(ax, datasets, [(n, v) for n, v, _ in series], edge)
        else:
            notes |= _bars(ax, datasets, series, edge, label)
        handles = handles or ax.get_legend_handles_labels()[0]
    # one legend and one title for the figure: each legend or title is a costly draw
    fig.legend(handles, [n for n, _, _ in series], loc="upper right", fontsize=6, ncol=min(len(series), 4),
               frameon=False)
    fig.text(0.01, 0.98, f"{task.name}, {shots} shot{'s' if shots != 1 else ''}", fontsize=9, va="top")
    if notes:
        fig.text(0.01, 0.01, "; ".join(sorted(notes)), fontsize=6, color="0.3", va="bottom")
    # fixed margins: tight_layout costs a full extra draw per figure
    fig.subplots_adjust(left=0.45 / fig.get_figwidth() + 0.03, right=0.99, bottom=0.2, top=0.86, wspace=0.45)
    return save_figure(fig, path)


def _bars(ax: Any, datasets: Sequence[str], series: Sequence[tuple[str, list[float], list[Any]]],
          edge: float, ylabel: str) -> set[str]:
    """Grouped bars with whiskers on ``ax``; returns what the whiskers show (for the note). The
    axes' own tick machinery is switched off and its few ticks, grid lines and labels drawn as
    plain lines and texts: the same picture in half the drawing time (Agg and SVG)."""
    from matplotlib.ticker import MaxNLocator

    width = 0.8 / max(len(series), 1)
    x = np.arange(len(datasets))
    notes, ends = set(), [0.0]
    for j, (name, vals, found) in enumerate(series):
        pos = x + (j - (len(series) - 1) / 2) * width
        ax.bar(pos, vals, width=width, label=name, zorder=2)
        ends += [v for v in vals if math.isfinite(v)]
        lo, hi = np.full(len(vals), np.nan), np.full(len(vals), np.nan)
        for k, a in enumerate(found):
            if a is not None and math.isfinite(a.mean):
                lo[k], hi[k], is_ci = interval(a)
                if math.isfinite(lo[k]):
                    notes.add(CI_NOTE if is_ci else SE_NOTE)
        v = np.asarray(vals)
        ok = np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            top = edge if math.isfinite(edge) else np.inf
            err = np.array([v[ok] - np.clip(lo[ok], None, top), np.clip(hi[ok], None, top) - v[ok]]).clip(0, None)
            tops, bottoms = v[ok] + err[1], v[ok] - err[0]
            ends += [*tops, *bottoms]
            cap = width / 6
            xs = [[p, p, np.nan, p - cap, p + cap, np.nan, p - cap, p + cap, np.nan] for p in pos[ok]]
            ys = [[b, t, np.nan, b, b, np.nan, t, t, np.nan] for b, t in zip(bottoms, tops)]
            _polyline(ax, np.ravel(xs), np.ravel(ys), color="0.15", linewidth=0.8, zorder=3)
    low = min(ends)
    high = edge if math.isfinite(edge) else max(ends) * 1.05 if max(ends) > 0 else 1.0
    ticks = [t for t in MaxNLocator(4).tick_values(low, high) if low - 1e-12 <= t <= high + 1e-12]
    ax.set_xlim(-0.6, len(datasets) - 0.4)
    ax.set_ylim(low, high)
    ax.xaxis.set_visible(False)
    ax.yaxis.set_visible(False)
    _polyline(ax, np.ravel([[-0.6, len(datasets) - 0.4, np.nan] for _ in ticks]),
              np.ravel([[t, t, np.nan] for t in ticks]), color="0.88", linewidth=0.6, zorder=0)
    left = ax.get_yaxis_transform()  # x in axes fraction, y in data
    for t in ticks:
        ax.text(-0.02, t, f"{t:g}", transform=left, ha="right", va="center", fontsize=7)
    below = ax.get_xaxis_transform()  # x in data, y in axes fraction
    for i, d in enumerate(datasets):
        ax.text(i, -0.03, d, transform=below, ha="right" if len(datasets) > 2 else "center", va="top", fontsize=7,
                rotation=15 if len(datasets) > 2 else 0, rotation_mode="anchor")
    ax.text(-0.2, 0.5, ylabel, transform=ax.transAxes, rotation=90, ha="center", va="center", fontsize=8)
    return notes


def _polyline(ax: Any, xs: np.ndarray, ys: np.ndarray, **style: Any) -> None:
    """Line pieces separated by NaN as one ``Line2D``: whiskers and grid lines for the price of a
    single artist (a ``LineCollection`` looks up the colour cycle twice when built: 3 ms)."""
    from matplotlib.lines import Line2D

    ax.add_line(Line2D(xs, ys, **style))


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


def rank_heatmap(table: RankTable, path: Path,
                 intervals: Optional[Mapping[tuple[str, str], tuple[float, float]]] = None) -> list[Path]:
    """Models x (tasks, overall) coloured by rank (1 = best), values written in the cells, with
    the rank interval under each value where ``intervals`` ((model, task or "overall") -> (low,
    high)) has one. Returns the PNG and SVG (none without task ranks)."""
    if not table.task_ranks:
        return []
    cols = [t for t in table.tasks if t in table.task_ranks] + ["overall"]
    grid = np.array([[table.task_ranks[t][m] for t in cols[:-1]] + [table.overall[m]] for m in table.models])
    intervals = intervals or {}
    tall = 0.25 if intervals else 0.0
    fig = new_figure((1.6 + 0.8 * len(cols), 1.4 + (0.45 + tall) * len(table.models)))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(grid, cmap="viridis_r", vmin=1, vmax=max(len(table.models), 2), aspect="auto")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(table.models)))
    ax.set_yticklabels(table.models, fontsize=8)
    for i, model in enumerate(table.models):
        for j, col in enumerate(cols):
            light = grid[i, j] < 1 + 0.5 * (max(len(table.models), 2) - 1)  # viridis_r is light near rank 1
            text = f"{grid[i, j]:.2f}"
            if (model, col) in intervals:
                lo, hi = intervals[(model, col)]
                text += f"\n[{lo:.1f}, {hi:.1f}]"
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="black" if light else "white")
    note = ", 95% rank interval in brackets" if intervals else ""
    ax.set_title(f"rank {DOWN} (1 = best{note}), shots = {table.shots}", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03).set_label(f"rank {DOWN}", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def read_rgb(path: Path) -> Optional[np.ndarray]:
    """An RGB uint8 image, or None when the file is absent or unreadable."""
    if not path.is_file():
        return None
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    return None if img is None else img[..., ::-1]


def write_rgb(path: Path, image: np.ndarray, level: Optional[int] = None) -> None:
    """Write an RGB uint8 image atomically (a killed run never leaves half a PNG); ``level``: the
    zlib level (OpenCV's default, run-length coding, suits flat masks; level 1 with filtering
    halves photographic grids for a fifth more time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    params = [] if level is None else png_params(level)
    ok, png = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]), params)
    if not ok:
        raise ValueError(f"cannot encode image {path} (shape {image.shape}, {image.dtype})")
    write_whole(path, png.tobytes())


def write_whole(path: Path, data: bytes) -> None:
    """``data`` into ``path`` whole or not at all: a unique temporary name, then a rename, so a
    write that fails (a full disk) or is killed never leaves a truncated image; a failure the
    user must fix is one line naming the file (``OutputWriteError``)."""
    from icl.store.atomic import write_bytes  # a unique temporary name, never a fixed one

    write_bytes(path, data, durable=False)  # a plot: whole or absent matters, not a power cut


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
    per model at ``shots``, ground truth, read from each sample folder's PNGs (as the runner
    writes them: ``context_in_0.png``, ``pred_k{shots}_{model}.png``...). A missing prediction
    is a crossed tile."""
    stems = qualitative_stems(models, shots)
    return grid_of([(d.name, {s: read_rgb(d / f"{s}.png") for s in stems}) for d in sample_dirs], models, shots,
                   path, size)


def qualitative_stems(models: Sequence[str], shots: int) -> list[str]:
    """The image names of a qualitative sample folder, in column order."""
    return (["context_in_0", "context_out_0", "query"] + [f"pred_k{shots}_{safe_name(m)}" for m in models]
            + ["target"])


def grid_of(samples: Sequence[tuple[str, Mapping[str, Optional[np.ndarray]]]], models: Sequence[str], shots: int,
            path: Path, size: int = 128) -> Optional[Path]:
    """:func:`qualitative_grid` from images in memory: per sample its name (the query tile's
    label) and its images by :func:`qualitative_stems` name (None or absent: a crossed tile)."""
    rows = []
    for name, images in samples:
        tiles = [_tile(images.get("context_in_0"), "context in", size),
                 _tile(images.get("context_out_0"), "context out", size),
                 _tile(images.get("query"), name, size)]
        tiles += [_tile(images.get(f"pred_k{shots}_{safe_name(m)}"), m, size) for m in models]
        tiles.append(_tile(images.get("target"), "ground truth", size))
        rows.append(np.concatenate([np.pad(t, ((2, 2), (2, 2), (0, 0)), constant_values=255) for t in tiles], axis=1))
    if not rows:
        return None
    write_rgb(path, np.concatenate(rows, axis=0), level=1)  # inlined in report.html: half the bytes
    return path


def qualitative_task(samples: Sequence[tuple[str, Path, Mapping[str, np.ndarray]]], models: Sequence[str],
                     shots: int, path: Path) -> list[Path]:
    """One task's qualitative figure: each sample's images written into its folder (``name``,
    ``folder``, images by :func:`qualitative_stems` name), and their grid (:func:`grid_of`) at
    ``path``; returns ``[path]`` (none without samples). The images are written by a few threads:
    creating many small files is the slow part."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4, thread_name_prefix="icl-qualitative") as writers:
        written = [writers.submit(write_rgb, folder / f"{stem}.png", image)
                   for _, folder, images in samples for stem, image in images.items()]
        grid = grid_of([(name, images) for name, _, images in samples], models, shots, path)
        for w in written:
            w.result()  # a write that failed says so
    return [grid] if grid else []
