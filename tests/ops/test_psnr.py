"""icl.ops.psnr against skimage.metrics.peak_signal_noise_ratio."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio

from icl.ops import backend_status, psnr
from tests.ops._image_pairs import DISTORTIONS, IMAGES, random_pair, real_pair
from tests.tolerances import ATOL

TORCH_DTYPE = {"uint8": torch.float32, "float32": torch.float32, "float64": torch.float64}


def peer(a: np.ndarray, b: np.ndarray, data_range: float) -> float:
    """skimage on one pair; float inputs are given to it in float64."""
    if a.dtype != np.uint8:
        a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(divide="ignore"):
        return float(peak_signal_noise_ratio(a, b, data_range=data_range))


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1, 3), (1, 1, 1), (7, 13, 1), (37, 23, 3)])
def test_random_matches_skimage(backend, dtype, shape, rng):
    a, b = random_pair(rng, (3, *shape), dtype)
    dr = 255 if dtype == "uint8" else 1.0
    got = psnr(a, b, None if dtype == "uint8" else dr, backend=backend)
    assert isinstance(got, np.ndarray) and got.shape == (3,) and got.dtype == np.float64
    want = [peer(a[i], b[i], dr) for i in range(3)]
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL[TORCH_DTYPE[dtype]])


@pytest.mark.parametrize("distortion", DISTORTIONS)
@pytest.mark.parametrize("image", IMAGES)
def test_real_images(backend, image, distortion):
    a, b = real_pair(image, distortion)
    got = psnr(torch.from_numpy(a), torch.from_numpy(b), backend=backend)
    assert isinstance(got, torch.Tensor) and got.shape == () and got.dtype == torch.float64
    # the uint8 MSE is exact on both sides: only the final log may differ by an ulp
    assert float(got) == pytest.approx(peer(a, b, 255), rel=1e-14)
    f32 = psnr((a / 255.0).astype(np.float32), (b / 255.0).astype(np.float32), 1.0, backend=backend)
    assert abs(float(f32) - peer(a / 255.0, b / 255.0, 1.0)) <= ATOL[torch.float32]


def test_backends_agree_exactly_on_uint8(rng):
    a, b = random_pair(rng, (4, 33, 47, 3), "uint8")
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    np.testing.assert_array_equal(psnr(a, b, backend="cpu"), psnr(a, b, backend="reference"))


def test_large_image_once(backend):
    a, b = random_pair(np.random.default_rng(3), (1023, 769, 3), "float64", spread=30)
    assert abs(float(psnr(a, b, 1.0, backend=backend)) - peer(a, b, 1.0)) <= ATOL[torch.float64]


def test_batch_64(backend, rng):
    a, b = random_pair(rng, (64, 9, 5, 3), "uint8")
    got = psnr(a, b, backend=backend)
    np.testing.assert_allclose(got, [peer(a[i], b[i], 255) for i in range(64)], rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs(backend, dtype, rng):
    a, b = random_pair(rng, (2, 24, 17, 3), "float64")
    ta, tb = torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype)
    got = psnr(ta, tb, 1.0, backend=backend)
    want = [peer(ta[i].double().numpy(), tb[i].double().numpy(), 1.0) for i in range(2)]
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=ATOL[dtype])


def test_data_range_is_used(backend, rng):
    a, b = random_pair(rng, (2, 8, 8, 3), "float64")
    got = psnr(a * 4, b * 4, 4.0, backend=backend)
    np.testing.assert_allclose(got, [peer(a[i] * 4, b[i] * 4, 4.0) for i in range(2)], rtol=0,
                               atol=ATOL[torch.float64])
    np.testing.assert_allclose(psnr(a, b, 2.0, backend=backend) - psnr(a, b, 1.0, backend=backend),
                               20 * np.log10(2.0), rtol=0, atol=1e-9)


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_identical_images_give_inf(backend, dtype, rng):
    a, b = random_pair(rng, (3, 6, 5, 3), dtype)
    b[1] = a[1]
    got = psnr(a, b, None if dtype == "uint8" else 1.0, backend=backend)
    assert got[1] == np.inf and np.isfinite(got[[0, 2]]).all()
    assert peer(a[1], b[1], 1.0) == np.inf


def test_empty_batch(backend):
    got = psnr(np.zeros((0, 2, 2, 3), np.uint8), np.zeros((0, 2, 2, 3), np.uint8), backend=backend)
    assert got.shape == (0,)


def test_argument_errors():
    a = np.zeros((2, 5, 6, 3), np.float32)
    with pytest.raises(ValueError, match="data_range: required"):
        psnr(a, a)
    with pytest.raises(ValueError, match="same shape"):
        psnr(a, a[:, :4], 1.0)
    with pytest.raises(TypeError, match="same dtype"):
        psnr(a, a.astype(np.float64), 1.0)
    with pytest.raises(TypeError, match="int16"):
        psnr(a.astype(np.int16), a.astype(np.int16), 1.0)
    with pytest.raises(ValueError, match="channels"):
        psnr(a[..., :2], a[..., :2], 1.0)
    with pytest.raises(ValueError, match="shape"):
        psnr(a[0, ..., 0], a[0, ..., 0], 1.0)
    with pytest.raises(ValueError, match="at least 1x1"):
        psnr(a[:, :0], a[:, :0], 1.0)
    for bad in (0, -2.0, float("nan")):
        with pytest.raises(ValueError, match="data_range"):
            psnr(a, a, bad)
    nan = a.copy()
    nan[0, 1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="a: contains NaN"):
        psnr(nan, a, 1.0)
    with pytest.raises(ValueError, match="b: contains NaN"):
        psnr(a, nan, 1.0)
