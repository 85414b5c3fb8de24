"""Pairwise IoU: icl.ops.box_iou vs a vectorised numpy formula (float32) and pycocotools (float64)."""

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from bench._peer import compare
from icl.ops import box_iou
from icl.ops._dispatch import backend_status

N, M = 2000, 1500

pytestmark = pytest.mark.skipif(not backend_status("cpu")[0], reason=backend_status("cpu")[1])


def boxes(rng, n, dtype):
    xy = rng.uniform(0, 1000, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(1, 200, (n, 2))], axis=1).astype(dtype)


def numpy_iou(a, b):
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def test_box_iou_float32_vs_numpy(benchmark):
    rng = np.random.default_rng(0)
    a, b = boxes(rng, N, np.float32), boxes(rng, M, np.float32)
    np.testing.assert_allclose(box_iou(a, b, backend="cpu"), numpy_iou(a, b), atol=1e-5)
    compare(benchmark, lambda: box_iou(a, b, backend="cpu"), lambda: numpy_iou(a, b),
            peer_name="numpy vectorised (float32)", items=N * M)


def test_box_iou_float64_vs_pycocotools(benchmark):
    rng = np.random.default_rng(1)
    a, b = boxes(rng, N, np.float64), boxes(rng, M, np.float64)
    a_xywh = np.concatenate([a[:, :2], a[:, 2:] - a[:, :2]], axis=1)
    b_xywh = np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1)
    crowd = [0] * M
    np.testing.assert_allclose(box_iou(a, b, backend="cpu"), mask_utils.iou(a_xywh, b_xywh, crowd), atol=1e-12)
    compare(benchmark, lambda: box_iou(a, b, backend="cpu"), lambda: mask_utils.iou(a_xywh, b_xywh, crowd),
            peer_name="pycocotools maskUtils.iou (float64)", items=N * M)
