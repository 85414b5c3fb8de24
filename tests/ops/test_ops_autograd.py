"""ssim, psnr and lpips are differentiable: torch.autograd.gradcheck on tiny float64 inputs,
whichever backend runs the forward."""

from __future__ import annotations

import pytest
import torch

import icl.ops as ops
from icl.ops import _lpips_weights as lw


def _pair(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(shape, dtype=torch.float64, generator=g)
    b = (a + 0.2 * torch.rand(shape, dtype=torch.float64, generator=g)).clamp(0, 1)
    return a.requires_grad_(), b.requires_grad_()


@pytest.mark.parametrize("shape, fast", [((1, 11, 12, 1), False), ((2, 12, 13, 3), True)])
def test_ssim_gradcheck(shape, fast, backend):
    a, b = _pair(shape, 0)
    assert torch.autograd.gradcheck(lambda x, y: ops.ssim(x, y, 1.0, backend=backend), (a, b), fast_mode=fast)


def test_ssim_gradient_of_float32_input_has_its_dtype(backend):
    a, b = _pair((1, 12, 12, 3), 1)
    x = a.detach().float().requires_grad_()
    ops.ssim(x, b.detach().float(), 1.0, backend=backend).sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()


@pytest.mark.parametrize("shape", [(2, 5, 6, 3), (4, 4, 1)])
def test_psnr_gradcheck(shape, backend):
    a, b = _pair(shape, 2)
    assert torch.autograd.gradcheck(lambda x, y: ops.psnr(x, y, 1.0, backend=backend), (a, b))


def test_psnr_gradient_matches_torch_formula(backend):
    a, b = _pair((2, 6, 6, 3), 3)
    ops.psnr(a, b, 1.0, backend=backend).sum().backward()
    x, y = a.detach().requires_grad_(), b.detach().requires_grad_()
    (10 * torch.log10(1.0 / ((x - y) ** 2).flatten(1).mean(1))).sum().backward()
    torch.testing.assert_close(a.grad, x.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(b.grad, y.grad, rtol=1e-12, atol=1e-12)


def test_lpips_gradcheck():
    try:
        lw.find("alex")
    except lw.LPIPSWeightsNotFound as exc:
        pytest.skip(f"LPIPS alex weights not installed (run `make lpips-weights`): {exc}")
    a, b = _pair((1, 32, 32, 3), 4)
    a, b = (0.1 + 0.8 * a).detach().requires_grad_(), (0.1 + 0.8 * b).detach().requires_grad_()  # eps stays in [0, 1]
    # fast mode: a random directional derivative, not the full 3072-column Jacobian
    assert torch.autograd.gradcheck(lambda x, y: ops.lpips(x, y, dtype=torch.float64), (a, b), fast_mode=True)
    loss = ops.lpips(a.detach().float().requires_grad_(), b.detach().float())
    assert loss.requires_grad and loss.dtype == torch.float32
