import numpy as np
import pytest

from icl.ops import redness


def test_redness_matches_numpy_formula():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (2, 7, 13, 3), dtype=np.uint8)
    img[0, 0, 0] = (255, 127, 0)  # S = (255 - 127) / 255 ~ 0.502: just above the threshold
    img[0, 0, 1] = (255, 128, 0)  # S ~ 0.498: just below
    s, mask = redness(img)
    x = img.astype(np.float32) / np.float32(255)
    ref = np.clip(x[..., 0] - np.maximum(x[..., 1], x[..., 2]), 0, 1)
    np.testing.assert_array_equal(s, ref)
    np.testing.assert_array_equal(mask, ref > 0.5)
    assert mask[0, 0, 0] and not mask[0, 0, 1]


def test_redness_float_input_and_single_image():
    img = np.zeros((4, 5, 3), np.float32)
    img[1, 2] = (1.0, 0.2, 0.1)
    s, mask = redness(img)
    assert s.shape == (4, 5) and mask.sum() == 1 and mask[1, 2]


def test_redness_rejects_bad_shapes():
    with pytest.raises(ValueError, match="images"):
        redness(np.zeros((4, 5, 4), np.uint8))


@pytest.mark.parametrize("threshold, error", [(float("nan"), ValueError), (float("inf"), ValueError),
                                              ("0.5", TypeError), (None, TypeError), (True, TypeError)])
def test_redness_rejects_bad_threshold(threshold, error):
    # a NaN threshold would silently give an empty mask (S > nan is False everywhere)
    with pytest.raises(error, match="threshold"):
        redness(np.zeros((4, 5, 3), np.uint8), threshold)


def test_redness_accepts_numpy_scalar_threshold():
    img = np.zeros((1, 2, 3), np.uint8)
    img[0, 0] = (200, 0, 0)  # S ~ 0.784
    assert redness(img, np.float32(0.7))[1].tolist() == [[True, False]]
