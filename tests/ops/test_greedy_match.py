import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils

from icl.ops import greedy_match, greedy_match_counts
from icl.ops._dispatch import backend_status
from tests.tolerances import ATOL

BACKENDS = ["reference", "cpu"]
THRESHOLDS = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]


def _iou(a, b):
    # The module's rule in plain Python floats (IEEE double, same operations and order).
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = iw * ih if iw > 0 and ih > 0 else 0.0
    union = ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])) - inter
    return inter / union if union > 0 else 0.0


def _brute_matrix(iou, t):
    """Greedy at one threshold, written independently: sort the qualifying pairs, walk them."""
    n, m = len(iou), len(iou[0]) if len(iou) else 0
    pairs = sorted((-iou[p][g], p, g) for p in range(n) for g in range(m) if iou[p][g] >= t)
    used_p, used_g, out = set(), set(), []
    for neg, p, g in pairs:
        if p not in used_p and g not in used_g:
            used_p.add(p)
            used_g.add(g)
            out.append((p, g, -neg))
    return out


def _brute_counts(preds, gts, thresholds):
    iou = [[_iou(p, g) for g in gts] for p in preds]
    tp, sums = [], []
    for t in thresholds:
        pairs = _brute_matrix(iou, t)
        tp.append(len(pairs))
        sums.append(sum(v for _, _, v in pairs))
    best = [max((iou[p][g] for p in range(len(preds))), default=0.0) for g in range(len(gts))]
    return tp, sums, best


def _random_cases(rng, count, max_boxes, grid):
    cases = []
    for _ in range(count):
        n, m = rng.integers(0, max_boxes + 1, size=2)
        mk = lambda k: np.sort(rng.integers(0, grid, size=(k, 2, 2)), axis=1).transpose(0, 2, 1).reshape(k, 4)[:, [0, 2, 1, 3]]
        p, g = mk(n).astype(np.float64), mk(m).astype(np.float64)
        cases.append((p, g))
    return cases


def _ragged(cases):
    p_off = np.cumsum([0] + [len(p) for p, _ in cases])
    g_off = np.cumsum([0] + [len(g) for _, g in cases])
    pred = np.concatenate([p for p, _ in cases]).reshape(-1, 4)
    gt = np.concatenate([g for _, g in cases]).reshape(-1, 4)
    return pred, p_off, gt, g_off


def test_hand_tie_goes_to_lower_gt_then_lower_pred(backend):
    # pred0 ties between gt0 and gt1: lower gt wins, so pred1 (which only overlaps gt0) is left.
    iou = np.array([[0.6, 0.6], [0.6, 0.0]])
    p, g, v = greedy_match(iou, 0.5, backend=backend)
    assert p.tolist() == [0] and g.tolist() == [0] and v.tolist() == [0.6]
    # pred ties for one gt: the lower pred wins.
    p, g, _ = greedy_match(np.array([[0.7], [0.7]]), 0.5, backend=backend)
    assert p.tolist() == [0] and g.tolist() == [0]


def test_hand_selection_order_and_threshold(backend):
    iou = torch.tensor([[0.9, 0.8, 0.0], [0.85, 0.3, 0.55], [0.0, 0.0, 0.4]], dtype=torch.float32)
    p, g, v = greedy_match(iou, 0.5, backend=backend)
    assert isinstance(p, torch.Tensor) and p.dtype == torch.int64 and v.dtype == torch.float32
    assert p.tolist() == [0, 1] and g.tolist() == [0, 2]
    # at 0.3, (2, 2) finds gt 2 taken and (1, 1) finds pred 1 taken: nothing more.
    p, g, _ = greedy_match(iou, 0.3, backend=backend)
    assert p.tolist() == [0, 1] and g.tolist() == [0, 2]
    p, g, _ = greedy_match(iou, 0.0, backend=backend)  # every pair qualifies, zero-IoU pairs too
    assert p.tolist() == [0, 1, 2] and g.tolist() == [0, 2, 1]


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (4, 0), (1, 1)])
def test_empty_and_single(backend, shape):
    iou = np.full(shape, 0.75)
    p, g, v = greedy_match(iou, 0.5, backend=backend)
    k = min(shape)
    assert p.dtype == np.int64 and len(p) == len(g) == len(v) == k


