"""Peak signal-to-noise ratio per image, as ``skimage.metrics.peak_signal_noise_ratio``."""

from __future__ import annotations

from typing import Any, Optional

import torch

from icl.ops._dispatch import op
from icl.ops._pair import finish, image_pair

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
    from icl import _C

    mse = torch.from_numpy(_C.mse(x.contiguous().numpy(), y.contiguous().numpy()))
    return _from_mse(mse, data_range)


def psnr(a: Any, b: Any, data_range: Optional[float] = None, *, backend: Optional[str] = None) -> Any:
    """PSNR in dB of each image pair: ``10 * log10(data_range**2 / MSE)``.

    ``a``, ``b``: ``[B, H, W, C]`` or ``[H, W, C]`` (C = 1 or 3), same shape and dtype: uint8,
    float16, bfloat16, float32 or float64, finite. ``data_range`` defaults to 255 for uint8 and
    is required for float images (``ValueError`` otherwise); unlike skimage it is never guessed
    from the data. The MSE is over all pixels and channels of an image: exact for uint8,
    squared differences in float32 summed in float64 for float16/bfloat16/float32, float64 for
    float64. Returns float64 ``[B]`` (0-d for a single image; numpy when ``a`` is numpy);
    identical images give ``+inf``.
    """
    pair = image_pair(a, b, data_range)
    if pair.x.shape[0] == 0:
        return finish(torch.empty(0, dtype=torch.float64, device=pair.x.device), pair)
    out = _OP(pair.x.device.type, pair.x, pair.y, pair.data_range, backend=backend)
    return finish(out, pair)
