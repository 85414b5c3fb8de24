"""Turbo encoding against numpy and matplotlib's colormap; bins against an exact brute force
(ties to the lower bin) cross-checked with cKDTree; decode round trips to bin centres."""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
import pytest
import torch

import icl.ops
import icl.ops.turbo  # the submodule, whichever test ran before
from icl.ops import TURBO_TABLE, nearest_palette, turbo_bins, turbo_decode, turbo_encode
from tests.ops.nearest_peer import check, tie_count


def peer_encode(depth: np.ndarray, d_min: float, d_max: float) -> np.ndarray:
    colours = np.round(255 * np.asarray(matplotlib.colormaps["turbo"].colors)).astype(np.uint8)
    with np.errstate(invalid="ignore"):
        valid = depth > 0
        bins = np.clip(np.floor((depth.astype(np.float64) - d_min) / (d_max - d_min) * 256), 0, 255)
    out = colours[np.where(valid, bins, 0).astype(np.int64)]
    out[~valid] = 0
    return out


def bin_centre(bins: np.ndarray, d_min: float, d_max: float) -> np.ndarray:
    return (d_min + (bins + 0.5) / 256 * (d_max - d_min)).astype(np.float32)


def test_table() -> None:
    listed = np.asarray(matplotlib.colormaps["turbo"].colors)
    assert TURBO_TABLE.dtype == np.uint8 and TURBO_TABLE.shape == (256, 3)
    np.testing.assert_array_equal(TURBO_TABLE, np.round(255 * listed))
    assert TURBO_TABLE[0].tolist() == [48, 18, 59] and TURBO_TABLE[255].tolist() == [122, 4, 3]
    assert icl.ops.turbo.TURBO_TABLE is TURBO_TABLE
    with pytest.raises(ValueError):
        TURBO_TABLE[0, 0] = 1


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (3, 7, 13)])
def test_encode(backend: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    depth = rng.uniform(-1.0, 12.0, shape)
    flat = depth.reshape(-1)
    special = [np.nan, 0.0, -0.0, -3.0, np.inf, -np.inf, 1e-9, 10.0, 10.0 - 1e-12, 5.0, 10 * 37 / 256]
    flat[: len(special)] = special[: len(flat)]
    got = turbo_encode(depth, 0.0, 10.0, backend=backend)
    assert got.dtype == np.uint8 and got.shape == (*shape, 3)
    np.testing.assert_array_equal(got, peer_encode(depth, 0.0, 10.0))
    as_float32 = turbo_encode(torch.from_numpy(depth.astype(np.float32)), 0.5, 80, backend=backend)
    assert isinstance(as_float32, torch.Tensor)
    np.testing.assert_array_equal(as_float32.numpy(), peer_encode(depth.astype(np.float32), 0.5, 80.0))


def test_invalid_depth_is_black(backend: str) -> None:
    depth = np.array([[np.nan, 0.0, -1.0, 0.01]], dtype=np.float32)
    got = turbo_encode(depth, 0.5, 10.0, backend=backend)
    assert (got[0, :3] == 0).all()
    assert got[0, 3].tolist() == TURBO_TABLE[0].tolist()  # valid, below d_min: bin 0


@pytest.mark.parametrize("d_min, d_max", [(0.0, 10.0), (1.5, 80.25)])
def test_round_trip(backend: str, d_min: float, d_max: float) -> None:
    rng = np.random.default_rng(4)
    centres = bin_centre(np.arange(256), d_min, d_max)
    depth = np.concatenate([centres, rng.uniform(d_min, d_max, 256 * 7)]).reshape(32, 64)
    bins = np.clip(np.floor((depth.astype(np.float64) - d_min) / (d_max - d_min) * 256), 0, 255)
    encoded = turbo_encode(depth, d_min, d_max, backend=backend)
    np.testing.assert_array_equal(turbo_bins(encoded, backend=backend), bins)
    decoded = turbo_decode(encoded, d_min, d_max, backend=backend)
    assert decoded.dtype == np.float32 and decoded.shape == (32, 64)
    np.testing.assert_array_equal(decoded, bin_centre(bins, d_min, d_max))
    np.testing.assert_array_equal(decoded.reshape(-1)[:256], centres)


@pytest.mark.parametrize("shape", [(1, 1), (7, 13)])
def test_bins_random(backend: str, shape: tuple[int, int]) -> None:
    images = np.random.default_rng(shape[1]).integers(0, 256, (2, *shape, 3), dtype=np.uint8)
    got = turbo_bins(images, backend=backend)
    check(images, TURBO_TABLE, got)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the read-only table is a valid palette
        np.testing.assert_array_equal(nearest_palette(images, TURBO_TABLE, backend=backend), got)


def test_bins_ties(backend: str) -> None:
    # Midpoints of turbo colours 1 to 4 bins apart with even sums: exactly halfway.
    t = TURBO_TABLE.astype(int)
    pairs = np.concatenate([t[:-k] + t[k:] for k in range(1, 5)])
    mid = (pairs[(pairs % 2 == 0).all(1)] // 2).astype(np.uint8)
    images = mid[: len(mid) // 8 * 8].reshape(8, -1, 3)
    assert tie_count(images, TURBO_TABLE) > 30
    check(images, TURBO_TABLE, turbo_bins(images, backend=backend))


def test_bins_large_noisy(backend: str) -> None:
    # 1023x769: a smooth depth map encoded in turbo plus Gaussian noise, as a prediction looks.
    rng = np.random.default_rng(5)
    yy, xx = np.mgrid[0:1023, 0:769]
    depth = 5 + 4.9 * np.sin(yy / 90.0) * np.cos(xx / 70.0)
    noisy = np.clip(turbo_encode(depth, 0, 10) + rng.normal(0, 8, (1023, 769, 3)), 0, 255).round().astype(np.uint8)
    check(noisy, TURBO_TABLE, turbo_bins(noisy, backend=backend))


@pytest.mark.parametrize("name", ["astronaut", "coffee"])
def test_bins_photos(backend: str, name: str) -> None:
    # real images (scikit-image's bundled photographs), as the acceptance asks beside random ones
    from skimage import data as skdata

    photo = getattr(skdata, name)()
    got = turbo_bins(photo, backend=backend)
    check(photo, TURBO_TABLE, got)
    np.testing.assert_array_equal(turbo_decode(photo, 0.0, 10.0, backend=backend), bin_centre(got, 0.0, 10.0))


def test_bins_random_colours(backend: str) -> None:
    # 2^18 random colours spread over the whole lookup table
    images = np.random.default_rng(12).integers(0, 256, (4, 256, 256, 3), dtype=np.uint8)
    check(images, TURBO_TABLE, turbo_bins(images, backend=backend))


def test_decode_float_and_batch(backend: str) -> None:
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 1, (3, 5, 6, 3))
    as_uint8 = np.round(255 * x.astype(np.float32)).astype(np.uint8)
    got = turbo_decode(x, 0, 10, backend=backend)
    np.testing.assert_array_equal(got, turbo_decode(as_uint8, 0, 10, backend=backend))
    bins = turbo_bins(as_uint8, backend=backend)
    check(as_uint8, TURBO_TABLE, bins)
    np.testing.assert_array_equal(got, bin_centre(bins, 0, 10))
    single = turbo_decode(torch.from_numpy(as_uint8[1]), 0, 10, backend=backend)
    assert isinstance(single, torch.Tensor) and single.shape == (5, 6)
    np.testing.assert_array_equal(single.numpy(), got[1])


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda b: turbo_encode(np.ones((2, 2)), 1.0, 1.0, backend=b), ValueError, "d_max > d_min"),
        (lambda b: turbo_encode(np.ones((2, 2)), 0.0, np.nan, backend=b), ValueError, "d_max"),
        (lambda b: turbo_encode(np.ones((2, 2)), "0", 1.0, backend=b), TypeError, "d_min"),
        (lambda b: turbo_encode(np.ones((2, 2), np.int32), 0, 1, backend=b), TypeError, "depth"),
        (lambda b: turbo_encode(np.ones(4), 0, 1, backend=b), ValueError, "depth"),
        (lambda b: turbo_encode([[1.0]], 0, 1, backend=b), TypeError, "depth"),
        (lambda b: turbo_decode(np.zeros((2, 2, 3), np.uint8), 5, 1, backend=b), ValueError, "d_max > d_min"),
        (lambda b: turbo_decode(np.zeros((2, 2, 4), np.uint8), 0, 1, backend=b), ValueError, "images"),
        (lambda b: turbo_decode(np.full((2, 2, 3), np.nan), 0, 1, backend=b), ValueError, "NaN"),
        (lambda b: turbo_bins(np.zeros((2, 2, 3), np.int64), backend=b), TypeError, "images"),
        (lambda b: turbo_bins(np.zeros((2, 3)), backend=b), ValueError, "images"),
    ],
)
def test_errors(backend: str, call, error, match) -> None:
    with pytest.raises(error, match=match):
        call(backend)
