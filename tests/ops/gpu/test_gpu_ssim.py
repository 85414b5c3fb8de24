"""Triton PSNR and SSIM equal the CPU backend within the float32 tolerance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icl.ops import psnr, ssim
from tests.tolerances import ATOL


def _pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    y = np.clip(x.astype(np.int16) + rng.normal(0, 25, shape), 0, 255).astype(np.uint8)
    return x, y


@pytest.mark.parametrize("shape", [(1, 11, 11, 3), (3, 17, 29, 3), (2, 40, 13, 1)])
def test_triton_ssim_psnr_equal_cpu_uint8(shape, device, triton_backend, cpu_backend):
    x, y = _pairs(np.random.default_rng(sum(shape)), shape)
    tx, ty = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    np.testing.assert_allclose(ssim(tx, ty, backend="triton").cpu().numpy(), ssim(x, y, backend="cpu"),
                               atol=ATOL[torch.float32])
    np.testing.assert_allclose(psnr(tx, ty, backend="triton").cpu().numpy(), psnr(x, y, backend="cpu"),
                               atol=ATOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_triton_ssim_float_inputs(dtype, device, triton_backend, cpu_backend):
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.random((2, 19, 23, 3), dtype=np.float32)).to(dtype)
    y = (x.float() + 0.1 * torch.from_numpy(rng.standard_normal((2, 19, 23, 3), dtype=np.float32))).clamp(0, 1).to(dtype)
    ref = ssim(x, y, data_range=1.0, backend="cpu")
    got = ssim(x.to(device), y.to(device), data_range=1.0, backend="triton").cpu()
    torch.testing.assert_close(got, ref, atol=ATOL[torch.float32], rtol=0)


def test_triton_psnr_identical_is_inf_and_float64_refused(device, triton_backend):
    x = torch.zeros((2, 12, 12, 3), dtype=torch.uint8, device=device)
    assert all(math.isinf(v) for v in psnr(x, x, backend="triton").cpu().tolist())
    with pytest.raises(Exception, match="float64"):
        psnr(x.double(), x.double(), data_range=1.0, backend="triton")
