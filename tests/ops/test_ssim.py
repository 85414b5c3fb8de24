"""icl.ops.ssim against skimage.metrics.structural_similarity (Gaussian, sigma 1.5, population)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from icl.ops import ssim
from tests.ops._image_pairs import DISTORTIONS, IMAGES, random_pair, real_pair
from tests.tolerances import ATOL

TORCH_DTYPE = {"uint8": torch.float32, "float32": torch.float32, "float64": torch.float64}


def peer(a: np.ndarray, b: np.ndarray, data_range: float) -> float:
    """skimage on one [H, W, C] pair; float inputs are given to it in float64."""
    if a.dtype != np.uint8:
        a, b = a.astype(np.float64), b.astype(np.float64)
    return float(structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                       data_range=data_range, channel_axis=-1))


@lru_cache(maxsize=None)
def peer_real(image: str, distortion: str, dtype: str) -> float:
    a, b = real_pair(image, distortion)
    if dtype == "uint8":
        return peer(a, b, 255)
    return peer(a / 255.0, b / 255.0, 1.0)


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
@pytest.mark.parametrize("shape", [(11, 11, 3), (11, 17, 1), (37, 23, 3), (16, 64, 1)])
def test_random_matches_skimage(backend, dtype, shape, rng):
    a, b = random_pair(rng, (2, *shape), dtype)
    dr = 255 if dtype == "uint8" else 1.0
    got = ssim(a, b, None if dtype == "uint8" else dr, backend=backend)
    assert isinstance(got, np.ndarray) and got.shape == (2,) and got.dtype == np.float64
    want = [peer(a[i], b[i], dr) for i in range(2)]
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL[TORCH_DTYPE[dtype]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_signed_range_matches_skimage(backend, dtype, rng):
    # images in [-1, 1] with data_range 2: the internal centring must not assume [0, range]
    a, b = random_pair(rng, (2, 29, 31, 3), "float64")
    a, b = (2 * a - 1).astype(dtype), (2 * b - 1).astype(dtype)
    got = ssim(a, b, 2.0, backend=backend)
    np.testing.assert_allclose(got, [peer(a[i], b[i], 2.0) for i in range(2)], rtol=0,
                               atol=ATOL[TORCH_DTYPE[dtype]])


@pytest.mark.parametrize("distortion", DISTORTIONS)
@pytest.mark.parametrize("image", IMAGES)
def test_real_images_uint8(backend, image, distortion):
    a, b = real_pair(image, distortion)
    got = ssim(torch.from_numpy(a), torch.from_numpy(b), backend=backend)
    assert isinstance(got, torch.Tensor) and got.shape == () and got.dtype == torch.float64
    assert abs(float(got) - peer_real(image, distortion, "uint8")) <= ATOL[torch.float32]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_real_image_float(backend, dtype):
    a, b = real_pair("chelsea", "jpeg")
    got = ssim((a / 255.0).astype(dtype), (b / 255.0).astype(dtype), 1.0, backend=backend)
    assert abs(float(got) - peer_real("chelsea", "jpeg", "float64")) <= ATOL[TORCH_DTYPE[dtype]]


@lru_cache(maxsize=None)
def _large() -> tuple[np.ndarray, np.ndarray, float]:
    a, b = random_pair(np.random.default_rng(3), (1023, 769, 3), "uint8", spread=30)
    return a, b, peer(a, b, 255)


def test_large_image_once(backend):
    a, b, want = _large()
    assert abs(float(ssim(a, b, backend=backend)) - want) <= ATOL[torch.float32]


def test_batch_64(backend, rng):
    a, b = random_pair(rng, (64, 13, 19, 3), "float64")
    got = ssim(torch.from_numpy(a), torch.from_numpy(b), 1.0, backend=backend)
    assert got.shape == (64,)
    np.testing.assert_allclose(got.numpy(), [peer(a[i], b[i], 1.0) for i in range(64)], rtol=0,
                               atol=ATOL[torch.float64])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs(backend, dtype, rng):
    a, b = random_pair(rng, (2, 24, 17, 3), "float64")
    ta, tb = torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype)
    got = ssim(ta, tb, 1.0, backend=backend)
    want = [peer(ta[i].double().numpy(), tb[i].double().numpy(), 1.0) for i in range(2)]
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=ATOL[dtype])


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_identical_images_give_one(backend, dtype, rng):
    a, _ = random_pair(rng, (3, 20, 15, 3), dtype)
    got = ssim(a, a.copy(), None if dtype == "uint8" else 1.0, backend=backend)
    np.testing.assert_allclose(got, 1.0, rtol=0, atol=ATOL[TORCH_DTYPE[dtype]])


def test_constant_images(backend):
    # zero variance everywhere: only C1/C2 keep the ratio finite
    a = np.full((12, 14, 1), 10, np.uint8)
    b = np.full((12, 14, 1), 200, np.uint8)
    assert abs(float(ssim(a, b, backend=backend)) - peer(a, b, 255)) <= ATOL[torch.float32]


def test_non_contiguous_input(backend, rng):
    a, b = random_pair(rng, (2, 30, 40, 3), "float64")
    a_t, b_t = torch.from_numpy(a)[:, :, ::2], torch.from_numpy(b)[:, :, ::2]
    got = ssim(a_t, b_t, 1.0, backend=backend)
    want = [peer(a_t[i].numpy(), b_t[i].numpy(), 1.0) for i in range(2)]
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=ATOL[torch.float64])


def test_empty_batch(backend):
    got = ssim(np.zeros((0, 11, 11, 3), np.uint8), np.zeros((0, 11, 11, 3), np.uint8), backend=backend)
    assert got.shape == (0,)


@pytest.mark.parametrize("hw", [(7, 7), (7, 13), (10, 11), (11, 10)])
def test_smaller_than_window_raises_like_skimage(hw):
    a = np.zeros((*hw, 3), np.uint8)
    with pytest.raises(ValueError, match="win_size"):
        peer(a, a, 255)
    with pytest.raises(ValueError, match="at least 11x11"):
        ssim(a, a)


def test_argument_errors():
    a = np.zeros((2, 12, 12, 3), np.float32)
    with pytest.raises(ValueError, match="data_range: required"):
        ssim(a, a)
    with pytest.raises(ValueError, match="same shape"):
        ssim(a, a[:, :, :11], 1.0)
    with pytest.raises(TypeError, match="same dtype"):
        ssim(a, a.astype(np.float64), 1.0)
    with pytest.raises(TypeError, match="int32"):
        ssim(a.astype(np.int32), a.astype(np.int32), 1.0)
    with pytest.raises(ValueError, match="channels"):
        ssim(a[..., :2], a[..., :2], 1.0)
    with pytest.raises(ValueError, match="shape"):
        ssim(a[0, ..., 0], a[0, ..., 0], 1.0)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="data_range"):
            ssim(a, a, bad)
    with pytest.raises(TypeError, match="data_range"):
        ssim(a, a, "1")
    nan = a.copy()
    nan[1, 3, 4, 2] = np.nan
    with pytest.raises(ValueError, match="a: contains NaN"):
        ssim(nan, a, 1.0)
    inf = a.copy()
    inf[0, 0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="b: contains NaN or infinite"):
        ssim(a, inf, 1.0)
    with pytest.raises(TypeError, match="ndarray"):
        ssim(a.tolist(), a, 1.0)
