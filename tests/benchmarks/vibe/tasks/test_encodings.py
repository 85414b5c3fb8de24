"""Model inputs and target encodings of every task (PROTOCOL §1.2), without the kernels."""

import cv2
import numpy as np
import pytest

from icl.data.seeds import rng
from icl.benchmarks.vibe.tasks import EncodingError, get_task, list_tasks
from icl.benchmarks.vibe.tasks.base import BoxesTarget, PointsTarget
from icl.benchmarks.vibe.tasks.palette import class_colours
from icl.benchmarks.vibe.tasks.restoration import inpaint_rect, to_grey
from tests.benchmarks.vibe.tasks.helpers import HAND_META, make_sample


def test_thirteen_tasks_twelve_paper_categories():
    from icl.benchmarks.vibe.tasks import paper_tasks

    assert list_tasks() == [
        "segmentation", "edges", "depth", "detection", "keypoints", "inpainting", "denoising",
        "colorization", "artifact_removal", "modality_transfer", "rotation", "flip", "object_removal",
    ]
    groups = paper_tasks()
    assert len(groups) == 12 and groups["geometric transformation"] == ["rotation", "flip"]
    for name in list_tasks():
        task = get_task(name)
        assert task.name == name and set(task.rank_metrics) <= set(task.metrics)
        assert task.lower_is_better <= set(task.metrics)
    assert {n for n in list_tasks() if get_task(n).semantic} == {"segmentation", "detection"}
    with pytest.raises(KeyError, match="unknown task"):
        get_task("telepathy")


def test_segmentation_encoding_colours_and_void():
    seg = np.array([[0, 1, 2], [3, 255, 1]], np.uint8)
    img = get_task("segmentation").encode(seg, HAND_META)
    colours = class_colours(4)
    assert img.dtype == np.uint8 and img.shape == (2, 3, 3)
    np.testing.assert_array_equal(img[0], colours[[0, 1, 2]])
    np.testing.assert_array_equal(img[1], [colours[3], [0, 0, 0], colours[1]])


def test_edges_encoding():
    edges = np.array([[True, False], [False, True]])
    img = get_task("edges").encode(edges, HAND_META)
    np.testing.assert_array_equal(img[..., 0], [[255, 0], [0, 255]])
    assert (img == img[..., :1]).all()


def test_keypoint_discs():
    task = get_task("keypoints")
    kp = np.array([[10.5, 7.49, 2], [30.0, 20.0, 1], [2.0, 3.0, 0], [40.2, 3.0, 2]])
    image, target = task.make_pair(make_sample(np.zeros((25, 45, 3), np.uint8), keypoints=kp), 0)
    assert isinstance(target, PointsTarget) and target.size == (25, 45)
    np.testing.assert_array_equal(target.points, [[10.5, 7.49], [40.2, 3.0]])  # visible only
    img = task.encode(target, HAND_META)
    ref = np.zeros((25, 45, 3), np.uint8)
    cv2.circle(ref, (11, 7), 5, (255, 0, 0), -1, cv2.LINE_8)  # 10.5 rounds half up
    cv2.circle(ref, (40, 3), 5, (255, 0, 0), -1, cv2.LINE_8)
    np.testing.assert_array_equal(img, ref)
    assert set(map(tuple, img.reshape(-1, 3).tolist())) == {(0, 0, 0), (255, 0, 0)}
    assert (img[:, :25, 0] > 0).sum() == 81  # a whole r=5 disc