def test_greedy_match_equals_brute_force_on_random_ties(backend):
    rng = np.random.default_rng(7)
    for p, g in _random_cases(rng, 600, 6, 8):
        iou = [[_iou(a, b) for b in g] for a in p]
        t = float(rng.choice(THRESHOLDS + [0.0, 0.3]))
        pi, gi, v = greedy_match(np.array(iou, dtype=np.float64).reshape(len(p), len(g)), t, backend=backend)
        assert list(zip(pi.tolist(), gi.tolist(), v.tolist())) == _brute_matrix(iou, t)


def test_counts_equal_brute_force_on_thousands_of_cases(backend):
    rng = np.random.default_rng(11)
    # small integer grids make exact IoU ties common; varying sizes cover empty samples.
    cases = _random_cases(rng, 2500, 5, 7) + _random_cases(rng, 500, 9, 40)
    tp, tp_sum, best = greedy_match_counts(*_ragged(cases), THRESHOLDS, backend=backend)
    assert tp.shape == (3000, 10) and tp.dtype == np.int64 and best.dtype == np.float64
    g0 = 0
    n_ties = 0
    for s, (p, g) in enumerate(cases):
        btp, bsum, bbest = _brute_counts(p.tolist(), g.tolist(), THRESHOLDS)
        assert tp[s].tolist() == btp, s
        assert tp_sum[s].tolist() == bsum, s  # same values added in the same order: exact
        assert best[g0:g0 + len(g)].tolist() == bbest, s
        g0 += len(g)
        vals = [_iou(a, b) for a in p.tolist() for b in g.tolist()]
        n_ties += len(vals) - len(set(vals))
    assert n_ties > 1000  # the cases really exercise the tie rule


def test_best_iou_matches_pycocotools(backend):
    rng = np.random.default_rng(3)
    cases = _random_cases(rng, 200, 6, 50)
    pred, p_off, gt, g_off = _ragged(cases)
    _, _, best = greedy_match_counts(pred, p_off, gt, g_off, [0.5], backend=backend)
    g0 = 0
    for p, g in cases:
        if len(g) and len(p):
            xywh = lambda b: np.c_[b[:, :2], b[:, 2:] - b[:, :2]]
            ious = np.asarray(mask_utils.iou(xywh(p).tolist(), xywh(g).tolist(), [0] * len(g)))
            np.testing.assert_allclose(best[g0:g0 + len(g)], ious.reshape(len(p), len(g)).max(axis=0),
                                       atol=ATOL[torch.float64])
        elif len(g):
            assert (best[g0:g0 + len(g)] == 0).all()
        g0 += len(g)


def test_backends_agree_on_a_large_batch():
    for name in BACKENDS:
        ok, why = backend_status(name)
        if not ok:
            pytest.skip(why)
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(400):
        n, m = rng.integers(0, 31, size=2)
        xy = rng.uniform(0, 300, size=(n + m, 2))
        wh = rng.uniform(1, 120, size=(n + m, 2))
        b = np.c_[xy, xy + wh]
        cases.append((b[:n], b[n:]))
    args = _ragged(cases)
    ref = greedy_match_counts(*args, THRESHOLDS, backend="reference")
    cpu = greedy_match_counts(*args, THRESHOLDS, backend="cpu")
    np.testing.assert_array_equal(ref[0], cpu[0])
    np.testing.assert_allclose(ref[1], cpu[1], atol=ATOL[torch.float64])
    np.testing.assert_array_equal(ref[2], cpu[2])


