"""Argument checks shared by the full-reference image metrics (``psnr``, ``ssim``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any, Optional

import numpy as np
import torch

from icl.ops._tensor import FLOAT_DTYPES, ArrayLike, as_tensor, check_finite, restore_one

PAIR_DTYPES = (torch.uint8, *FLOAT_DTYPES)
CHANNELS = (1, 3)


@dataclass
class ImagePair:
    """Validated inputs: ``x``, ``y`` as ``[B, H, W, C]`` in a compute dtype (uint8, float32 or
    float64; float16/bfloat16 are widened to float32 exactly, keeping autograd history), plus
    how to shape the result. Finiteness is checked by the ops themselves (:func:`check_pair`):
    it needs the data, which a ``torch.compile`` trace does not have."""

    x: torch.Tensor
    y: torch.Tensor
    data_range: float
    single: bool
    was_numpy: bool


def _data_range(value: Optional[Any], dtype: torch.dtype) -> float:
    if value is None:
        if dtype == torch.uint8:
            return 255.0
        raise ValueError(
            f"data_range: required for floating-point images ({dtype}); pass the distance between "
            "the minimum and maximum possible values, e.g. 1.0 for images in [0, 1]"
        )
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"data_range: expected a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"data_range: expected a positive finite number, got {value}")
    return value


def image_pair(a: Any, b: Any, data_range: Optional[Any], min_size: int = 1, why: str = "") -> ImagePair:
    """Check ``a`` and ``b`` (same shape ``[B, H, W, C]`` or ``[H, W, C]``, C in {1, 3}, same
    dtype) and resolve ``data_range`` (default 255 for uint8, required for floats)."""
    x, was_numpy = as_tensor(a, "a")
    y, _ = as_tensor(b, "b")
    for name, t in (("a", x), ("b", y)):
        if t.dtype not in PAIR_DTYPES:
            raise TypeError(f"{name}: expected uint8, float16, bfloat16, float32 or float64, got {t.dtype}")
    if x.dtype != y.dtype:
        raise TypeError(f"a and b must have the same dtype, got {x.dtype} and {y.dtype}")
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.device != y.device:
        raise ValueError(f"a and b must be on the same device, got {x.device} and {y.device}")
    if x.ndim not in (3, 4):
        raise ValueError(
            f"a: expected [B, H, W, C] or [H, W, C] with C in {CHANNELS}, got shape {tuple(x.shape)} "
            "(add a trailing channel axis to grey images)"
        )
    if x.shape[-1] not in CHANNELS:
        raise ValueError(f"a: expected C in {CHANNELS} channels in the last dimension, got shape {tuple(x.shape)}")
    h, w = x.shape[-3], x.shape[-2]
    if h < min_size or w < min_size:
        reason = f" ({why})" if why else ""
        raise ValueError(f"a: images must be at least {min_size}x{min_size} (H x W){reason}, got {h}x{w}")
    dr = _data_range(data_range, x.dtype)
    single = x.ndim == 3
    if single:
        x, y = x.unsqueeze(0), y.unsqueeze(0)
    if x.dtype in (torch.float16, torch.bfloat16):
        x, y = x.float(), y.float()
    return ImagePair(x, y, dr, single, was_numpy)


def check_pair(x: torch.Tensor, y: torch.Tensor) -> None:
    """The data checks of :func:`image_pair`, run inside the ops."""
    check_finite(x, "a")
    check_finite(y, "b")


def finish(scores: torch.Tensor, pair: ImagePair) -> ArrayLike:
    """``[B]`` float64 scores, or a 0-d value for a single image; numpy when ``a`` was numpy."""
    out = scores[0] if pair.single else scores
    return restore_one(out, pair.was_numpy)
