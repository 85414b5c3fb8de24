import numpy as np
import pytest

from icl.benchmarks.best50.parse import format_box, parse_boxes
from icl.benchmarks.best50.predictions import Record
from icl.benchmarks.best50.score import METRICS, THRESHOLDS, score_records
from icl.ops._dispatch import backend_status


@pytest.fixture(params=["reference", "cpu"])
def backend(request):
    ok, why = backend_status(request.param)
    if not ok:
        pytest.skip(why)
    return request.param


def rec(gt, pred, cls="a", k=1, sid=None):
    return Record(k=k, cls=cls, gt=np.asarray(gt, float).reshape(-1, 4), pred=np.asarray(pred, float).reshape(-1, 4),
                  sample_id=sid)


def row(scores, k=1, kind="class", group="a"):
    (r,) = [r for r in scores.rows if r["k"] == k and r["kind"] == kind and r["group"] == group]
    return r


def check(r, expected):
    for name, value in expected.items():
        assert r[name] == pytest.approx(value, abs=1e-12), name


def test_hand_case_all_metrics(backend):
    # IoU 1, IoU 0.5 (exactly at the threshold) and a miss.
    s = score_records([rec([[0, 0, 10, 10], [20, 0, 30, 10]], [[0, 0, 10, 10], [20, 0, 30, 5], [50, 50, 60, 60]])],
                      backend=backend)
    # t = 0.50: TP 2, P 2/3, R 1, F1 0.8. t >= 0.55: TP 1, P 1/3, R 1/2, F1 0.4.
    check(row(s), {"n_pred": 3, "n_gt": 2, "P@50": 2 / 3, "R@50": 1.0, "F1@50": 0.8,
                   "mF1@50:95": (0.8 + 9 * 0.4) / 10,
                   "mIoU@50:95": ((1 + 0.5) / 2 + 9 * (1 / 2)) / 10,
                   "mIoU_best": (1 + 0.5) / 2})
    assert row(s)["tp_by_threshold"] == [2] + [1] * 9


def test_empty_predictions(backend):
    s = score_records([rec([[0, 0, 10, 10], [5, 5, 9, 9]], [])], backend=backend)
    check(row(s), {"P@50": 0.0, "R@50": 0.0, "F1@50": 0.0, "mF1@50:95": 0.0, "mIoU@50:95": 0.0, "mIoU_best": 0.0})


def test_empty_ground_truth(backend):
    s = score_records([rec([], [[0, 0, 10, 10]], cls="a"), rec([], [], cls="b")], backend=backend)
    check(row(s, group="a"), {"P@50": 0.0, "R@50": 0.0, "F1@50": 0.0, "mIoU@50:95": 0.0, "mIoU_best": 0.0})
    # nothing to find and nothing found: every score is 1
    check(row(s, group="b"), {m: 1.0 for m in METRICS})
    check(row(s, kind="mean", group="all"), {"F1@50": 0.5, "mIoU_best": 0.5})
    check(row(s, kind="pooled", group="all"), {"P@50": 0.0, "R@50": 0.0, "F1@50": 0.0})


def test_duplicate_predictions_count_once(backend):
    s = score_records([rec([[0, 0, 10, 10]], [[0, 0, 10, 10], [0, 0, 10, 10]])], backend=backend)
    check(row(s), {"P@50": 0.5, "R@50": 1.0, "F1@50": 2 / 3, "mF1@50:95": 2 / 3, "mIoU@50:95": 1.0,
                   "mIoU_best": 1.0})


def test_boxes_outside_the_image(backend):
    # Text box (0, 0, 2048, 1024) on a 100x100 image -> [0, 0, 200, 100]: IoU 0.5 with the
    # full-image GT, a true positive at 0.50 only. [-10, -10, 10, 10] vs [0, 0, 10, 10]: IoU 0.25.
    pred = parse_boxes(format_box((0, 0, 2048, 1024)), (100, 100))
    s = score_records([rec([[0, 0, 100, 100]], pred, cls="a"),
                       rec([[0, 0, 10, 10]], [[-10, -10, 10, 10]], cls="b")], backend=backend)
    check(row(s, group="a"), {"P@50": 1.0, "F1@50": 1.0, "mF1@50:95": 0.1, "mIoU@50:95": 0.05, "mIoU_best": 0.5})
    check(row(s, group="b"), {"P@50": 0.0, "R@50": 0.0, "mIoU_best": 0.25})


def test_malformed_text_scores_as_no_prediction(backend):
    pred = parse_boxes("<bbox_start><x1><y2><x3><bbox_end> sorry", (50, 50))
    s = score_records([rec([[0, 0, 10, 10]], pred)], backend=backend)
    check(row(s), {"n_pred": 0, "P@50": 0.0, "R@50": 0.0, "mIoU_best": 0.0})