def test_detection_channel_packing():
    task = get_task("detection")
    boxes = np.array([[0, 0, 10, 10], [5, 5, 15, 15], [20, 0, 30, 10]], float)
    target = BoxesTarget(boxes, np.zeros(3, np.int64), (20, 40))
    img = task.encode(target, HAND_META)
    # box 0 -> R; box 1 overlaps it -> G; box 2 is apart -> R
    assert (img[0:10, 0:10, 0] == 255).all() and (img[5:15, 5:15, 1] == 255).all()
    assert (img[0:10, 20:30, 0] == 255).all() and (img[..., 2] == 0).all()
    assert (img[10:, :, 0] == 0).all()
    # a box that merely touches one in R goes to the next channel (it would merge into one component)
    touching = BoxesTarget(np.array([[0, 0, 10, 10], [10, 0, 12, 4]], float), np.zeros(2, np.int64), (20, 40))
    assert (task.encode(touching, HAND_META)[0:4, 10:12, 1] == 255).all()
    nested = np.array([[0, 0, 10, 10], [5, 5, 15, 15], [8, 8, 12, 12], [9, 9, 11, 11]], float)
    crowded = BoxesTarget(nested, np.zeros(4, np.int64), (20, 40))
    with pytest.raises(EncodingError, match="box 3"):
        task.encode(crowded, HAND_META)
    sample = make_sample(np.zeros((20, 40, 3), np.uint8), boxes=crowded.boxes, box_classes=np.zeros(4, np.int64))
    assert "box 3" in task.check_sample(sample, HAND_META)


def test_inpainting_rectangle_from_the_query():
    task = get_task("inpainting")
    gen = np.random.default_rng(0)
    q = make_sample(gen.integers(1, 256, (30, 50, 3), dtype=np.uint8), dataset="d", sid="q1")
    c = make_sample(gen.integers(1, 256, (60, 80, 3), dtype=np.uint8), dataset="d", sid="c1")
    q_in, q_t = task.make_pair(q, 3)
    np.testing.assert_array_equal(q_t, q.image)
    hole = (q_in == 0).all(axis=2)
    ys, xs = np.nonzero(hole)
    assert hole.sum() == 15 * 25 and ys.max() - ys.min() == 14 and xs.max() - xs.min() == 24
    g = rng(3, "d", "*", "q1", "inpaint")
    assert (ys.min(), xs.min()) == (int(g.integers(0, 16)), int(g.integers(0, 26)))
    c_in, _ = task.make_pair(c, 3, query=q)
    y0, x0, rh, rw = inpaint_rect(q, 3)
    cy, cx = np.nonzero((c_in == 0).all(axis=2))
    assert (cy.min(), cx.min()) == (int(np.floor(y0 * 60 + 0.5)), int(np.floor(x0 * 80 + 0.5)))
    assert (cy.max() - cy.min() + 1, cx.max() - cx.min() + 1) == (30, 40)
    own, _ = task.make_pair(c, 3)
    assert own.shape == c_in.shape


def test_denoising_noise_is_per_sample_and_deterministic():
    task = get_task("denoising")
    img = np.full((40, 60, 3), 128, np.uint8)
    a, target = task.make_pair(make_sample(img, dataset="d", sid="a"), 0)
    np.testing.assert_array_equal(target, img)
    np.testing.assert_array_equal(a, task.make_pair(make_sample(img, dataset="d", sid="a"), 0)[0])
    b = task.make_pair(make_sample(img, dataset="d", sid="b"), 0)[0]
    assert (a != b).any()
    noise = rng(0, "d", "*", "a", "denoise").standard_normal(img.shape)
    expected = np.rint(np.clip(128 / 255 + 0.15 * noise, 0, 1) * 255).astype(np.uint8)
    np.testing.assert_array_equal(a, expected)
    assert abs((a.astype(float) - 128).std() - 0.15 * 255) < 2


def test_colorization_grey():
    gen = np.random.default_rng(1)
    img = gen.integers(0, 256, (7, 9, 3), dtype=np.uint8)
    grey, target = get_task("colorization").make_pair(make_sample(img), 0)
    np.testing.assert_array_equal(target, img)
    ref = 0.299 * img[..., 0] + 0.587 * img[..., 1] + 0.114 * img[..., 2]
    not_half = np.abs(ref - np.floor(ref) - 0.5) > 1e-6
    np.testing.assert_array_equal(grey[..., 0][not_half], np.round(ref).astype(np.uint8)[not_half])
    assert (grey == grey[..., :1]).all()
    assert to_grey(np.array([[[0, 0, 250]]], np.uint8))[0, 0, 0] == 29  # exactly 28.5: halves round up
    assert to_grey(np.array([[[5, 0, 0]]], np.uint8))[0, 0, 0] == 1  # 1.495


