"""PSNR on RGB uint8 pairs: icl's cpu kernel beside skimage.metrics.peak_signal_noise_ratio."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio

from bench._peer import compare
from icl.ops import backend_status, psnr


def _pairs(n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    b = np.clip(a + rng.integers(-30, 31, a.shape), 0, 255).astype(np.uint8)
    return a, b


@pytest.mark.parametrize("n, size", [(4, 1024), (64, 128)])
def test_psnr_rgb_uint8(benchmark, n, size):
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    a, b = _pairs(n, size)

    def peer() -> list[float]:
        return [peak_signal_noise_ratio(x, y, data_range=255) for x, y in zip(a, b)]

    np.testing.assert_allclose(psnr(a, b, backend="cpu"), peer(), rtol=1e-12)
    compare(benchmark, lambda: psnr(a, b, backend="cpu"), peer, peer_name="skimage.peak_signal_noise_ratio",
            items=n, rounds=10, peer_rounds=3)
