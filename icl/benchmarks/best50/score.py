"""best50 scores (PROTOCOL §2), for every K: per class, mean over classes, pooled over samples.

At IoU threshold t, true positives come from score-free greedy matching
(:func:`icl.ops.greedy_match_counts`). Over a set of samples (a class, or all of them: micro),
with TP, #pred and #GT summed over the set:

- ``P = TP / #pred``, ``R = TP / #GT``, ``F1 = 2PR / (P + R)``; ``P@50``, ``R@50``, ``F1@50`` at
  t = 0.50.
- ``mF1@50:95`` = mean of F1 over the thresholds 0.50, 0.55, ..., 0.95.
- ``mIoU@50:95`` = mean over the thresholds of (sum of the IoU of the true-positive pairs) / #GT.
- ``mIoU_best`` = mean over GT boxes of the best IoU with any prediction of its sample (0 if none).

Zero-division rules (those of PROTOCOL §1.3): P with no prediction is 0 (1 when there is no GT
either); R, and both mIoU, with no GT are 1 when there is no prediction, else 0; F1 of
P = R = 0 is 0. "mean" rows average the class rows (each class weighs the same); "pooled" rows
sum the counts of all samples. ``clean7`` = every class except ``square_cage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from icl.benchmarks.best50.predictions import Record
from icl.ops.greedy_match import greedy_match_counts

THRESHOLDS = (0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95)
CLEAN_EXCLUDE = ("square_cage",)
CLEAN_NAME = "clean7"
METRICS = ("P@50", "R@50", "F1@50", "mF1@50:95", "mIoU@50:95", "mIoU_best")
COUNTS = ("n_samples", "n_pred", "n_gt")


@dataclass
class Scores:
    """``rows``: one dict per (k, kind, group), kind "class" (group = class name), "mean" or
    "pooled" (group "all" or "clean7"), with :data:`COUNTS`, :data:`METRICS` and
    ``F1_by_threshold``/``tp_by_threshold`` lists. ``per_sample``: one dict per record."""

    rows: list[dict]
    per_sample: list[dict]
    thresholds: tuple[float, ...]
    clean_exclude: tuple[str, ...]

    def table(self, k: int) -> list[dict]:
        return [r for r in self.rows if r["k"] == k]

    @property
    def ks(self) -> list[int]:
        return sorted({r["k"] for r in self.rows})


def _ratio(num: np.ndarray, den: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """``num / den`` where ``den > 0``, else ``empty`` (broadcast over trailing threshold axis)."""
    den_b = np.broadcast_to(den.reshape(den.shape + (1,) * (num.ndim - den.ndim)), num.shape)
    empty_b = np.broadcast_to(empty.reshape(empty.shape + (1,) * (num.ndim - empty.ndim)), num.shape)
    out = np.array(empty_b, dtype=np.float64)
    np.divide(num, den_b, out=out, where=den_b > 0)
    return out


def compute_metrics(n_pred: np.ndarray, n_gt: np.ndarray, tp: np.ndarray, tp_iou: np.ndarray,
                    best_sum: np.ndarray, n_thresholds: int, i50: int) -> dict[str, np.ndarray]:
    """Metrics of R sets from their counts: ``n_pred``, ``n_gt``, ``best_sum`` ``[R]``;
    ``tp``, ``tp_iou`` ``[R, T']`` whose first ``n_thresholds`` columns are the averaged
    thresholds and column ``i50`` is t = 0.50. Returns ``[R]`` arrays (and ``F1_t`` ``[R, T']``)."""
    n_pred = n_pred.astype(np.float64)
    n_gt = n_gt.astype(np.float64)
    p = _ratio(tp.astype(np.float64), n_pred, (n_gt == 0).astype(np.float64))
    no_pred = (n_pred == 0).astype(np.float64)
    r = _ratio(tp.astype(np.float64), n_gt, no_pred)
    f1 = _ratio(2.0 * p * r, p + r, np.zeros(p.shape))
    miou_t = _ratio(tp_iou, n_gt, no_pred)
    return {
        "P@50": p[:, i50], "R@50": r[:, i50], "F1@50": f1[:, i50],
        "mF1@50:95": f1[:, :n_thresholds].mean(axis=1),
        "mIoU@50:95": miou_t[:, :n_thresholds].mean(axis=1),
        "mIoU_best": _ratio(best_sum, n_gt, no_pred),
        "F1_t": f1,
    }


def score_records(records: Sequence[Record], thresholds: Sequence[float] = THRESHOLDS,
                  clean_exclude: Sequence[str] = CLEAN_EXCLUDE, backend: Optional[str] = None) -> Scores:
    """Score every record at every threshold (one batched matching call) and aggregate."""
    if not records:
        raise ValueError("score_records: no records to score")
    thresholds = tuple(float(t) for t in thresholds)
    if not thresholds:
        raise ValueError("score_records: thresholds must not be empty")
    all_t = thresholds + (() if 0.5 in thresholds else (0.5,))
    i50, n_t = all_t.index(0.5), len(thresholds)
    n_pred = np.fromiter((len(r.pred) for r in records), dtype=np.int64, count=len(records))
    n_gt = np.fromiter((len(r.gt) for r in records), dtype=np.int64, count=len(records))
    zero = np.zeros((0, 4))
    pred = np.concatenate([zero] + [r.pred for r in records])
    gt = np.concatenate([zero] + [r.gt for r in records])
    offsets = lambda n: np.concatenate([[0], np.cumsum(n)])
    tp, tp_iou, best = greedy_match_counts(pred, offsets(n_pred), gt, offsets(n_gt), all_t, backend=backend)
    best_sum = np.bincount(np.repeat(np.arange(len(records)), n_gt), weights=best, minlength=len(records))

    ks = sorted({r.k for r in records})
    classes = sorted({r.cls for r in records})
    k_idx = np.searchsorted(ks, [r.k for r in records])
    c_idx = np.searchsorted(classes, [r.cls for r in records])
    group = k_idx * len(classes) + c_idx
    n_groups = len(ks) * len(classes)

    def by_group(values: np.ndarray) -> np.ndarray:
        out = np.zeros((n_groups,) + values.shape[1:], dtype=values.dtype)
        np.add.at(out, group, values)
        return out

    g_counts = {"n_samples": np.bincount(group, minlength=n_groups), "n_pred": by_group(n_pred),
                "n_gt": by_group(n_gt), "tp": by_group(tp), "tp_iou": by_group(tp_iou), "best": by_group(best_sum)}
    clean = np.array([c not in set(clean_exclude) for c in classes])

    def metric_rows(counts: dict, keys: list[tuple[int, str, str]]) -> list[dict]:
        m = compute_metrics(counts["n_pred"], counts["n_gt"], counts["tp"], counts["tp_iou"], counts["best"], n_t, i50)
        return [{"k": k, "kind": kind, "group": name,
                 **{c: int(counts[c][i]) for c in COUNTS}, **{x: float(m[x][i]) for x in METRICS},
                 "F1_by_threshold": m["F1_t"][i].tolist(), "tp_by_threshold": counts["tp"][i].tolist()}
                for i, (k, kind, name) in enumerate(keys)]

    class_rows = metric_rows(g_counts, [(k, "class", c) for k in ks for c in classes])
    rows: list[dict] = []
    for ki, k in enumerate(ks):
        present = g_counts["n_samples"][ki * len(classes):(ki + 1) * len(classes)] > 0
        mine = class_rows[ki * len(classes):(ki + 1) * len(classes)]
        rows += [r for r, ok in zip(mine, present) if ok]
        for name, subset in (("all", present), (CLEAN_NAME, present & clean)):
            if not subset.any():
                continue
            members = [r for r, ok in zip(mine, subset) if ok]
            sl = slice(ki * len(classes), (ki + 1) * len(classes))
            pooled = {c: v[sl][subset].sum(axis=0, keepdims=True) for c, v in g_counts.items()}
            mean = {"k": k, "kind": "mean", "group": name, **{c: sum(r[c] for r in members) for c in COUNTS},
                    **{x: float(np.mean([r[x] for r in members])) for x in METRICS},
                    "F1_by_threshold": np.mean([r["F1_by_threshold"] for r in members], axis=0).tolist(),
                    "tp_by_threshold": pooled["tp"][0].tolist()}
            rows += [mean] + metric_rows(pooled, [(k, "pooled", name)])

    per = compute_metrics(n_pred, n_gt, tp, tp_iou, best_sum, n_t, i50)
    per_sample = [{"k": r.k, "class": r.cls, "sample_id": r.sample_id, "line": r.line,
                   "n_pred": int(n_pred[i]), "n_gt": int(n_gt[i]), "tp@50": int(tp[i, i50]),
                   **{x: float(per[x][i]) for x in METRICS}} for i, r in enumerate(records)]
    return Scores(rows=rows, per_sample=per_sample, thresholds=thresholds, clean_exclude=tuple(clean_exclude))
