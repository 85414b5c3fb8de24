"""best50 scoring of 1,600 samples (4 K x 8 classes x 50) at all 10 thresholds, beside a plain
per-sample Python implementation of the package's own description (the peer).

Floors: ours <= 0.5 s and >= 20x faster than the peer, on the same records in the same process.
"""

from __future__ import annotations

import numpy as np

from bench._peer import compare
from icl.benchmarks.best50.predictions import Record
from icl.benchmarks.best50.score import CLEAN_EXCLUDE, METRICS, THRESHOLDS, score_records

CLASSES = ("circle", "square", "triangle", "cross", "ring", "diamond", "ellipse", "square_cage")


def make_records(per_class: int = 50, seed: int = 0) -> list[Record]:
    """Realistic answers: 1-6 GT boxes in a 640x480 image, most found with jitter, some missed,
    some duplicated, some false positives; integer and fractional coordinates."""
    rng = np.random.default_rng(seed)
    records = []
    for k in (1, 2, 4, 8):
        for cls in CLASSES:
            for i in range(per_class):
                n = int(rng.integers(1, 7))
                xy = rng.uniform(0, 560, size=(n, 2))
                gt = np.c_[xy, xy + rng.uniform(16, 120, size=(n, 2))].round()
                found = gt[rng.random(n) < 0.75]
                pred = found + rng.normal(0, 6, size=found.shape)
                extra = rng.uniform(0, 600, size=(int(rng.integers(0, 3)), 2))
                pred = np.r_[pred, np.c_[extra, extra + 40], found[:1]]
                pred[:, 2:] = np.maximum(pred[:, 2:], pred[:, :2] + 1)
                records.append(Record(k=k, cls=cls, gt=gt, pred=pred, sample_id=f"{cls}_{i:03d}"))
    return records


def _iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = iw * ih if iw > 0 and ih > 0 else 0.0
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def plain_match(preds, gts, t):
    """Matching at IoU threshold t as the package states it: all pred/GT pairs by descending IoU
    (ties: lower pred, then lower GT), each box used once, pairs with IoU >= t are TP."""
    pairs = sorted(((_iou(p, g), i, j) for i, p in enumerate(preds) for j, g in enumerate(gts)),
                   key=lambda x: (-x[0], x[1], x[2]))
    used_p, used_g, tp, tp_iou = set(), set(), 0, 0.0
    for v, i, j in pairs:
        if v >= t and i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            tp += 1
            tp_iou += v
    return tp, tp_iou


def plain_score(records: list[Record], thresholds=THRESHOLDS, clean_exclude=CLEAN_EXCLUDE) -> dict:
    """The package's description in plain Python, sample by sample: the matching at each
    threshold, the best IoU of each GT box, then P, R, F1, mF1@50:95, mIoU@50:95, mIoU_best per
    class (micro), their mean over classes, and pooled, for each K."""
    totals: dict = {}
    for r in records:
        preds, gts = r.pred.tolist(), r.gt.tolist()
        t = totals.setdefault((r.k, r.cls), {"pred": 0, "gt": 0, "best": 0.0, "tp": {}, "tp_iou": {}})
        t["pred"] += len(preds)
        t["gt"] += len(gts)
        t["best"] += sum(max((_iou(p, g) for p in preds), default=0.0) for g in gts)
        for thr in thresholds:
            tp, tp_iou = plain_match(preds, gts, thr)
            t["tp"][thr] = t["tp"].get(thr, 0) + tp
            t["tp_iou"][thr] = t["tp_iou"].get(thr, 0.0) + tp_iou

    def metrics(n_pred, n_gt, tp, tp_iou, best):
        def prf(tp_t):
            p = tp_t / n_pred if n_pred else float(n_gt == 0)
            r = tp_t / n_gt if n_gt else float(n_pred == 0)
            return p, r, (2 * p * r / (p + r) if p + r else 0.0)

        empty = float(n_pred == 0)
        p50, r50, f50 = prf(tp[0.5])
        return {"P@50": p50, "R@50": r50, "F1@50": f50,
                "mF1@50:95": sum(prf(tp[t])[2] for t in thresholds) / len(thresholds),
                "mIoU@50:95": sum((tp_iou[t] / n_gt if n_gt else empty) for t in thresholds) / len(thresholds),
                "mIoU_best": best / n_gt if n_gt else empty}

    out = {}
    for k in sorted({k for k, _ in totals}):
        classes = sorted(c for kk, c in totals if kk == k)
        for c in classes:
            t = totals[(k, c)]
            out[(k, "class", c)] = metrics(t["pred"], t["gt"], t["tp"], t["tp_iou"], t["best"])
        for name, members in (("all", classes), ("clean7", [c for c in classes if c not in clean_exclude])):
            out[(k, "mean", name)] = {m: sum(out[(k, "class", c)][m] for c in members) / len(members) for m in METRICS}
            ts = [totals[(k, c)] for c in members]
            out[(k, "pooled", name)] = metrics(
                sum(t["pred"] for t in ts), sum(t["gt"] for t in ts),
                {thr: sum(t["tp"][thr] for t in ts) for thr in thresholds},
                {thr: sum(t["tp_iou"][thr] for t in ts) for thr in thresholds}, sum(t["best"] for t in ts))
    return out


def test_bench_best50_scoring(benchmark):
    records = make_records()
    assert len(records) == 1600
    ours = score_records(records)
    peer = plain_score(records)
    assert len(ours.rows) == len(peer)
    for r in ours.rows:  # same numbers before comparing speed
        ref = peer[(r["k"], r["kind"], r["group"])]
        assert all(abs(r[m] - ref[m]) < 1e-9 for m in METRICS), (r["k"], r["kind"], r["group"])
    ratio = compare(benchmark, lambda: score_records(records), lambda: plain_score(records),
                    peer_name="plain Python (package description)", items=len(records), rounds=7, peer_rounds=3)
    assert benchmark.stats.stats.median <= 0.5
    assert ratio >= 20
