import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils

from icl.ops import box_iou
from icl.ops._dispatch import backend_status
from tests.tolerances import ATOL

def random_boxes(rng, n, scale=100.0, step=None):
    """xyxy boxes; with ``step`` the coordinates are multiples of it (exact in binary)."""
    xy = rng.uniform(0, scale, (n, 2))
    wh = rng.uniform(0, scale / 3, (n, 2))
    wh[rng.random(n) < 0.1] = 0  # some zero-area boxes
    boxes = np.concatenate([xy, xy + wh], axis=1)
    if step is not None:
        boxes = np.round(boxes / step) * step
    return boxes


def numpy_iou(a, b):
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(inter > 0, inter / union, 0.0)


def xywh(b):
    return np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1)


@pytest.mark.parametrize("n,m", [(1, 1), (1, 7), (5, 1), (13, 29), (64, 3)])
def test_equals_pycocotools_exactly(backend, rng, n, m):
    a = random_boxes(rng, n, step=0.125)
    b = random_boxes(rng, m, step=0.125)
    ours = box_iou(a, b, backend=backend)
    coco = mask_utils.iou(xywh(a), xywh(b), [0] * m)
    assert ours.dtype == np.float64 and ours.shape == (n, m)
    np.testing.assert_array_equal(ours, np.asarray(coco).reshape(n, m))


def test_integer_grid_ties_equal_pycocotools(backend, rng):
    a = rng.integers(0, 12, (40, 4)).astype(np.float64)
    a[:, 2:] = a[:, :2] + rng.integers(0, 5, (40, 2))
    ours = box_iou(a, a, backend=backend)
    np.testing.assert_array_equal(ours, mask_utils.iou(xywh(a), xywh(a), [0] * 40))


def test_float32_matches_numpy_formula(backend, rng):
    a = random_boxes(rng, 301).astype(np.float32)
    b = random_boxes(rng, 517).astype(np.float32)
    ours = box_iou(a, b, backend=backend)
    assert ours.dtype == np.float32 and ours.shape == (301, 517)
    ref = numpy_iou(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=ATOL[torch.float32])
    np.testing.assert_array_equal(ours == 0, ref == 0)


def test_zero_area_boxes_give_zero(backend):
    a = np.array([[1.0, 1, 1, 5], [2, 2, 6, 2], [3, 3, 3, 3], [0, 0, 4, 4]])
    iou = box_iou(a, a, backend=backend)
    np.testing.assert_array_equal(iou[:3], 0)
    np.testing.assert_array_equal(iou[:, :3], 0)
    assert iou[3, 3] == 1.0


def test_dtypes_and_containers(backend):
    a = torch.tensor([[0, 0, 2, 2], [1, 1, 3, 3]])
    b = torch.tensor([[0.0, 0, 2, 2]], dtype=torch.float64)
    out = box_iou(a, a, backend=backend)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert box_iou(a, b, backend=backend).dtype == torch.float64
    assert box_iou(a.half(), a.half(), backend=backend).dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), [[1, 1 / 7], [1 / 7, 1]], rtol=1e-6)
    assert isinstance(box_iou(a.numpy(), a.numpy(), backend=backend), np.ndarray)


@pytest.mark.parametrize("n,m", [(0, 3), (4, 0), (0, 0)])
def test_empty(backend, n, m):
    out = box_iou(np.zeros((n, 4), np.float32), np.zeros((m, 4), np.float32), backend=backend)
    assert out.shape == (n, m) and out.dtype == np.float32


def test_backends_agree_float64(rng):
    if not backend_status("cpu")[0]:
        pytest.skip(backend_status("cpu")[1])
    a, b = random_boxes(rng, 97), random_boxes(rng, 41)
    np.testing.assert_array_equal(box_iou(a, b, backend="cpu"), box_iou(a, b, backend="reference"))


@pytest.mark.parametrize(
    "a,match",
    [
        (np.zeros((3, 3)), r"\[N, 4\]"),
        (np.zeros(4), r"\[N, 4\]"),
        (np.array([[0, 0, np.nan, 1.0]]), "NaN"),
        (np.array([[0, 0, np.inf, 1.0]]), "infinite"),
        (np.array([[2.0, 0, 1, 1]]), "inverted"),
        (np.array([[0.0, 2, 1, 1]]), "inverted"),
    ],
)
def test_invalid_boxes_raise(backend, a, match):
    with pytest.raises(ValueError, match=match):
        box_iou(a, np.zeros((1, 4)), backend=backend)
    with pytest.raises(ValueError, match="b: "):
        box_iou(np.zeros((1, 4)), a, backend=backend)


def test_wrong_types_raise():
    with pytest.raises(TypeError, match="a: "):
        box_iou(np.zeros((1, 4), bool), np.zeros((1, 4)))
    with pytest.raises(TypeError, match="b: "):
        box_iou(np.zeros((1, 4)), [[0, 0, 1, 1]])


def test_submodule_import_does_not_shadow_function():
    # box_iou.py defines box_iou: importing the submodule first must leave the function bound.
    code = (
        "import icl.ops.box_iou, icl.ops.match_points, icl.ops.average_precision\n"
        "from icl.ops import box_iou, match_points, average_precision\n"
        "assert all(callable(f) for f in (box_iou, match_points, average_precision))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