def test_micro_within_class_mean_over_classes_and_pooled(backend):
    recs = [rec([[0, 0, 10, 10]], [[0, 0, 10, 10]], cls="a"),
            rec([[0, 0, 10, 10], [20, 20, 30, 30]], [[0, 0, 10, 10]], cls="b"),
            rec([[0, 0, 10, 10]], [], cls="b")]
    s = score_records(recs, backend=backend)
    check(row(s, group="a"), {"F1@50": 1.0})
    # class b, micro over its two samples: TP 1, 1 prediction, 3 GT
    check(row(s, group="b"), {"P@50": 1.0, "R@50": 1 / 3, "F1@50": 0.5, "mIoU_best": 1 / 3})
    check(row(s, kind="mean", group="all"), {"F1@50": 0.75, "R@50": 2 / 3, "mIoU_best": 2 / 3})
    check(row(s, kind="pooled", group="all"), {"P@50": 1.0, "R@50": 0.5, "F1@50": 2 / 3, "mIoU_best": 0.5})
    assert row(s, kind="pooled", group="all")["n_samples"] == 3


def test_clean7_excludes_square_cage_and_k_are_separate(backend):
    recs = [rec([[0, 0, 10, 10]], [[0, 0, 10, 10]], cls="circle", k=1),
            rec([[0, 0, 10, 10]], [], cls="square_cage", k=1),
            rec([[0, 0, 10, 10]], [], cls="circle", k=8)]
    s = score_records(recs, backend=backend)
    assert s.ks == [1, 8]
    check(row(s, kind="pooled", group="all"), {"F1@50": 2 / 3})
    check(row(s, kind="pooled", group="clean7"), {"F1@50": 1.0})
    check(row(s, kind="mean", group="clean7"), {"F1@50": 1.0})
    check(row(s, k=8, group="circle"), {"F1@50": 0.0})
    assert [(r["kind"], r["group"]) for r in s.table(8)] == [
        ("class", "circle"), ("mean", "all"), ("pooled", "all"), ("mean", "clean7"), ("pooled", "clean7")]


def test_only_square_cage_has_no_clean_rows():
    s = score_records([rec([[0, 0, 1, 1]], [], cls="square_cage")])
    assert {r["group"] for r in s.rows} == {"square_cage", "all"}


def _plain_f1(recs, t):
    # A direct micro F1 at one threshold, pairs sorted by (-IoU, pred, gt): independent check.
    tp = n_pred = n_gt = 0
    for r in recs:
        pairs = []
        for i, p in enumerate(r.pred.tolist()):
            for j, g in enumerate(r.gt.tolist()):
                iw, ih = min(p[2], g[2]) - max(p[0], g[0]), min(p[3], g[3]) - max(p[1], g[1])
                inter = iw * ih if iw > 0 and ih > 0 else 0.0
                union = ((p[2] - p[0]) * (p[3] - p[1]) + (g[2] - g[0]) * (g[3] - g[1])) - inter
                pairs.append((-(inter / union if union > 0 else 0.0), i, j))
        used_p, used_g = set(), set()
        for neg, i, j in sorted(pairs):
            if -neg >= t and i not in used_p and j not in used_g:
                used_p.add(i)
                used_g.add(j)
                tp += 1
        n_pred, n_gt = n_pred + len(r.pred), n_gt + len(r.gt)
    p = tp / n_pred if n_pred else float(n_gt == 0)
    rr = tp / n_gt if n_gt else float(n_pred == 0)
    return 2 * p * rr / (p + rr) if p + rr else 0.0


def test_random_records_match_a_plain_implementation(backend):
    rng = np.random.default_rng(0)
    recs = []
    for i in range(300):
        xy = rng.integers(0, 12, size=(rng.integers(0, 5), 2))
        gt = np.c_[xy, xy + rng.integers(1, 5, size=xy.shape)]
        jitter = rng.integers(-2, 3, size=(rng.integers(0, 6), 4))
        pred = (gt[rng.integers(0, len(gt), size=len(jitter))] if len(gt) else np.zeros((len(jitter), 4), int)) + jitter
        pred[:, 2:] = np.maximum(pred[:, 2:], pred[:, :2])
        recs.append(rec(gt, pred, cls="abc"[i % 3], k=(1, 2, 4, 8)[i % 4]))
    s = score_records(recs, backend=backend)
    for k in (1, 2, 4, 8):
        for c in "abc":
            mine = [r for r in recs if r.k == k and r.cls == c]
            got = row(s, k=k, group=c)
            assert got["F1@50"] == pytest.approx(_plain_f1(mine, 0.5), abs=1e-12)
            assert got["mF1@50:95"] == pytest.approx(np.mean([_plain_f1(mine, t) for t in THRESHOLDS]), abs=1e-12)


def test_thresholds_without_050_still_give_at_50_metrics():
    s = score_records([rec([[0, 0, 10, 10]], [[0, 0, 10, 6]])], thresholds=(0.7,))
    check(row(s), {"F1@50": 1.0, "mF1@50:95": 0.0})
    assert s.thresholds == (0.7,)


def test_no_records_raises():
    with pytest.raises(ValueError, match="no records"):
        score_records([])