def test_torch_in_torch_out_and_integer_boxes(backend):
    pred = torch.tensor([[0, 0, 10, 10], [0, 0, 5, 10]], dtype=torch.int32)
    gt = torch.tensor([[0, 0, 10, 10]], dtype=torch.int32)
    tp, tp_sum, best = greedy_match_counts(pred, torch.tensor([0, 2]), gt, torch.tensor([0, 1]),
                                           torch.tensor([0.5, 1.0]), backend=backend)
    assert isinstance(tp, torch.Tensor) and tp.tolist() == [[1, 1]]
    assert tp_sum.tolist() == [[1.0, 1.0]] and best.tolist() == [1.0]


def test_boxes_outside_image_and_degenerate(backend):
    # Negative and huge coordinates are taken as they are; zero-area boxes have IoU 0.
    pred = np.array([[-20.0, -20.0, 10.0, 10.0], [5.0, 5.0, 5.0, 9.0]])
    gt = np.array([[-20.0, -20.0, 10.0, 10.0], [5.0, 5.0, 5.0, 9.0]])
    tp, tp_sum, best = greedy_match_counts(pred, [0, 2], gt, np.array([0, 2]), [0.5], backend=backend)
    assert tp.tolist() == [[1]] and best.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(pred=np.zeros((2, 3))), "pred_boxes: expected shape"),
    (dict(pred=np.array([[0, 0, 1, np.nan]])), "pred_boxes: contains NaN"),
    (dict(gt=np.array([[5.0, 0, 1, 1]])), "gt_boxes: box 0"),
    (dict(p_off=np.array([0, 2])), "pred_offsets: expected non-decreasing"),
    (dict(p_off=np.array([1, 1])), "pred_offsets"),
    (dict(g_off=np.array([0, 0, 1])), "same length"),
    (dict(thr=[0.5, 1.5]), r"thresholds\[1\]"),
    (dict(thr=[]), "at least one"),
    (dict(thr=np.zeros((2, 2))), "thresholds: expected shape"),
])
def test_counts_validation(kwargs, match):
    args = dict(pred=np.array([[0.0, 0, 1, 1]]), p_off=np.array([0, 1]), gt=np.array([[0.0, 0, 1, 1]]),
                g_off=np.array([0, 1]), thr=[0.5])
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        greedy_match_counts(args["pred"], args["p_off"], args["gt"], args["g_off"], args["thr"])


def test_match_validation():
    with pytest.raises(ValueError, match=r"iou: expected values in \[0, 1\]"):
        greedy_match(np.array([[1.5]]))
    with pytest.raises(ValueError, match="iou: expected shape"):
        greedy_match(np.zeros(3))
    with pytest.raises(TypeError, match="iou: expected a float dtype"):
        greedy_match(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="threshold"):
        greedy_match(np.zeros((2, 2)), threshold=float("nan"))
    with pytest.raises(TypeError, match="threshold"):
        greedy_match(np.zeros((2, 2)), threshold="0.5")


def test_importing_the_op_module_does_not_shadow_the_function():
    import importlib

    importlib.import_module("icl.ops.greedy_match")
    import icl.ops

    assert callable(icl.ops.greedy_match) and icl.ops.greedy_match.__name__ == "greedy_match"
    from icl.ops import greedy_match as fn
    from icl.ops.greedy_match import pairwise_iou

    assert fn is greedy_match and callable(pairwise_iou)


def test_cpu_parallel_path_equals_serial_chunks():
    # >= 2**18 pairs in one call takes the OpenMP path; chunks of 16 samples stay serial (and the
    # serial path is checked against brute force above).
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    rng = np.random.default_rng(9)
    cases = []
    for _ in range(320):
        n, m = rng.integers(30, 50, size=2)
        xy = rng.integers(0, 200, size=(n + m, 2))
        b = np.c_[xy, xy + rng.integers(1, 60, size=(n + m, 2))].astype(np.float64)
        cases.append((b[:n], b[n:]))
    whole = greedy_match_counts(*_ragged(cases), THRESHOLDS, backend="cpu")
    parts = [greedy_match_counts(*_ragged(cases[i:i + 16]), THRESHOLDS, backend="cpu") for i in range(0, 320, 16)]
    for j in range(3):
        np.testing.assert_array_equal(whole[j], np.concatenate([p[j] for p in parts]))
