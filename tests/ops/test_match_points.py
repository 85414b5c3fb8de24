import numpy as np
import pytest
import torch

from icl.ops import match_points
from icl.ops._dispatch import backend_status

def brute_force(pred, gt, radius):
    """Enumerate every pair, sort by (squared distance, pred, gt), take greedily."""
    pairs = []
    for i, (px, py) in enumerate(pred.tolist()):
        for j, (gx, gy) in enumerate(gt.tolist()):
            dx, dy = px - gx, py - gy
            d2 = dx * dx + dy * dy
            if d2 <= radius * radius:
                pairs.append((d2, i, j))
    pairs.sort()
    used_p, used_g, out = set(), set(), []
    for _, i, j in pairs:
        if i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            out.append((i, j))
    return out


def check(pred, gt, radius, backend):
    p, g = match_points(pred, gt, radius, backend=backend)
    assert p.dtype == np.int64 and g.dtype == np.int64
    assert list(zip(p.tolist(), g.tolist())) == brute_force(pred, gt, radius)


def test_integer_ties_equal_brute_force(backend):
    rng = np.random.default_rng(0)
    for _ in range(1500):
        n, m = rng.integers(0, 9, 2)
        pred = rng.integers(0, 7, (n, 2)).astype(np.float64)
        gt = rng.integers(0, 7, (m, 2)).astype(np.float64)
        check(pred, gt, float(rng.choice([0, 1, 1.5, 2, np.sqrt(5), 3, 10])), backend)


def test_float_points_equal_brute_force(backend):
    rng = np.random.default_rng(1)
    for _ in range(500):
        n, m = rng.integers(0, 12, 2)
        check(rng.uniform(-5, 5, (n, 2)), rng.uniform(-5, 5, (m, 2)), float(rng.uniform(0, 4)), backend)


def test_large_case(backend):
    rng = np.random.default_rng(2)
    pred = rng.integers(0, 300, (257, 2)).astype(np.float32)
    gt = rng.integers(0, 300, (311, 2)).astype(np.float32)
    check(pred, gt, 10, backend)


def test_radius_boundary_and_order(backend):
    pred = np.array([[0.0, 0], [10, 0], [20, 0]])
    gt = np.array([[3.0, 4], [10, 1], [30, 0.0]])
    p, g = match_points(pred, gt, 5, backend=backend)
    # (1, 1) at distance 1 first, then (0, 0) at exactly the radius; (2, 2) is 10 away
    assert p.tolist() == [1, 0] and g.tolist() == [1, 0]
    p, _ = match_points(pred, gt, np.float32(4.999), backend=backend)
    assert p.tolist() == [1]


def test_empty_and_containers(backend):
    p, g = match_points(torch.zeros(0, 2), torch.ones(3, 2), 1.0, backend=backend)
    assert isinstance(p, torch.Tensor) and p.dtype == torch.int64 and p.numel() == 0 and g.numel() == 0
    p, g = match_points(np.zeros((2, 2), np.int32), np.zeros((0, 2)), 1, backend=backend)
    assert isinstance(p, np.ndarray) and p.shape == (0,) and g.shape == (0,)
    p, g = match_points(np.zeros((2, 2), np.int32), np.zeros((2, 2), np.uint8), 0, backend=backend)
    assert p.tolist() == [0, 1] and g.tolist() == [0, 1]


def test_backends_agree_many_points():
    if not backend_status("cpu")[0]:
        pytest.skip(backend_status("cpu")[1])
    rng = np.random.default_rng(3)
    pred, gt = rng.integers(0, 200, (1500, 2)), rng.integers(0, 200, (1700, 2))
    a = match_points(pred, gt, 6, backend="cpu")
    b = match_points(pred, gt, 6, backend="reference")
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize(
    "pred,gt,radius,error,match",
    [
        (np.zeros((3, 3)), np.zeros((1, 2)), 1, ValueError, "pred"),
        (np.zeros((1, 2)), np.zeros(2), 1, ValueError, "gt"),
        (np.array([[0, np.nan]]), np.zeros((1, 2)), 1, ValueError, "NaN"),
        (np.zeros((1, 2)), np.array([[np.inf, 0]]), 1, ValueError, "gt"),
        (np.zeros((1, 2)), np.zeros((1, 2)), -1, ValueError, "radius"),
        (np.zeros((1, 2)), np.zeros((1, 2)), float("nan"), ValueError, "radius"),
        (np.zeros((1, 2)), np.zeros((1, 2)), float("inf"), ValueError, "radius"),
        (np.zeros((1, 2)), np.zeros((1, 2)), "1", TypeError, "radius"),
        (np.zeros((1, 2), bool), np.zeros((1, 2)), 1, TypeError, "pred"),
        ([[0, 0]], np.zeros((1, 2)), 1, TypeError, "pred"),
    ],
)
def test_invalid_arguments(pred, gt, radius, error, match):
    with pytest.raises(error, match=match):
        match_points(pred, gt, radius)
