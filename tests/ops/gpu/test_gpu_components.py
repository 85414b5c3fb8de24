"""numba.cuda connected components equal the CPU backend exactly (labels, counts, stats)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl.ops import connected_components


def _masks(rng: np.random.Generator) -> list[np.ndarray]:
    out = [rng.random((3, 7, 13)) < d for d in (0.3, 0.55)]
    checker = (np.indices((9, 10)).sum(0) % 2 == 0)[None]  # 4 and 8 connectivity differ
    out += [checker, np.zeros((2, 5, 6), bool), np.ones((1, 4, 9), bool), np.ones((1, 1, 1), bool)]
    spiral = np.zeros((1, 11, 11), bool)
    spiral[0, 0, :] = spiral[0, :, 10] = spiral[0, 10, :] = spiral[0, 2:, 0] = spiral[0, 2, :9] = True
    out.append(spiral)
    return out


@pytest.mark.parametrize("connectivity", [4, 8])
def test_cuda_equals_cpu(connectivity, device, cuda_backend, cpu_backend):
    rng = np.random.default_rng(7)
    for mask in _masks(rng):
        values = rng.integers(0, 4, mask.shape).astype(np.float32)  # integer values: many argmax ties
        ref = connected_components(mask, connectivity, values, backend="cpu")
        got = connected_components(torch.from_numpy(mask).to(device), connectivity,
                                   torch.from_numpy(values).to(device), backend="cuda")
        for field in ("labels", "num", "image", "area", "box", "argmax"):
            np.testing.assert_array_equal(getattr(got, field).cpu().numpy(), getattr(ref, field), err_msg=field)
        np.testing.assert_allclose(got.value_sum.cpu().numpy(), ref.value_sum, rtol=1e-6)
        np.testing.assert_allclose(got.value_mean.cpu().numpy(), ref.value_mean, rtol=1e-6)


def test_cuda_without_values_and_uint8_mask(device, cuda_backend, cpu_backend):
    mask = (np.random.default_rng(3).random((2, 8, 9)) < 0.5).astype(np.uint8) * 7  # nonzero = fg
    ref = connected_components(mask, 8, backend="cpu")
    got = connected_components(torch.from_numpy(mask).to(device), 8, backend="cuda")
    np.testing.assert_array_equal(got.labels.cpu().numpy(), ref.labels)
    np.testing.assert_array_equal(got.box.cpu().numpy(), ref.box)
    assert got.value_sum is None and got.argmax is None


def test_cuda_refuses_float64_values_and_nan(device, cuda_backend):
    mask = torch.ones((1, 4, 4), dtype=torch.bool, device=device)
    with pytest.raises(Exception, match="float32"):
        connected_components(mask, 8, torch.zeros((1, 4, 4), dtype=torch.float64, device=device), backend="cuda")
    bad = torch.zeros((1, 4, 4), device=device)
    bad[0, 1, 1] = float("nan")
    with pytest.raises(ValueError, match="values"):
        connected_components(mask, 8, bad, backend="cuda")
