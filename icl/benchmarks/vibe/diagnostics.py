"""What a visual in-context model does instead of the task (the paper's future work, issue 26).

Per sample, beside the task's metrics (never rank metrics):

- ``handthrough_ssim``: SSIM of the prediction to the query input (a model that hands the
  query through scores 1);
- ``copy_ssim``: SSIM of the prediction to the first context pair's output (a model that
  copies the context scores 1);
- ``palette_adherence`` (colour-coded tasks only: segmentation, depth, edges, keypoints,
  detection): the share of the prediction's pixels within Euclidean RGB distance
  ``PALETTE_RADIUS`` (inclusive, on 0-255) of a colour present in the context outputs.

The prediction is resized (bilinear, as the image metrics do) to the compared image's size;
SSIM is ``icl.ops.ssim`` (PROTOCOL §1.3's kernel), NaN where an image is under its 11-px window.

Context sensitivity: on a seeded subset of the queries (``sensitivity_picked``, a stable hash,
PROTOCOL §1.1) the benchmark plans a second item per (query, shots) whose context is another
query's (``donor``, a deterministic choice among the group's queries with a different context
list). That item is scored exactly as the original (same target, same decoding contexts), so a
change of its metric comes from the output alone; the output change is ``1 - SSIM`` between the
two predictions (``output_change``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from icl.data.seeds import derive_seed

PALETTE_RADIUS = 16.0  # RGB units: JPEG-like noise on a palette colour stays inside, neighbours of the spread palette do not
SENSITIVITY_FRACTION = 0.1  # default share of queries asked again with a replaced context
DIAGNOSTICS = ("handthrough_ssim", "copy_ssim", "palette_adherence")


def _ssim(pred: np.ndarray, other: np.ndarray) -> float:
    from icl.benchmarks.vibe.tasks.base import resize_image
    from icl.ops import ssim

    if min(other.shape[:2]) < 11:
        return math.nan
    return float(ssim(resize_image(pred, tuple(other.shape[:2])), other, 255.0))


def _pack(image: np.ndarray) -> np.ndarray:
    """RGB pixels as one int each (a 1-D unique is far faster than a row-wise one)."""
    px = image.reshape(-1, 3).astype(np.int32)
    return (px[:, 0] << 16) | (px[:, 1] << 8) | px[:, 2]


def _unpack(packed: np.ndarray) -> np.ndarray:
    return np.stack([packed >> 16, (packed >> 8) & 255, packed & 255], axis=1).astype(np.int32)


def palette_adherence(pred: np.ndarray, context_outputs: Sequence[np.ndarray],
                      radius: float = PALETTE_RADIUS) -> float:
    """Share of ``pred``'s pixels within ``radius`` (Euclidean RGB) of a colour of ``context_outputs``."""
    palette = _unpack(np.unique(np.concatenate([_pack(c) for c in context_outputs])))
    packed, counts = np.unique(_pack(pred), return_counts=True)
    colours = _unpack(packed)
    # per palette colour only the colours within the radius in red can be near: a window of the
    # colours sorted by red (packed order is red-major)
    near = np.zeros(len(colours), dtype=bool)
    for colour in palette:
        lo = int(np.searchsorted(colours[:, 0], colour[0] - radius, side="left"))
        hi = int(np.searchsorted(colours[:, 0], colour[0] + radius, side="right"))
        d2 = ((colours[lo:hi] - colour) ** 2).sum(1)
        near[lo:hi] |= d2 <= radius * radius
    return float(counts[near].sum() / counts.sum())


def sample_diagnostics(pred: np.ndarray, query_input: np.ndarray, context_outputs: Sequence[np.ndarray],
                       colour_coded: bool) -> dict[str, float]:
    """The per-sample diagnostics of one validated uint8 prediction (module docstring)."""
    out = {"handthrough_ssim": _ssim(pred, query_input),
           "copy_ssim": _ssim(pred, context_outputs[0]) if len(context_outputs) else math.nan}
    if colour_coded and len(context_outputs):
        out["palette_adherence"] = palette_adherence(pred, context_outputs)
    return out


def output_change(original: np.ndarray, swapped: np.ndarray) -> float:
    """``1 - SSIM`` of the prediction under a replaced context to the original prediction."""
    return 1.0 - _ssim(swapped, original)


