"""Prediction validation (PredictionError) and the resizing helpers of PROTOCOL §1.3."""

import numpy as np
import pytest
import torch

from icl.benchmarks.vibe.tasks import PredictionError, get_task
from icl.benchmarks.vibe.tasks.base import (
    precision_recall_f1,
    resize_nearest,
    scale_boxes,
    scale_points,
    validate_prediction,
)
from tests.benchmarks.vibe.tasks.helpers import HAND_META


@pytest.mark.parametrize(
    "pred, message",
    [
        (np.zeros((4, 5), np.uint8), "shape"),
        (np.zeros((4, 5, 4), np.uint8), "shape"),
        (np.zeros((1, 4, 5, 3), np.uint8), "shape"),
        (np.zeros((0, 5, 3), np.uint8), "empty"),
        (np.zeros((4, 5, 3), np.int64), "dtype"),
        (np.zeros((4, 5, 3), bool), "dtype"),
        (np.full((4, 5, 3), np.nan, np.float32), "NaN"),
        (np.full((4, 5, 3), np.inf, np.float32), "NaN"),
        ([[[0, 0, 0]]], "numpy"),
    ],
)
def test_invalid_predictions_raise(pred, message):
    with pytest.raises(PredictionError, match=message) as err:
        validate_prediction(7, pred)
    assert err.value.index == 7 and "prediction 7" in str(err.value)
    assert isinstance(err.value, ValueError)


def test_evaluate_names_the_bad_index():
    task = get_task("edges")
    good = np.zeros((4, 5, 3), np.uint8)
    targets = [np.zeros((4, 5), bool)] * 3
    with pytest.raises(PredictionError) as err:
        task.evaluate([good, good, np.full((4, 5, 3), np.nan, np.float32)], targets, [[], [], []], HAND_META)
    assert err.value.index == 2
    with pytest.raises(ValueError, match="equal lengths"):
        task.evaluate([good], targets, [[]], HAND_META)


def test_float_predictions_are_clipped_and_rounded_in_float64():
    # PROTOCOL §1.3: out-of-range values are clipped, not rejected
    x = np.linspace(-0.5, 1.5, 4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)
    out = validate_prediction(0, x)
    assert out.dtype == np.uint8 and out.min() == 0 and out.max() == 255
    np.testing.assert_array_equal(out, np.rint(np.clip(x.astype(np.float64), 0, 1) * 255).astype(np.uint8))
    # a float32 value whose float32 product rounds across the half: float64 decides
    v = np.float32(0.5 / 255 + 1e-9)
    assert np.float64(v) * 255 > 0.5
    assert validate_prediction(0, np.full((1, 1, 3), v))[0, 0, 0] == 1
    np.testing.assert_array_equal(validate_prediction(0, torch.from_numpy(x)), out)
    np.testing.assert_array_equal(validate_prediction(0, torch.full((2, 2, 3), -3.0)), np.zeros((2, 2, 3), np.uint8))
    np.testing.assert_array_equal(validate_prediction(0, torch.from_numpy(x)), out)
    np.testing.assert_array_equal(validate_prediction(0, torch.from_numpy(x).to(torch.bfloat16)).shape, (4, 5, 3))
    u8 = np.arange(60, dtype=np.uint8).reshape(4, 5, 3)
    assert validate_prediction(0, u8) is u8


def test_resize_nearest_centres():
    labels = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(resize_nearest(labels, (4, 6)), np.repeat(np.repeat(labels, 2, 0), 2, 1))
    np.testing.assert_array_equal(resize_nearest(np.repeat(np.repeat(labels, 2, 0), 2, 1), (2, 3)), labels)
    big = np.arange(35).reshape(5, 7)
    assert resize_nearest(big, (5, 7)) is big
    np.testing.assert_array_equal(resize_nearest(big, (1, 1)), [[big[2, 3]]])


def test_scaling_of_points_and_boxes():
    np.testing.assert_allclose(scale_points(np.array([[0.0, 0.0], [1.0, 3.0]]), (4, 2), (8, 4)), [[0.5, 0.5], [2.5, 6.5]])
    np.testing.assert_allclose(scale_boxes(np.array([[0, 0, 2, 4]]), (4, 2), (8, 6)), [[0, 0, 6, 8]])


@pytest.mark.parametrize(
    "tp, n_pred, n_gt, expected",
    [
        (0, 0, 0, (1.0, 1.0, 1.0)),
        (0, 0, 3, (0.0, 0.0, 0.0)),
        (0, 2, 0, (0.0, 0.0, 0.0)),
        (1, 2, 4, (0.5, 0.25, 1 / 3)),
        (3, 3, 3, (1.0, 1.0, 1.0)),
    ],
)
def test_zero_division_rules(tp, n_pred, n_gt, expected):
    got = precision_recall_f1(tp, n_pred, n_gt)
    assert (got["precision"], got["recall"]) == expected[:2]
    assert got["f1"] == pytest.approx(expected[2])
