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

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from icl.benchmarks.best50.predictions import Record
from icl.ops import greedy_match_counts  # numpy in: the native kernel without torch

THRESHOLDS = (0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95)
CLEAN_EXCLUDE = ("square_cage",)
CLEAN_NAME = "clean7"
METRICS = ("P@50", "R@50", "F1@50", "mF1@50:95", "mIoU@50:95", "mIoU_best")
COUNTS = ("n_samples", "n_pred", "n_gt")


@dataclass
class Scores:
    """``rows``: one dict per (k, kind, group), kind "class" (group = class name), "mean" or
    "pooled" (group "all" or "clean7"), with :data:`COUNTS`, :data:`METRICS` and
    ``F1_by_threshold``/``tp_by_threshold`` lists. ``records`` and ``sample_metrics`` (arrays
    ``[S]`` by metric name, plus n_pred, n_gt, tp@50) give each record's own scores."""

    rows: list[dict]
    thresholds: tuple[float, ...]
    clean_exclude: tuple[str, ...]
    records: Sequence[Record] = ()
    sample_metrics: dict = field(default_factory=dict)

    def table(self, k: int) -> list[dict]:
        return [r for r in self.rows if r["k"] == k]

    @property
    def ks(self) -> list[int]:
        return sorted({r["k"] for r in self.rows})

    def per_sample(self) -> list[dict]:
        """One dict per record: k, class, sample_id, line, n_pred, n_gt, tp@50 and the metrics."""
        cols = {name: v.tolist() for name, v in self.sample_metrics.items()}
        return [{"k": r.k, "class": r.cls, "sample_id": r.sample_id, "line": r.line,
                 **{name: v[i] for name, v in cols.items()}} for i, r in enumerate(self.records)]


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


@dataclass
class SampleCounts:
    """Per-sample matching counts of S samples at thresholds ``all_t`` (the averaged ones, then
    0.5 when it is not among them): ``n_pred``, ``n_gt``, ``best_sum`` ``[S]``; ``tp``,
    ``tp_iou`` ``[S, T']``."""

    n_pred: np.ndarray
    n_gt: np.ndarray
    best_sum: np.ndarray
    tp: np.ndarray
    tp_iou: np.ndarray
    thresholds: tuple[float, ...]

    @property
    def all_t(self) -> tuple[float, ...]:
        return self.thresholds + (() if 0.5 in self.thresholds else (0.5,))


def _thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    out = tuple(float(t) for t in thresholds)
    if not out:
        raise ValueError("thresholds must not be empty")
    return out


def sample_counts(preds: Sequence[np.ndarray], gts: Sequence[np.ndarray], thresholds: Sequence[float] = THRESHOLDS,
                  backend: Optional[str] = None) -> SampleCounts:
    """Match every sample's predictions to its GT at every threshold (one batched call)."""
    thresholds = _thresholds(thresholds)
    all_t = thresholds + (() if 0.5 in thresholds else (0.5,))
    s_count = len(preds)
    n_pred = np.fromiter((len(p) for p in preds), dtype=np.int64, count=s_count)
    n_gt = np.fromiter((len(g) for g in gts), dtype=np.int64, count=s_count)
    zero = np.zeros((0, 4))
    pred = np.concatenate([zero, *preds])
    gt = np.concatenate([zero, *gts])
    offsets = lambda n: np.concatenate([[0], np.cumsum(n)])
    tp, tp_iou, best = greedy_match_counts(pred, offsets(n_pred), gt, offsets(n_gt), all_t, backend=backend)
    best_sum = np.bincount(np.repeat(np.arange(s_count), n_gt), weights=best, minlength=s_count)
    return SampleCounts(n_pred, n_gt, best_sum, np.asarray(tp), np.asarray(tp_iou), thresholds)


def sample_metrics(c: SampleCounts) -> dict[str, np.ndarray]:
    """Each sample's own metrics (``[S]`` arrays by name, plus n_pred, n_gt, tp@50)."""
    all_t = c.all_t
    i50 = all_t.index(0.5)
    per = compute_metrics(c.n_pred, c.n_gt, c.tp, c.tp_iou, c.best_sum, len(c.thresholds), i50)
    return {"n_pred": c.n_pred, "n_gt": c.n_gt, "tp@50": c.tp[:, i50], **{x: per[x] for x in METRICS}}