def sensitivity_picked(seed: int, dataset: str, task: str, query: str, fraction: float) -> bool:
    """Whether ``query`` is in the context-sensitivity subset: a stable hash below ``fraction``."""
    if fraction <= 0:
        return False
    return derive_seed(seed, dataset, "test", query, f"sensitivity/{task}") / 2.0 ** 64 < fraction


def donor(seed: int, dataset: str, task: str, query: str, contexts: Mapping[str, Sequence[str]],
          shots: int) -> Optional[str]:
    """The query whose first ``shots`` contexts replace ``query``'s: drawn from a stable hash among
    the group's other queries with a different context list (None when every list is the same)."""
    own = list(contexts[query][:shots])
    candidates = sorted(q for q, c in contexts.items() if q != query and list(c[:shots]) != own)
    if not candidates:
        return None
    rng = np.random.default_rng(derive_seed(seed, dataset, "test", query, f"sensitivity-donor/{task}/k{shots}"))
    return candidates[int(rng.integers(len(candidates)))]


def _mean(values: Sequence[float]) -> Optional[float]:
    """The mean of the defined values; None (an empty CSV cell) when there is none."""
    vals = [v for v in values if not math.isnan(v)]
    return float(np.mean(vals)) if vals else None


def diagnostics_table(own: Sequence[Mapping[str, Any]], swapped: Sequence[Mapping[str, Any]],
                      rank_metric: Mapping[str, str], changes: Mapping[tuple, float]) -> list[dict[str, Any]]:
    """One row per (model, task, shots), pooled over datasets and samples: the mean diagnostics of
    the scored samples (None where undefined: palette adherence of an image task), and for the sensitivity subset the mean output change (``changes``: per
    (model, dataset, task, shots, query), see :func:`output_change`) and the mean absolute change
    of the task's first rank metric (PSNR capped as in the aggregates)."""
    from icl.report.aggregate import cap

    by_group: dict[tuple, list] = {}
    for r in own:
        if r["status"] == "ok":
            by_group.setdefault((r["model"], r["task"], int(r["shots"])), []).append(r)
    index = {(r["model"], r["dataset"], r["task"], int(r["shots"]), r["query"]): r for r in own if r["status"] == "ok"}
    deltas: dict[tuple, list[float]] = {}
    for s in swapped:
        k = (s["model"], s["dataset"], s["task"], int(s["shots"]), s["query"])
        o, metric = index.get(k), rank_metric[s["task"]]
        if o is None or s["status"] != "ok" or metric not in s or metric not in o:
            continue
        delta = abs(cap(metric, float(s[metric])) - cap(metric, float(o[metric])))
        deltas.setdefault((s["model"], s["task"], int(s["shots"])), []).append(delta)
    moved: dict[tuple, list[float]] = {}
    for (model, _, task, shots, _), v in changes.items():
        moved.setdefault((model, task, shots), []).append(v)
    rows = []
    for (model, task, shots), members in sorted(by_group.items()):
        row: dict[str, Any] = {"model": model, "task": task, "shots": shots, "n": len(members)}
        for name in DIAGNOSTICS:
            row[name] = _mean([float(r[name]) for r in members if name in r])
        d = deltas.get((model, task, shots), [])
        row.update(sensitivity_n=len(d), output_change=_mean(moved.get((model, task, shots), [])),
                   metric=rank_metric[task], metric_change=_mean(d))
        rows.append(row)
    return rows


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The diagnostics section of ``report.md``."""
    def f(v: Any) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    lines = ["### Diagnostics: what the model does instead of the task", "",
             "Hand-through: SSIM of the prediction to the query input (1 = the query handed back). Copy: SSIM to "
             "the first context output (1 = the context copied). Palette: share of pixels within RGB distance "
             f"{PALETTE_RADIUS:g} of the context outputs' colours (colour-coded tasks). Context sensitivity, on the "
             "seeded subset (`--sensitivity-fraction`): output change = 1 - SSIM between the predictions with the "
             "own and a replaced context; metric change = mean |difference| of the task's first rank metric "
             "(0 = the context is ignored). All ↑ = more of that behaviour; none enters the ranks.", "",
             "| model | task | shots | n | hand-through | copy | palette | n sens. | output change | metric | "
             "metric change |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['task']} | {r['shots']} | {r['n']} | {f(r['handthrough_ssim'])} | "
                     f"{f(r['copy_ssim'])} | {f(r['palette_adherence'])} | {r['sensitivity_n']} | "
                     f"{f(r['output_change'])} | {r['metric']} | {f(r['metric_change'])} |")
    return "\n".join(lines) + "\n"
