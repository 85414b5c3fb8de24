"""Hand-built predictions with known scores, for every decoder and metric."""

import math

import cv2
import numpy as np
import pytest
from matplotlib import colormaps

from icl.benchmarks.vibe.tasks import get_task
from icl.benchmarks.vibe.tasks.base import BoxesTarget, PointsTarget
from icl.benchmarks.vibe.tasks.palette import class_colours
from icl.benchmarks.vibe.tasks.segmentation import miou
from tests.benchmarks.vibe.tasks.helpers import HAND_META, make_sample, require_ops


def _psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0**2 / mse)


def test_miou_by_hand():
    gt = np.array([[1, 1, 2, 2], [1, 1, 2, 255]])
    pred = np.array([[1, 1, 1, 1], [1, 1, 1, 3]])
    # class 1: inter 4, union 7; class 2: inter 0, union 3; class 3 only on a void pixel: ignored
    assert miou(pred, gt, 4) == pytest.approx((4 / 7 + 0) / 2)
    assert math.isnan(miou(pred, np.full((2, 4), 255), 4))


def test_edges_by_hand():
    gt = np.zeros((4, 6), bool)
    gt[1, :] = True  # 6 edge pixels
    pred = np.zeros((4, 6, 3), np.uint8)
    pred[1, :3] = 128  # mean 128 -> edge
    pred[2, :2] = (127, 128, 128)  # mean 127.67 -> not an edge
    pred[3, 0] = (255, 255, 0)  # mean 170 -> a false edge
    s = get_task("edges").evaluate([pred], [gt], [[]], HAND_META)[0]
    assert (s["precision"], s["recall"]) == (3 / 4, 3 / 6)
    assert s["f1"] == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    empty = get_task("edges").evaluate([np.zeros((4, 6, 3), np.uint8)], [np.zeros((4, 6), bool)], [[]], HAND_META)[0]
    assert empty == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


@require_ops("psnr", "ssim", "lpips")
def test_flip_identity_scores_psnr_of_query_and_its_flip():
    gen = np.random.default_rng(5)
    img = cv2.GaussianBlur(gen.integers(0, 256, (33, 47, 3), dtype=np.uint8), (5, 5), 2)
    task = get_task("flip")
    query, target = task.make_pair(make_sample(img), 0)
    s = task.evaluate([query], [target], [[]], HAND_META)[0]
    assert s["psnr"] == pytest.approx(_psnr(img, img[:, ::-1]), rel=1e-5)
    from skimage.metrics import structural_similarity

    ref = structural_similarity(
        img, img[:, ::-1], gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255, channel_axis=-1
    )
    assert s["ssim"] == pytest.approx(ref, abs=1e-4)
    assert math.isnan(s["lpips"]) or s["lpips"] > 0.01  # computed (NaN only without weights)


@require_ops("psnr", "ssim", "lpips")
def test_image_prediction_is_resized_bilinear():
    gen = np.random.default_rng(6)
    target = gen.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    small = gen.integers(0, 256, (20, 25, 3), dtype=np.uint8)
    s = get_task("denoising").evaluate([small, target], [target, target], [[], []], HAND_META)
    up = cv2.resize(small, (50, 40), interpolation=cv2.INTER_LINEAR)
    assert s[0]["psnr"] == pytest.approx(_psnr(up, target), rel=1e-5)
    assert s[1]["psnr"] == math.inf


@require_ops("psnr", "ssim", "lpips")
def test_missing_lpips_weights_give_nan_and_one_warning_a_run(monkeypatch):
    import importlib

    from icl.benchmarks.vibe.tasks import image as image_tasks
    from icl.ops import _lpips_weights as lw

    lp = importlib.import_module("icl.ops.lpips")  # the module: icl.ops.lpips as an attribute is the function

    def missing(*args, **kwargs):
        raise lp.LPIPSWeightsNotFound("looked in: nowhere (test)")

    monkeypatch.setenv("ICL_HELPERS", "0")  # the patched function runs here, not in the LPIPS helper process
    monkeypatch.setattr(lp, "lpips_each", missing)
    monkeypatch.setattr(lw, "_missing_said", set())
    monkeypatch.setattr(image_tasks, "_said", set())
    img = np.zeros((32, 40, 3), np.uint8)
    with pytest.warns(RuntimeWarning, match="LPIPS alex is unavailable, its scores are reported as missing") as record:
        for _ in range(5):  # one message however many batches are scored (46 in a --fast run before)
            s = get_task("colorization").evaluate([img + 1, img], [img, img], [[], []], HAND_META)
    assert len([w for w in record if "LPIPS" in str(w.message)]) == 1
    assert math.isnan(s[0]["lpips"]) and s[0]["psnr"] == pytest.approx(20 * np.log10(255))
    assert s[1]["lpips"] == 0.0 and s[1]["psnr"] == math.inf  # identical images: LPIPS is 0 by definition


@require_ops("psnr", "ssim", "lpips")
def test_images_too_small_for_lpips_give_nan_and_a_warning(monkeypatch):
    from icl.benchmarks.vibe.tasks import image as image_tasks

    monkeypatch.setattr(image_tasks, "_said", set())
    img = np.zeros((16, 40, 3), np.uint8)
    with pytest.warns(RuntimeWarning, match="smaller than LPIPS") as record:
        for _ in range(3):
            s = get_task("flip").evaluate([img + 9], [img], [[]], HAND_META)[0]
    assert len(record) == 1
    assert math.isnan(s["lpips"]) and s["psnr"] == pytest.approx(20 * np.log10(255 / 9))


