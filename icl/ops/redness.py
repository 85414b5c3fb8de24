"""Keypoint redness (PROTOCOL §1.3): ``S = clip(R - max(G, B), 0, 1)`` on [0, 1] channels and
the mask ``S > threshold``; the keypoint decoder labels the mask and takes each component's
max-S pixel."""

from __future__ import annotations

import math
import numbers
from typing import Optional, overload

import torch

from icl.ops._dispatch import op
from icl.ops._numpy_core import redness_numpy
from icl.ops._tensor import (ArrayLike, NDArray, as_tensor, batch_images, call_op, check_quantisable, custom_op,
                             restore_one, to_uint8)

_OP = op("redness", gpu_module="icl.ops._gpu.redness")


@_OP.register("reference")
def _reference(images: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    x = images.to(torch.float32) / 255.0
    s = (x[..., 0] - torch.maximum(x[..., 1], x[..., 2])).clamp(0.0, 1.0)
    return s, s > threshold


@_OP.register("cpu")
def _cpu(images: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    # the reference's operations in numpy (no native kernel: a few elementwise passes), which
    # are cheaper than torch's per-op dispatch on the small crops decoders pass
    s, mask = redness_numpy(images.numpy(), threshold)
    return torch.from_numpy(s), torch.from_numpy(mask)


@custom_op("redness")
def _redness_op(images: torch.Tensor, threshold: float, backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    x = to_uint8(images, "images").contiguous()
    out: tuple[torch.Tensor, torch.Tensor] = _OP(x.device.type, x, threshold, backend=backend)
    return out


@_redness_op.register_fake
def _redness_fake(images: torch.Tensor, threshold: float, backend: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    shape = images.shape[:3]
    return images.new_empty(shape, dtype=torch.float32), images.new_empty(shape, dtype=torch.bool)


@overload
def redness(images: NDArray, threshold: float = 0.5, *, backend: Optional[str] = None) -> tuple[NDArray, NDArray]: ...
@overload
def redness(images: torch.Tensor, threshold: float = 0.5, *,
            backend: Optional[str] = None) -> tuple[torch.Tensor, torch.Tensor]: ...
def redness(images: ArrayLike, threshold: float = 0.5, *,
            backend: Optional[str] = None) -> tuple[ArrayLike, ArrayLike]:
    """The torch front end of ``icl.ops.redness`` (documented there): tensors, and the numpy calls
    ``icl.ops._host`` hands over."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        raise TypeError(f"threshold: expected a number, got {type(threshold).__name__}")
    if not math.isfinite(threshold):
        raise ValueError(f"threshold: expected a finite number, got {threshold!r}")
    x, was_numpy = as_tensor(images, "images")
    x, single = batch_images(x, "images")
    check_quantisable(x, "images")
    s, mask = call_op("redness", x.detach(), float(threshold), backend)
    if single:
        s, mask = s[0], mask[0]
    return restore_one(s, was_numpy), restore_one(mask, was_numpy)