def score_records(records: Sequence[Record], thresholds: Sequence[float] = THRESHOLDS,
                  clean_exclude: Sequence[str] = CLEAN_EXCLUDE, backend: Optional[str] = None) -> Scores:
    """Score every record at every threshold (one batched matching call) and aggregate."""
    if not records:
        raise ValueError("score_records: no records to score")
    counts = sample_counts([r.pred for r in records], [r.gt for r in records], thresholds, backend)
    rows = aggregate_counts([r.k for r in records], [r.cls for r in records], counts, clean_exclude)
    return Scores(rows=rows, thresholds=counts.thresholds, clean_exclude=tuple(clean_exclude), records=records,
                  sample_metrics=sample_metrics(counts))


def aggregate_counts(ks_of: Sequence[int], classes_of: Sequence[str], counts: SampleCounts,
                     clean_exclude: Sequence[str] = CLEAN_EXCLUDE) -> list[dict]:
    """Rows per (k, class), and mean/pooled over all and clean7 classes, from per-sample counts
    (see :class:`Scores`)."""
    thresholds, all_t = counts.thresholds, counts.all_t
    i50, n_t, n_all = all_t.index(0.5), len(thresholds), len(all_t)
    s_count = len(ks_of)
    n_pred, n_gt, best_sum, tp, tp_iou = counts.n_pred, counts.n_gt, counts.best_sum, counts.tp, counts.tp_iou
    # Per-sample counts as columns [1, n_pred, n_gt, best_sum, tp (T'), tp_iou (T')], summed per
    # (k, class) group; rows over groups are products with membership matrices. (bincount and
    # einsum rather than BLAS: threaded BLAS is slow for these small products on a busy machine.)
    ks = sorted(set(ks_of))
    classes = sorted(set(classes_of))
    k_pos = {k: i for i, k in enumerate(ks)}
    c_pos = {c: i for i, c in enumerate(classes)}
    n_cls = len(classes)
    group = np.fromiter((k_pos[k] * n_cls + c_pos[c] for k, c in zip(ks_of, classes_of)), dtype=np.int64,
                        count=s_count)
    cols = np.column_stack([np.ones(s_count), n_pred, n_gt, best_sum, tp, tp_iou])
    g_sums = np.stack([np.bincount(group, weights=c, minlength=len(ks) * n_cls) for c in cols.T], axis=1)
    present = g_sums[:, 0] > 0
    clean = np.array([c not in set(clean_exclude) for c in classes] * len(ks))

    keys: list[tuple[int, str, str]] = []
    select = []  # membership of each row over the class groups
    eye = np.eye(len(ks) * n_cls)
    for ki, k in enumerate(ks):
        in_k = np.zeros(len(ks) * n_cls, dtype=bool)
        in_k[ki * n_cls:(ki + 1) * n_cls] = True
        keys += [(k, "class", c) for ci, c in enumerate(classes) if present[ki * n_cls + ci]]
        select += [eye[ki * n_cls + ci] for ci in range(n_cls) if present[ki * n_cls + ci]]
        for name, subset in (("all", in_k & present), (CLEAN_NAME, in_k & present & clean)):
            if subset.any():
                keys += [(k, "mean", name), (k, "pooled", name)]
                select += [subset / subset.sum(), subset.astype(np.float64)]
    select_m = np.array(select)
    # class and pooled rows from summed counts; mean rows average the class rows' metrics
    sums = np.einsum("rg,gc->rc", select_m, g_sums)
    m = compute_metrics(sums[:, 1], sums[:, 2], sums[:, 4:4 + n_all], sums[:, 4 + n_all:], sums[:, 3], n_t, i50)
    g_metrics = compute_metrics(g_sums[:, 1], g_sums[:, 2], g_sums[:, 4:4 + n_all], g_sums[:, 4 + n_all:],
                                g_sums[:, 3], n_t, i50)
    is_mean = np.array([kind == "mean" for _, kind, _ in keys])
    for name in (*METRICS, "F1_t"):
        m[name][is_mean] = np.einsum("rg,g...->r...", select_m[is_mean], g_metrics[name])
    pooled_counts = np.einsum("rg,gc->rc", (select_m > 0).astype(np.float64), g_sums)
    rows = []
    lists = {name: m[name].tolist() for name in METRICS}
    f1_t = m["F1_t"].tolist()
    tp_t = np.rint(pooled_counts[:, 4:4 + n_all]).astype(np.int64).tolist()
    count_rows = np.rint(pooled_counts[:, :3]).astype(np.int64).tolist()
    for i, (k, kind, name) in enumerate(keys):
        rows.append({"k": k, "kind": kind, "group": name, **dict(zip(COUNTS, count_rows[i])),
                     **{x: lists[x][i] for x in METRICS}, "F1_by_threshold": f1_t[i], "tp_by_threshold": tp_t[i]})

    return rows