@require_ops("palette")
def test_segmentation_decodes_among_context_classes_only():
    colours = class_colours(4).astype(np.int64)
    gt = np.array([[1, 1, 2, 2]], np.uint8)
    pred = np.zeros((1, 4, 3), np.uint8)
    pred[0, :2] = colours[1]
    pred[0, 2:] = colours[3]  # class 3 is not in the contexts: it decodes to the nearest of {1, 2}
    d1 = ((colours[3] - colours[1]) ** 2).sum()
    d2 = ((colours[3] - colours[2]) ** 2).sum()
    nearest = 1 if d1 <= d2 else 2
    task = get_task("segmentation")
    s = task.evaluate([pred], [gt], [[np.array([[1, 2]], np.uint8)]], HAND_META)[0]
    assert s["miou"] == pytest.approx(1.0 if nearest == 2 else (2 / 4 + 0) / 2)
    s_all = task.evaluate([pred], [gt], [[np.array([[1, 2, 3]], np.uint8)]], HAND_META)[0]
    assert s_all["miou"] == pytest.approx((1.0 + 0.0 + 0.0) / 3)  # class 3 predicted, absent from GT


@require_ops("turbo")
def test_depth_constant_prediction():
    turbo = np.rint(255 * colormaps["turbo"](np.arange(256) / 255)[:, :3]).astype(np.uint8)
    gt = np.array([[1.0, 2.0, -1.0], [4.0, 8.0, 9.5]], np.float32)
    pred = np.broadcast_to(turbo[100], (4, 6, 3)).copy()  # decodes to bin 100 everywhere
    value = (100 + 0.5) / 256 * 10.0
    s = get_task("depth").evaluate([pred], [gt], [[]], HAND_META)[0]
    valid = gt[gt > 0]
    assert s["rmse"] == pytest.approx(np.sqrt(np.mean((valid - value) ** 2)), rel=1e-5)
    assert s["abs_rel"] == pytest.approx(np.mean(np.abs(valid - value) / valid), rel=1e-5)


@require_ops("components", "match_points")
def test_keypoints_by_hand():
    task = get_task("keypoints")
    target = PointsTarget(np.array([[10.0, 10.0], [40.0, 10.0], [25.0, 30.0]]), (40, 60))
    pred = np.zeros((40, 60, 3), np.uint8)
    cv2.circle(pred, (18, 10), 3, (255, 0, 0), -1)  # top pixel 8.5 px from GT 0: matched (tau = 10)
    cv2.circle(pred, (40, 25), 3, (255, 0, 0), -1)  # top pixel (first max) 12 px from GT 1: not matched
    cv2.circle(pred, (25, 30), 3, (255, 100, 100), -1)  # S = 155/255 > 0.5: detected, matched
    cv2.circle(pred, (50, 35), 3, (255, 140, 140), -1)  # S = 115/255 < 0.5: not detected
    s = task.evaluate([pred], [target], [[]], HAND_META)[0]
    assert (s["precision"], s["recall"]) == (2 / 3, 2 / 3)
    # at half resolution, coordinates are scaled back to the target
    half = cv2.resize(task.encode(target, HAND_META), (30, 20), interpolation=cv2.INTER_NEAREST)
    assert task.evaluate([half], [target], [[]], HAND_META)[0]["f1"] == 1.0
    none = task.evaluate([np.zeros((40, 60, 3), np.uint8)], [PointsTarget(np.zeros((0, 2)), (40, 60))], [[]], HAND_META)[0]
    assert none["f1"] == 1.0


@require_ops("components", "average_precision")
def test_detection_by_hand():
    task = get_task("detection")
    target = BoxesTarget(np.array([[2, 2, 12, 12], [30, 5, 50, 25]], float), np.array([1, 2]), (40, 60))
    pred = np.zeros((40, 60, 3), np.uint8)
    pred[2:12, 2:12, 0] = 255  # exact match, confidence 1
    pred[30:38, 40:58, 1] = 200  # false positive, confidence 200/255
    s = task.evaluate([pred], [target], [[]], HAND_META)[0]
    assert s["ap50"] == pytest.approx(0.5)  # recall 0.5 reached at precision 1
    pred2 = pred.copy()
    pred2[30:38, 40:58, 1] = 255  # the false positive now ties the true one in confidence
    pred2[2:12, 2:12, 0] = 180
    s2 = task.evaluate([pred2], [target], [[]], HAND_META)[0]
    assert s2["ap50"] == pytest.approx(0.25)  # FP first: precision 1/2 at recall 1/2
    empty_gt = BoxesTarget(np.zeros((0, 4)), np.zeros(0, np.int64), (40, 60))
    assert task.evaluate([np.zeros((40, 60, 3), np.uint8)], [empty_gt], [[]], HAND_META)[0]["ap50"] == 1.0
    assert task.evaluate([pred], [empty_gt], [[]], HAND_META)[0]["ap50"] == 0.0
    assert task.evaluate([np.zeros((40, 60, 3), np.uint8)], [target], [[]], HAND_META)[0]["ap50"] == 0.0


@require_ops("redness", "components")
def test_keypoint_mask_agrees_with_the_redness_op():
    from icl.ops.redness import redness
    from icl.benchmarks.vibe.tasks.keypoints import decode_points

    gen = np.random.default_rng(9)
    img = gen.integers(0, 256, (23, 31, 3), dtype=np.uint8)
    img[..., 0] = np.maximum(img[..., 0], gen.integers(120, 256, (23, 31)).astype(np.uint8))
    s, mask = redness(img)
    rgb = img.astype(np.int16)
    ours = np.clip(rgb[..., 0] - np.maximum(rgb[..., 1], rgb[..., 2]), 0, 255)
    np.testing.assert_array_equal(ours >= 128, mask)
    np.testing.assert_allclose(ours / 255.0, s, atol=1e-6)
    assert len(decode_points(img)) >= 1
