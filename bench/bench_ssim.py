"""SSIM on RGB uint8 pairs: icl's fused cpu kernel beside skimage.metrics.structural_similarity."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from bench._peer import compare
from icl.ops import backend_status, ssim

FLOOR = 10.0  # task floor: at least 10x skimage on RGB 1024x1024 uint8


def _pairs(n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    b = np.clip(a + rng.integers(-30, 31, a.shape), 0, 255).astype(np.uint8)
    return a, b


def _peer(a: np.ndarray, b: np.ndarray) -> list[float]:
    return [structural_similarity(x, y, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                  data_range=255, channel_axis=-1) for x, y in zip(a, b)]


@pytest.mark.parametrize("n, size, floor", [(2, 1024, FLOOR), (32, 128, None)])
def test_ssim_rgb_uint8(benchmark, n, size, floor):
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    a, b = _pairs(n, size)
    np.testing.assert_allclose(ssim(a[:1], b[:1], backend="cpu"), _peer(a[:1], b[:1]), rtol=0, atol=1e-4)
    ratio = compare(benchmark, lambda: ssim(a, b, backend="cpu"), lambda: _peer(a, b),
                    peer_name="skimage.structural_similarity", items=n, rounds=10, peer_rounds=3)
    if floor is not None:
        assert ratio >= floor, f"SSIM {size}x{size} RGB: {ratio:.1f}x skimage, floor {floor}x"
