import contextlib
import io
import math

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from icl.ops import average_precision, detection_matches
from icl.ops._dispatch import backend_status

def coco_ap(pb, ps, pi, gb, gi, thr, max_det=None):
    """AP of pycocotools' COCOeval (bbox, one category, one IoU threshold, area "all")."""
    images = sorted({int(i) for i in pi} | {int(i) for i in gi})
    anns = [
        {"id": k + 1, "image_id": int(i), "category_id": 1, "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]],
         "area": (b[2] - b[0]) * (b[3] - b[1]), "iscrowd": 0}
        for k, (b, i) in enumerate(zip(gb.tolist(), gi.tolist()))
    ]
    dets = [
        {"image_id": int(i), "category_id": 1, "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]], "score": s}
        for b, s, i in zip(pb.tolist(), ps.tolist(), pi.tolist())
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {"images": [{"id": i} for i in images], "annotations": anns, "categories": [{"id": 1}]}
        gt.createIndex()
        dt = gt.loadRes(dets)
        ev = COCOeval(gt, dt, "bbox")
        ev.params.iouThrs = np.array([thr])
        ev.params.maxDets = [max_det or 10**6]
        ev.params.areaRng = [[0, 1e10]]
        ev.params.areaRngLbl = ["all"]
        ev.evaluate()
        ev.accumulate()
    prec = ev.eval["precision"][0, :, 0, 0, 0]
    return float("nan") if (prec == -1).all() else float(prec.mean())


def random_case(rng, grid=True):
    """Several images with GT and scored predictions, in shuffled order, with ties."""
    n_img = int(rng.integers(1, 7))
    ids = rng.choice(10**6, n_img, replace=False) if rng.random() < 0.5 else np.arange(n_img)
    n_gt = rng.integers(0, 8, n_img)
    n_pr = rng.integers(0, 12, n_img)

    def boxes(n):
        if grid:  # crowded small integer boxes: many equal IoUs
            xy = rng.integers(0, 5, (n, 2)).astype(np.float64)
            return np.concatenate([xy, xy + rng.integers(1, 4, (n, 2))], axis=1)
        xy = np.round(rng.uniform(0, 30, (n, 2)) * 64) / 64
        return np.concatenate([xy, xy + np.round(rng.uniform(1, 12, (n, 2)) * 64) / 64], axis=1)

    gi = np.repeat(ids, n_gt)
    pi = np.repeat(ids, n_pr)
    gb, pb = boxes(len(gi)), boxes(len(pi))
    ps = np.round(rng.random(len(pi)), 1)  # coarse scores: many ties
    perm = rng.permutation(len(pi))
    gperm = rng.permutation(len(gi))
    return pb[perm], ps[perm], pi[perm], gb[gperm], gi[gperm]


@pytest.mark.parametrize("seed", range(40))
def test_coco101_equals_pycocotools(backend, seed):
    rng = np.random.default_rng(seed)
    pb, ps, pi, gb, gi = random_case(rng, grid=seed % 2 == 0)
    if len(ps) == 0:  # pycocotools' loadRes cannot take an empty list
        pb, ps, pi = gb[:1] + 1, np.ones(min(1, len(gi))), gi[:1]
    thr = [0.5, 0.3, 0.75, 0.1, 1.0][seed % 5]
    max_det = [None, None, 4][seed % 3]
    ours = average_precision(pb, ps, pi, gb, gi, thr, "coco101", max_detections=max_det, backend=backend)
    ref = coco_ap(pb, ps, pi, gb, gi, thr, max_det)
    if math.isnan(ref):
        assert math.isnan(ours)
    else:
        assert abs(ours - ref) <= 1e-12, (ours, ref)


def test_coco101_equals_pycocotools_many_images(backend):
    rng = np.random.default_rng(7)
    n_img = 300
    gi = np.repeat(np.arange(n_img) * 7 + 3, rng.integers(0, 6, n_img))
    pi = np.repeat(np.arange(n_img) * 7 + 3, rng.integers(0, 12, n_img))
    xy = rng.uniform(0, 50, (len(gi), 2))
    gb = np.concatenate([xy, xy + rng.uniform(2, 20, xy.shape)], axis=1)
    src = rng.integers(0, len(gi), len(pi))  # predictions are jittered GT (of any image)
    pb = gb[src] + rng.normal(0, 2, (len(pi), 4))
    pb[:, 2:] = np.maximum(pb[:, 2:], pb[:, :2])
    ps = rng.random(len(pi))
    ours = average_precision(pb, ps, pi, gb, gi, 0.5, "coco101", backend=backend)
    assert abs(ours - coco_ap(pb, ps, pi, gb, gi, 0.5)) <= 1e-12


def slow_ap(pb, ps, pi, gb, gi, thr):
    """Independent pure-Python all-point AP (VOC style), same ordering and tie rules."""
    pb, ps, pi, gb, gi = pb.tolist(), ps.tolist(), pi.tolist(), gb.tolist(), gi.tolist()

    def iou(a, b):
        w = min(a[2], b[2]) - max(a[0], b[0])
        h = min(a[3], b[3]) - max(a[1], b[1])
        if w <= 0 or h <= 0:
            return 0.0
        inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)

    tp = {}
    for image in set(pi):
        preds = sorted((k for k in range(len(ps)) if pi[k] == image), key=lambda k: (-ps[k], k))
        gts = [g for g in range(len(gi)) if gi[g] == image]
        used = set()
        for k in preds:
            best, match = min(thr, 1 - 1e-10), None
            for g in gts:
                if g not in used and iou(pb[k], gb[g]) >= best:
                    best, match = iou(pb[k], gb[g]), g
            tp[k] = match is not None
            if match is not None:
                used.add(match)
    if not gi:
        return float("nan")
    ranked = sorted(range(len(ps)), key=lambda k: (-ps[k], pi[k], k))
    rec, prec, ntp = [], [], 0
    for rank, k in enumerate(ranked, 1):
        ntp += tp[k]
        rec.append(ntp / len(gi))
        prec.append(ntp / rank)
    mrec, mpre = [0.0] + rec + [1.0], [0.0] + prec + [0.0]
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    return sum((mrec[i + 1] - mrec[i]) * mpre[i + 1] for i in range(len(mrec) - 1) if mrec[i + 1] != mrec[i])


@pytest.mark.parametrize("seed", range(30))
def test_all_point_equals_slow_python(backend, seed):
    rng = np.random.default_rng(100 + seed)
    pb, ps, pi, gb, gi = random_case(rng, grid=seed % 3 != 0)
    thr = [0.5, 0.3, 0.7][seed % 3]
    ours = average_precision(pb, ps, pi, gb, gi, thr, "all", backend=backend)
    ref = slow_ap(pb, ps, pi, gb, gi, thr)
    assert (math.isnan(ours) and math.isnan(ref)) or abs(ours - ref) <= 1e-12, (ours, ref)


def hand_case():
    # 3 GT in 2 images; predictions ranked TP, FP, TP, FP, TP.
    gb = np.array([[0, 0, 10, 10], [20, 20, 30, 30], [0, 0, 4, 4]], np.float64)
    gi = np.array([0, 0, 1])
    pb = np.array([[0, 0, 10, 10], [50, 50, 60, 60], [20, 20, 30, 31], [0, 0, 10, 10], [0, 0, 4, 4.5]], np.float64)
    ps = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    pi = np.array([0, 0, 0, 0, 1])
    return pb, ps, pi, gb, gi


def test_hand_computed(backend):
    case = hand_case()
    # precisions 1, 1/2, 2/3, 2/4, 3/5 -> interpolated 1, 2/3, 2/3, 3/5, 3/5 at TP ranks 1, 3, 5
    assert average_precision(*case, backend=backend) == pytest.approx((1 + 2 / 3 + 3 / 5) / 3, abs=1e-14)
    # recall 1/3, 2/3, 1: 34 thresholds at precision 1, 33 at 2/3, 34 at 3/5
    coco = average_precision(*case, interpolation="coco101", backend=backend)
    assert coco == pytest.approx((34 + 33 * 2 / 3 + 34 * 3 / 5) / 101, abs=1e-14)
    m = detection_matches(*case, backend=backend)
    np.testing.assert_array_equal(m.gt_index, [0, -1, 1, -1, 2])
    np.testing.assert_array_equal(m.order, [0, 1, 2, 3, 4])
    assert m.num_gt == 3
    # IoU of the third prediction is 10/11 < 0.95: unmatched at that threshold
    assert detection_matches(*case, 0.95, backend=backend).gt_index[2] == -1


def test_tie_rules(backend):
    gb = np.array([[0, 0, 2, 1], [1, 0, 3, 1]], np.float64)
    gi = np.array([5, 5])
    # equal IoU (1/3) with both GT: the later GT wins, so the second prediction misses
    pb = np.array([[1, 0, 2, 1], [0, 0, 2, 1], [1, 0, 2, 1]], np.float64)
    m = detection_matches(pb, np.array([0.9, 0.8, 0.7]), np.array([5, 5, 5]), gb, gi, 0.3, backend=backend)
    np.testing.assert_array_equal(m.gt_index, [1, 0, -1])
    # equal scores: rank by image id, then input index
    ps = np.array([0.5, 0.5, 0.5, 0.5])
    pi = np.array([9, 2, 9, 2])
    m = detection_matches(np.zeros((4, 4)), ps, pi, np.zeros((0, 4)), np.zeros(0, np.int64), backend=backend)
    np.testing.assert_array_equal(m.order, [1, 3, 0, 2])


def test_edge_cases(backend):
    e4, ei = np.zeros((0, 4)), np.zeros(0, np.int64)
    gb, gi = np.array([[0.0, 0, 1, 1]]), np.array([0])
    assert math.isnan(average_precision(e4, np.zeros(0), ei, e4, ei, backend=backend))
    assert math.isnan(average_precision(gb, np.ones(1), gi, e4, ei, backend=backend))
    for interp in ("all", "coco101"):
        assert average_precision(e4, np.zeros(0), ei, gb, gi, interpolation=interp, backend=backend) == 0.0
        assert average_precision(gb, np.ones(1), np.array([1]), gb, gi, interpolation=interp, backend=backend) == 0.0
        assert average_precision(gb, np.ones(1), gi, gb, gi, interpolation=interp, backend=backend) == 1.0
    # image ids spanning the whole int64 range: only the middle prediction shares its image
    # with its box (ranks FP, TP, FP: AP = 1/2 * 1/3)
    ids = np.array([-(2**62), 2**62, 0])
    boxes = np.array([[0.0, 0, 1, 1], [0, 0, 2, 2], [5, 5, 6, 6]])
    ps = np.array([0.3, 0.2, 0.1])
    assert average_precision(boxes, ps, ids, boxes, ids[::-1].copy(), backend=backend) == pytest.approx(1 / 6)
    assert average_precision(boxes, ps, ids, boxes, ids, backend=backend) == 1.0


def test_max_detections(backend):
    pb, ps, pi, gb, gi = hand_case()
    m = detection_matches(pb, ps, pi, gb, gi, max_detections=2, backend=backend)
    np.testing.assert_array_equal(m.order, [0, 1, 4])
    np.testing.assert_array_equal(m.gt_index, [0, -1, -1, -1, 2])


def test_backends_agree_large():
    if not backend_status("cpu")[0]:
        pytest.skip(backend_status("cpu")[1])
    rng = np.random.default_rng(3)
    pi = rng.integers(0, 400, 6000)
    gi = rng.integers(0, 400, 1500)
    xy = rng.integers(0, 40, (6000, 2)).astype(np.float64)
    pb = np.concatenate([xy, xy + rng.integers(1, 15, (6000, 2))], axis=1)
    xy = rng.integers(0, 40, (1500, 2)).astype(np.float64)
    gb = np.concatenate([xy, xy + rng.integers(1, 15, (1500, 2))], axis=1)
    ps = np.round(rng.random(6000), 2).astype(np.float32)
    a = detection_matches(pb, ps, pi, gb, gi, backend="cpu", max_detections=12)
    b = detection_matches(pb, ps, pi, gb, gi, backend="reference", max_detections=12)
    np.testing.assert_array_equal(a.gt_index, b.gt_index)
    np.testing.assert_array_equal(a.order, b.order)
    for interp in ("all", "coco101"):
        x = average_precision(pb, ps, pi, gb, gi, interpolation=interp, backend="cpu")
        y = average_precision(pb, ps, pi, gb, gi, interpolation=interp, backend="reference")
        assert abs(x - y) <= 1e-12


def test_torch_inputs_and_outputs(backend):
    pb, ps, pi, gb, gi = (torch.from_numpy(x) for x in hand_case())
    m = detection_matches(pb.float(), ps.float(), pi.int(), gb, gi, backend=backend)
    assert isinstance(m.gt_index, torch.Tensor) and m.gt_index.dtype == torch.int64
    assert average_precision(pb.float(), ps.half(), pi, gb.int(), gi, backend=backend) == pytest.approx(34 / 45)


@pytest.mark.parametrize(
    "change,error,match",
    [
        (dict(pred_boxes=np.zeros((5, 3))), ValueError, "pred_boxes"),
        (dict(gt_boxes=np.zeros(4)), ValueError, "gt_boxes"),
        (dict(pred_scores=np.ones(4)), ValueError, "pred_scores"),
        (dict(pred_scores=np.array([0.1, np.nan, 0.2, 0.3, 0.4])), ValueError, "NaN"),
        (dict(pred_scores=np.ones(5, bool)), TypeError, "pred_scores"),
        (dict(pred_image=np.zeros(4, np.int64)), ValueError, "pred_image"),
        (dict(gt_image=np.zeros(2, np.int64)), ValueError, "gt_image"),
        (dict(gt_image=np.zeros(3)), TypeError, "gt_image"),
        (dict(pred_boxes=np.full((5, 4), np.nan)), ValueError, "pred_boxes"),
        (dict(gt_boxes=np.array([[0, 0, 1, 1], [3, 0, 2, 1], [0, 0, 1, 1.0]])), ValueError, "inverted"),
        (dict(iou_threshold=1.5), ValueError, "iou_threshold"),
        (dict(interpolation="voc07"), ValueError, "interpolation"),
        (dict(max_detections=0), ValueError, "max_detections"),
        (dict(pred_boxes=[[0, 0, 1, 1]] * 5), TypeError, "pred_boxes"),
    ],
)
def test_invalid_arguments(change, error, match):
    pb, ps, pi, gb, gi = hand_case()
    kwargs = dict(pred_boxes=pb, pred_scores=ps, pred_image=pi, gt_boxes=gb, gt_image=gi)
    kwargs.update(change)
    with pytest.raises(error, match=match):
        average_precision(**kwargs)