def test_rotation_and_flip():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    _, rot = get_task("rotation").make_pair(make_sample(img), 0)
    np.testing.assert_array_equal(rot, np.rot90(img, 1))
    assert rot.shape == (3, 2, 3) and rot[0, 0, 0] == img[0, 2, 0]  # counter-clockwise
    _, flip = get_task("flip").make_pair(make_sample(img), 0)
    np.testing.assert_array_equal(flip, img[:, ::-1])


def test_object_removal_outline():
    task = get_task("object_removal")
    img = np.full((20, 30, 3), 50, np.uint8)
    clean = np.full((20, 30, 3), 60, np.uint8)
    s = make_sample(img, paired={"rm": clean}, paired_info={"rm": {"box": [10, 5, 18, 12]}}, pair_kinds={"object_removal": "rm"})
    inp, target = task.make_pair(s, 0)
    np.testing.assert_array_equal(target, clean)
    red = (inp == [255, 0, 0]).all(axis=2)
    expected = np.zeros((20, 30), bool)
    expected[2:15, 7:21] = True
    expected[5:12, 10:18] = False
    np.testing.assert_array_equal(red, expected)
    assert (inp[~red] == 50).all()
    assert task.check_sample(s, None) is None


def test_paired_tasks_use_the_declared_kind():
    img = np.zeros((4, 6, 3), np.uint8)
    rain, thermal = np.full_like(img, 9), np.full_like(img, 200)
    kinds = {"artifact_removal": "rain", "modality_transfer": "thermal"}
    s = make_sample(img, paired={"rain": rain, "thermal": thermal}, pair_kinds=kinds)
    x, y = get_task("artifact_removal").make_pair(s, 0)
    assert (x == 9).all() and (y == 0).all()
    x, y = get_task("modality_transfer").make_pair(s, 0)
    assert (x == 0).all() and (y == 200).all()
    from icl.data.dataset import DataError

    with pytest.raises(DataError, match="object_removal"):
        get_task("object_removal").make_pair(s, 0)


def test_episode_builds_context_outputs():
    task = get_task("flip")
    gen = np.random.default_rng(2)
    q = make_sample(gen.integers(0, 256, (5, 7, 3), dtype=np.uint8), sid="q")
    ctx = [make_sample(gen.integers(0, 256, (6, 4, 3), dtype=np.uint8), sid=f"c{i}") for i in range(2)]
    ep = task.make_episode(q, ctx, 0, HAND_META)
    np.testing.assert_array_equal(ep.query_input, q.image)
    for c, out in zip(ctx, ep.context_outputs):
        np.testing.assert_array_equal(out, c.image[:, ::-1])
    assert task.target_size(ep.target) == (5, 7)
    assert get_task("keypoints").target_size(PointsTarget(np.zeros((0, 2)), (3, 8))) == (3, 8)


def test_samples_that_cannot_be_scored_are_filtered():
    img = np.zeros((3, 4, 3), np.uint8)
    seg_task, depth_task = get_task("segmentation"), get_task("depth")
    assert "no valid" in seg_task.check_sample(make_sample(img, segmentation=np.full((3, 4), 255, np.uint8)), HAND_META)
    assert seg_task.check_sample(make_sample(img, segmentation=np.zeros((3, 4), np.uint8)), HAND_META) is None
    assert "no valid" in depth_task.check_sample(make_sample(img, depth=np.full((3, 4), -1.0, np.float32)), HAND_META)
    assert depth_task.check_sample(make_sample(img, depth=np.ones((3, 4), np.float32)), HAND_META) is None


def test_semantic_tasks_match_the_context_selector():
    from icl.data.contexts import SEMANTIC_PARTS

    assert {n for n in list_tasks() if get_task(n).semantic} == set(SEMANTIC_PARTS)
    assert all(SEMANTIC_PARTS[n] in get_task(n).parts for n in SEMANTIC_PARTS)
