"""PROTOCOL §1.2-1.4 fidelity: keypoints outside the image are clipped before drawing; the
oracle's lossy cases are flagged by the task (``oracle_ceiling``) and score below perfect
exactly there; depth encodes over the dataset's own range from its metadata."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from icl.benchmarks.vibe.tasks import get_task
from icl.data.dataset import DatasetMeta
from tests.benchmarks.vibe.tasks.helpers import HAND_META, make_sample


def _oracle(task, sample, contexts=(), meta=HAND_META):
    _, target = task.make_pair(sample, 0)
    ctx = [task.make_pair(c, 0)[1] for c in contexts]
    score = task.evaluate([task.encode(target, meta)], [target], [ctx], meta)[0]
    return task.oracle_ceiling(target, ctx, meta), score


def test_keypoints_outside_the_image_are_clipped_before_drawing():
    task = get_task("keypoints")
    img = np.zeros((20, 30, 3), np.uint8)
    kp = np.array([[-4.0, 3.0, 2], [35.2, 25.0, 2], [10.0, 10.0, 1]])
    sample = make_sample(img, keypoints=kp)
    _, target = task.make_pair(sample, 0)
    np.testing.assert_array_equal(target.points, [[0.0, 3.0], [29.0, 19.0]])
    want = np.zeros((20, 30, 3), np.uint8)
    for x, y in ((0, 3), (29, 19)):
        cv2.circle(want, (x, y), 5, (255, 0, 0), thickness=-1, lineType=cv2.LINE_8)
    np.testing.assert_array_equal(task.encode(target, HAND_META), want)
    # encode clips targets built elsewhere too
    raw = type(target)(np.array([[-4.0, 3.0]]), (20, 30))
    assert task.encode(raw, HAND_META)[3, 0, 0] == 255


def test_keypoint_oracle_ceiling():
    task = get_task("keypoints")
    img = np.zeros((40, 60, 3), np.uint8)
    far = make_sample(img, keypoints=np.array([[10.0, 10.0, 2], [30.0, 10.0, 2]]))
    near = make_sample(img, keypoints=np.array([[10.0, 10.0, 2], [16.0, 10.0, 2]]))
    reason, score = _oracle(task, far)
    assert reason is None and score["f1"] == 1.0
    reason, score = _oracle(task, near)
    assert "6.0 px apart" in reason and score["f1"] < 1.0


def test_detection_oracle_ceiling():
    task = get_task("detection")
    img = np.zeros((30, 40, 3), np.uint8)
    ok = make_sample(img, boxes=np.array([[2.0, 2.0, 9.0, 8.0]]), box_classes=np.array([1]))
    thin = make_sample(img, boxes=np.array([[2.0, 2.0, 9.0, 8.0], [20.0, 5.0, 22.0, 15.0]]),
                       box_classes=np.array([1, 2]))
    assert _oracle(task, ok) == (None, {"ap50": 1.0})
    assert "box 1 is under 3 px" in _oracle(task, thin)[0]


def test_segmentation_oracle_ceiling():
    task = get_task("segmentation")
    img = np.zeros((6, 8, 3), np.uint8)
    seg = np.zeros((6, 8), np.uint8)
    seg[:, 4:] = 2
    query = make_sample(seg[..., None].repeat(3, 2), segmentation=seg)
    covering = make_sample(img, sid="c1", segmentation=seg.copy())
    partial = make_sample(img, sid="c2", segmentation=np.zeros((6, 8), np.uint8))
    assert _oracle(task, query, [covering]) == (None, {"miou": 1.0})
    reason, score = _oracle(task, query, [partial])
    assert "query classes [2]" in reason and score["miou"] < 1.0


@pytest.mark.parametrize("depth_range", [(0.0, 10.0), (0.0, 37.0)])
def test_depth_uses_the_dataset_range_and_flags_clipping(depth_range):
    task = get_task("depth")
    meta = DatasetMeta(name="sea", version="1", tasks=("depth",), depth_range=depth_range)
    gen = np.random.default_rng(9)
    depth = gen.uniform(0.2, 9.5, (12, 16)).astype(np.float32)
    sample = make_sample(np.zeros((12, 16, 3), np.uint8), depth=depth)
    reason, score = _oracle(task, sample, meta=meta)
    half_bin = 0.5 * (depth_range[1] - depth_range[0]) / 256
    assert reason is None and score["rmse"] <= half_bin + 1e-6
    far = depth.copy()
    far[0, 0] = depth_range[1] + 5.0
    reason, score = _oracle(task, make_sample(np.zeros((12, 16, 3), np.uint8), depth=far), meta=meta)
    assert "1 valid depth pixels outside" in reason and score["rmse"] > half_bin
    # another range, another encoding of the same depths
    other = DatasetMeta(name="x", version="1", tasks=("depth",), depth_range=(0.0, 20.0 + depth_range[1]))
    assert not np.array_equal(task.encode(depth, meta), task.encode(depth, other))


def test_tasks_without_a_ceiling_report_none():
    img = np.random.default_rng(2).integers(0, 256, (8, 9, 3), dtype=np.uint8)
    for name in ("edges", "flip", "rotation", "denoising"):
        task = get_task(name)
        sample = make_sample(img, edges=np.eye(8, 9, dtype=bool))
        _, target = task.make_pair(sample, 0)
        assert task.oracle_ceiling(target, [], HAND_META) is None
