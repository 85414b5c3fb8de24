"""AP@0.5 over 5,000 images: icl.ops.average_precision vs pycocotools COCOeval (same numbers)."""

import contextlib
import io

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from bench._peer import compare
from icl.ops import average_precision
from icl.ops._dispatch import backend_status

N_IMAGES = 5000


def make_case(seed=0):
    """1-10 GT and 10-30 scored detections per image (half jittered GT, half clutter).

    Coordinates are multiples of 1/16 so that COCO's xywh round trip is exact.
    """
    rng = np.random.default_rng(seed)
    n_gt = rng.integers(1, 11, N_IMAGES)
    n_dt = rng.integers(10, 31, N_IMAGES)
    gi = np.repeat(np.arange(N_IMAGES), n_gt)
    pi = np.repeat(np.arange(N_IMAGES), n_dt)
    xy = rng.uniform(0, 600, (len(gi), 2))
    gb = np.concatenate([xy, xy + rng.uniform(8, 200, xy.shape)], axis=1)
    starts = np.repeat(np.cumsum(n_gt) - n_gt, n_dt)
    src = starts + (rng.random(len(pi)) * np.repeat(n_gt, n_dt)).astype(np.int64)
    wh = gb[src, 2:] - gb[src, :2]
    pb = gb[src] + rng.normal(0, 0.12, (len(pi), 4)) * np.concatenate([wh, wh], axis=1)
    clutter = rng.random(len(pi)) < 0.5
    xy = rng.uniform(0, 600, (int(clutter.sum()), 2))
    pb[clutter] = np.concatenate([xy, xy + rng.uniform(8, 200, xy.shape)], axis=1)
    pb[:, 2:] = np.maximum(pb[:, 2:], pb[:, :2])
    gb, pb = np.round(gb * 16) / 16, np.round(pb * 16) / 16
    ps = np.round(rng.random(len(pi)), 3)
    return pb, ps, pi, gb, gi


def coco_objects(pb, ps, pi, gb, gi):
    anns = [{"id": k + 1, "image_id": int(i), "category_id": 1, "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]],
             "area": (b[2] - b[0]) * (b[3] - b[1]), "iscrowd": 0}
            for k, (b, i) in enumerate(zip(gb.tolist(), gi.tolist()))]
    dets = [{"image_id": int(i), "category_id": 1, "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]], "score": s}
            for b, s, i in zip(pb.tolist(), ps.tolist(), pi.tolist())]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {"images": [{"id": i} for i in range(N_IMAGES)], "annotations": anns,
                      "categories": [{"id": 1}]}
        gt.createIndex()
        dt = gt.loadRes(dets)
    return gt, dt


def coco_ap(gt, dt):
    """COCOeval evaluate + accumulate: one category, IoU 0.5, area "all", no per-image cap."""
    with contextlib.redirect_stdout(io.StringIO()):
        ev = COCOeval(gt, dt, "bbox")
        ev.params.iouThrs = np.array([0.5])
        ev.params.maxDets = [100]
        ev.params.areaRng = [[0, 1e10]]
        ev.params.areaRngLbl = ["all"]
        ev.evaluate()
        ev.accumulate()
    return float(ev.eval["precision"][0, :, 0, 0, 0].mean())


@pytest.mark.skipif(not backend_status("cpu")[0], reason=backend_status("cpu")[1])
def test_average_precision_vs_cocoeval(benchmark):
    case = make_case()
    gt, dt = coco_objects(*case)

    def ours():
        return average_precision(*case, 0.5, "coco101", backend="cpu")

    ref = coco_ap(gt, dt)
    assert abs(ours() - ref) <= 1e-12, (ours(), ref)
    ratio = compare(benchmark, ours, lambda: coco_ap(gt, dt), peer_name="pycocotools COCOeval",
                    items=N_IMAGES, rounds=10, peer_rounds=3)
    assert ratio >= 10
