"""GPU-backend result contracts: triton PSNR/SSIM return float64, numba-cuda component sums
accumulate in float64 (as the cpu backend)."""

from __future__ import annotations

import numpy as np
import torch

from skimage.metrics import structural_similarity

from icl.ops import connected_components, psnr, ssim


def test_triton_psnr_and_ssim_return_float64(device, triton_backend, cpu_backend):
    g = torch.Generator().manual_seed(5)
    a = torch.rand(2, 16, 16, 3, generator=g)
    b = (a + 0.05 * torch.rand(2, 16, 16, 3, generator=g)).clamp(0, 1)
    for fn, tol in ((psnr, 1e-9), (ssim, 1e-9)):
        got = fn(a.to(device), b.to(device), 1.0, backend="triton")
        want = fn(a, b, 1.0, backend="cpu")
        assert got.dtype == torch.float64
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=tol)


def test_cuda_component_sums_accumulate_in_float64(device, cuda_backend, cpu_backend):
    # one component of 1024 pixels: a float32 running sum of 1e4 + 0.001 steps drifts visibly
    values = np.full((1, 32, 32), 0.001, np.float32)
    values[0, 0, 0] = 1e4
    mask = np.ones((1, 32, 32), bool)
    ref = connected_components(mask, 8, values, backend="cpu")
    got = connected_components(torch.from_numpy(mask).to(device), 8, torch.from_numpy(values).to(device),
                               backend="cuda")
    exact = np.float32(np.float64(values).sum())
    assert ref.value_sum[0] == exact
    assert got.value_sum.dtype == torch.float32 and float(got.value_sum[0]) == exact
    np.testing.assert_array_equal(got.value_mean.cpu().numpy(), ref.value_mean)


def test_triton_ssim_within_1e6_of_skimage_on_flat_and_bright_images(device, triton_backend):
    rng = np.random.default_rng(11)
    bright = rng.integers(250, 256, (1, 24, 70, 3)).astype(np.uint8)
    cases = [(np.full((1, 16, 16, 3), 200, np.uint8), np.full((1, 16, 16, 3), 201, np.uint8)),
             (bright, np.clip(bright + rng.integers(-1, 2, bright.shape), 0, 255).astype(np.uint8))]
    for a, b in cases:
        want = structural_similarity(a[0], b[0], gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                     data_range=255, channel_axis=-1)
        got = ssim(torch.from_numpy(a).to(device), torch.from_numpy(b).to(device), backend="triton")
        assert got.dtype == torch.float64 and abs(float(got[0]) - want) <= 1e-6
