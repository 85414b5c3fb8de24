"""Mean structural similarity per image, as skimage's ``structural_similarity`` with
``gaussian_weights=True, sigma=1.5, use_sample_covariance=False, channel_axis=-1``."""

from __future__ import annotations

from typing import Any, Optional

import torch

from icl.ops._dispatch import op
from icl.ops._pair import finish, image_pair

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
    # skimage filters with mode='reflect' and then crops RADIUS pixels from each border, so
    # the kept positions only see in-image pixels: valid filtering gives exactly that region.
    t = torch.float64 if x.dtype == torch.float64 else torch.float32
    shift = data_range / 2  # centring keeps E[x^2] - E[x]^2 accurate in float32
    xs, ys = x.to(t) - shift, y.to(t) - shift
    planes = torch.stack([xs, ys, xs * xs, ys * ys, xs * ys])  # [5, B, H, W, C]
    w = gaussian_window(t).to(x.device)
    mx, my, sxx, syy, sxy = _filter_valid(_filter_valid(planes, w, 2), w, 3)
    vx, vy, vxy = sxx - mx * mx, syy - my * my, sxy - mx * my
    ux, uy = mx + shift, my + shift
    c1, c2 = (K1 * data_range) ** 2, (K2 * data_range) ** 2
    s = (2 * ux * uy + c1) * (2 * vxy + c2) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    # equal valid counts per channel: the mean of channel means is the mean over everything
    return s.to(torch.float64).flatten(1).mean(1)


@_OP.register("cpu")
def _cpu(x: torch.Tensor, y: torch.Tensor, data_range: float) -> torch.Tensor:
    from icl import _C

    return torch.from_numpy(_C.ssim(x.contiguous().numpy(), y.contiguous().numpy(), data_range))


def ssim(a: Any, b: Any, data_range: Optional[float] = None, *, backend: Optional[str] = None) -> Any:
    """Mean SSIM of each image pair, exactly skimage's
    ``structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
    data_range=data_range, channel_axis=-1)``.

    ``a``, ``b``: ``[B, H, W, C]`` or ``[H, W, C]`` (C = 1 or 3), same shape and dtype: uint8,
    float16, bfloat16, float32 or float64, finite; H and W at least 11 (the Gaussian window:
    skimage raises for smaller images, so do we). ``data_range`` defaults to 255 for uint8 and
    is required for float images (``ValueError``). Gaussian window sigma 1.5 truncated at 3.5
    sigma (11 taps), K1 = 0.01, K2 = 0.03, population covariance; the SSIM map is averaged
    over the valid positions (5-pixel border dropped) of each channel, then over channels.
    Computed in float32 (uint8, float16, bfloat16, float32) or float64 (float64 input), the
    mean in float64. Returns float64 ``[B]`` (0-d for a single image; numpy when ``a`` is numpy).
    """
    pair = image_pair(a, b, data_range, min_size=WIN_SIZE, why="SSIM's 11-tap Gaussian window; skimage raises too")
    if pair.x.shape[0] == 0:
        return finish(torch.empty(0, dtype=torch.float64, device=pair.x.device), pair)
    out = _OP(pair.x.device.type, pair.x, pair.y, pair.data_range, backend=backend)
    return finish(out, pair)

