"""Mean structural similarity per image, as skimage's ``structural_similarity`` with
``gaussian_weights=True, sigma=1.5, use_sample_covariance=False, channel_axis=-1``."""

from __future__ import annotations

from typing import Any, Optional, overload

import torch

from icl.ops._autograd import recording
from icl.ops._dispatch import native, op
from icl.ops._pair import check_pair, finish, image_pair
from icl.ops._tensor import ArrayLike, NDArray, call_op, custom_op

_OP = op("ssim", gpu_module="icl.ops._gpu.ssim")

SIGMA = 1.5
RADIUS = int(3.5 * SIGMA + 0.5)  # skimage truncates at 3.5 sigma: an 11-tap window
WIN_SIZE = 2 * RADIUS + 1
K1, K2 = 0.01, 0.03


def gaussian_window(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """scipy.ndimage's 1-D Gaussian (sigma 1.5, radius 5), normalised to sum 1."""
    x = torch.arange(-RADIUS, RADIUS + 1, dtype=torch.float64)
    phi = torch.exp(-0.5 / (SIGMA * SIGMA) * x * x)
    return (phi / phi.sum()).to(dtype)


def _filter_valid(p: torch.Tensor, w: torch.Tensor, dim: int) -> torch.Tensor:
    # 'valid' correlation along dim as explicit tap sums (no conv: keeps float semantics
    # identical on every device, e.g. no TF32 on CUDA).
    n = p.shape[dim] - 2 * RADIUS
    out = w[RADIUS] * p.narrow(dim, RADIUS, n)
    for k in range(RADIUS):
        out = out + w[k] * (p.narrow(dim, k, n) + p.narrow(dim, WIN_SIZE - 1 - k, n))
    return out


@_OP.register("reference")
def _reference(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    """Pure torch, float64 throughout (as skimage), differentiable: it also serves the backward."""
    # skimage filters with mode='reflect' and then crops RADIUS pixels from each border, so
    # the kept positions only see in-image pixels: valid filtering gives exactly that region.
    shift = data_range / 2  # centring keeps E[x^2] - E[x]^2 accurate
    xs, ys = x.to(torch.float64) - shift, y.to(torch.float64) - shift
    planes = torch.stack([xs, ys, xs * xs, ys * ys, xs * ys])  # [5, B, H, W, C]
    w = gaussian_window(torch.float64).to(x.device)
    mx, my, sxx, syy, sxy = _filter_valid(_filter_valid(planes, w, 2), w, 3)
    vx, vy, vxy = sxx - mx * mx, syy - my * my, sxy - mx * my
    ux, uy = mx + shift, my + shift
    c1, c2 = (K1 * data_range) ** 2, (K2 * data_range) ** 2
    s = (2 * ux * uy + c1) * (2 * vxy + c2) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    # equal valid counts per channel: the mean of channel means is the mean over everything
    out: torch.Tensor = s.flatten(1).mean(1)
    return out


@_OP.register("cpu")
def _cpu(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    _C = native()
    return torch.from_numpy(_C.ssim(x.contiguous().numpy(), y.contiguous().numpy(), data_range))


@custom_op("ssim")
def _ssim_op(x: torch.Tensor, y: torch.Tensor, data_range: float, backend: Optional[str]) -> torch.Tensor:
    check_pair(x, y)
    out: torch.Tensor = _OP(x.device.type, x.detach(), y.detach(), data_range, backend=backend)
    return out


@_ssim_op.register_fake
def _ssim_fake(x: torch.Tensor, y: torch.Tensor, data_range: float, backend: Optional[str]) -> torch.Tensor:
    return x.new_empty((x.shape[0],), dtype=torch.float64)


@custom_op("ssim_backward")
def _ssim_backward_op(grad: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                      data_range: float) -> tuple[torch.Tensor, torch.Tensor]:
    # the gradient of the float64 reference (any backend's forward agrees with it to 1e-6)
    with recording():
        xs = x.detach().to(torch.float64).requires_grad_()
        ys = y.detach().to(torch.float64).requires_grad_()
        gx, gy = torch.autograd.grad(_reference(xs, ys, data_range), (xs, ys), grad.to(torch.float64))
    return gx.to(x.dtype), gy.to(y.dtype)


@_ssim_backward_op.register_fake
def _ssim_backward_fake(grad: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                        data_range: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(y)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, y, data_range, _ = inputs
    ctx.save_for_backward(x, y)
    ctx.data_range = data_range


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor], None, None]:
    x, y = ctx.saved_tensors
    gx, gy = call_op("ssim_backward", grad, x, y, ctx.data_range)
    return (gx if ctx.needs_input_grad[0] else None), (gy if ctx.needs_input_grad[1] else None), None, None


_ssim_op.register_autograd(_backward, setup_context=_setup_context)


@overload
def ssim(a: NDArray, b: NDArray, data_range: Optional[float] = None, *, backend: Optional[str] = None) -> NDArray: ...
@overload
def ssim(a: torch.Tensor, b: torch.Tensor, data_range: Optional[float] = None, *,
         backend: Optional[str] = None) -> torch.Tensor: ...
def ssim(a: ArrayLike, b: ArrayLike, data_range: Optional[float] = None, *,
         backend: Optional[str] = None) -> ArrayLike:
    """The torch front end of ``icl.ops.ssim`` (documented there): tensors, and the numpy
    calls ``icl.ops._host`` hands over."""
    pair = image_pair(a, b, data_range, min_size=WIN_SIZE, why="SSIM's 11-tap Gaussian window; skimage raises too")
    if pair.x.shape[0] == 0:
        return finish(torch.empty(0, dtype=torch.float64, device=pair.x.device), pair)
    out = call_op("ssim", pair.x, pair.y, pair.data_range, backend)
    return finish(out, pair)
