"""Peak signal-to-noise ratio per image, as ``skimage.metrics.peak_signal_noise_ratio``."""

from __future__ import annotations

import math
from typing import Any, Optional, overload

import torch

from icl.ops._dispatch import native, op
from icl.ops._pair import check_pair, finish, image_pair
from icl.ops._tensor import ArrayLike, NDArray, call_op, custom_op

_OP = op("psnr", gpu_module="icl.ops._gpu.psnr")


def _from_mse(mse: torch.Tensor, data_range: float) -> torch.Tensor:
    # skimage's formula in float64; mse == 0 (identical images) gives +inf.
    return 10.0 * torch.log10((data_range * data_range) / mse)


@_OP.register("reference")
def _reference(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    # Differences and squares in float32 (float64 for float64), summed in float64 like skimage;
    # for uint8 every step is exact.
    t = torch.float64 if x.dtype == torch.float64 else torch.float32
    d = x.to(t) - y.to(t)
    mse = (d * d).to(torch.float64).flatten(1).mean(1)
    return _from_mse(mse, data_range)


@_OP.register("cpu")
def _cpu(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    _C = native()
    xs, ys = x.contiguous().numpy(), y.contiguous().numpy()
    # the whole PSNR in C++ as icl.ops.psnr's numpy path computes it (the same log10, so host
    # and tensor calls agree to the bit); None for what it does not serve (non-finite MSE)
    whole = _C.psnr_numpy(xs, ys, float(data_range)) if hasattr(_C, "psnr_numpy") else None
    if whole is not None:
        return torch.from_numpy(whole)
    return _from_mse(torch.from_numpy(_C.mse(xs, ys)), data_range)


@custom_op("psnr")
def _psnr_op(x: torch.Tensor, y: torch.Tensor, data_range: float, backend: Optional[str]) -> torch.Tensor:
    check_pair(x, y)
    out: torch.Tensor = _OP(x.device.type, x.detach(), y.detach(), data_range, backend=backend)
    return out


@_psnr_op.register_fake
def _psnr_fake(x: torch.Tensor, y: torch.Tensor, data_range: float, backend: Optional[str]) -> torch.Tensor:
    return x.new_empty((x.shape[0],), dtype=torch.float64)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, y, _, _ = inputs
    ctx.save_for_backward(x, y)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor], None, None]:
    # d/dx 10 log10(R^2 / mse) = -10 / ln(10) / mse * 2 (x - y) / n, in float64; identical
    # images (mse = 0, PSNR +inf) have no finite gradient.
    x, y = ctx.saved_tensors
    d = x.to(torch.float64) - y.to(torch.float64)
    mse = (d * d).flatten(1).mean(1)
    scale = grad.to(torch.float64) * (-20.0 / math.log(10.0)) / (mse * d[0].numel())
    gx = scale.view(-1, *([1] * (d.ndim - 1))) * d
    return ((gx.to(x.dtype) if ctx.needs_input_grad[0] else None),
            ((-gx).to(y.dtype) if ctx.needs_input_grad[1] else None), None, None)


_psnr_op.register_autograd(_backward, setup_context=_setup_context)


@overload
def psnr(a: NDArray, b: NDArray, data_range: Optional[float] = None, *, backend: Optional[str] = None) -> NDArray: ...
@overload
def psnr(a: torch.Tensor, b: torch.Tensor, data_range: Optional[float] = None, *,
         backend: Optional[str] = None) -> torch.Tensor: ...
def psnr(a: ArrayLike, b: ArrayLike, data_range: Optional[float] = None, *,
         backend: Optional[str] = None) -> ArrayLike:
    """The torch front end of ``icl.ops.psnr`` (documented there): tensors, and the numpy
    calls ``icl.ops._host`` hands over."""
    pair = image_pair(a, b, data_range)
    if pair.x.shape[0] == 0:
        return finish(torch.empty(0, dtype=torch.float64, device=pair.x.device), pair)
    out = call_op("psnr", pair.x, pair.y, pair.data_range, backend)
    return finish(out, pair)
