"""Turbo depth encoding (PROTOCOL §1.2) and decoding (§1.3).

``TURBO_TABLE`` (uint8 ``[256, 3]``, read-only) is ``round(255 * turbo(i / 255))`` from
matplotlib's 256-entry turbo colormap, built on first access.
"""

from __future__ import annotations

from typing import Any, Optional, overload

import numpy as np
import torch

from icl.ops._dispatch import native, op
from icl.ops._turbo_table import check_range, depth_of_bin, turbo_table
from icl.ops._tensor import (FLOAT_DTYPES, ArrayLike, NDArray, as_tensor, batch_images, check_quantisable, call_op, custom_op,
                             restore_one, to_uint8)
from icl.ops.palette import nearest_palette_reference

_ENCODE = op("turbo_encode", gpu_module="icl.ops._gpu.turbo")
_BINS = op("turbo_bins", gpu_module="icl.ops._gpu.turbo")
_DECODE = op("turbo_decode", gpu_module="icl.ops._gpu.turbo")


_table = turbo_table
_depth_of_bin = depth_of_bin
_check_range = check_range


def __getattr__(name: str) -> Any:
    if name == "TURBO_TABLE":
        return _table()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def torch_table(device: torch.device) -> torch.Tensor:
    return torch.tensor(_table(), device=device)


@_ENCODE.register("reference")
def _encode_reference(depth: torch.Tensor, d_min: float, d_max: float) -> torch.Tensor:
    valid = depth > 0  # False for NaN
    bins = torch.floor((depth - d_min) / (d_max - d_min) * 256.0).clamp(0, 255)
    bins = torch.where(valid, bins, torch.zeros_like(bins)).to(torch.int64)
    out = torch_table(depth.device)[bins]
    out[~valid] = 0
    return out


@_ENCODE.register("cpu")
def _encode_cpu(depth: torch.Tensor, d_min: float, d_max: float) -> torch.Tensor:
    _C = native()
    flat = depth.reshape(-1).numpy()
    out = _C.turbo_encode(flat, d_min, d_max, _table())
    return torch.from_numpy(out).reshape(*depth.shape, 3)


@_BINS.register("reference")
def _bins_reference(images: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = nearest_palette_reference(images, torch_table(images.device), None)
    return out


@_BINS.register("cpu")
def _bins_cpu(images: torch.Tensor) -> torch.Tensor:
    _C = native()
    return torch.from_numpy(_C.turbo_bins(images.numpy(), _table()))


@_DECODE.register("reference")
def _decode_reference(images: torch.Tensor, d_min: float, d_max: float) -> torch.Tensor:
    depth = torch.from_numpy(_depth_of_bin(d_min, d_max)).to(images.device)
    return depth[_bins_reference(images).to(torch.int64)]


@_DECODE.register("cpu")
def _decode_cpu(images: torch.Tensor, d_min: float, d_max: float) -> torch.Tensor:
    _C = native()
    return torch.from_numpy(_C.turbo_decode(images.numpy(), _table(), _depth_of_bin(d_min, d_max)))


@custom_op("turbo_encode")
def _encode_op(depth: torch.Tensor, d_min: float, d_max: float, backend: Optional[str]) -> torch.Tensor:
    out: torch.Tensor = _ENCODE(depth.device.type, depth, d_min, d_max, backend=backend)
    return out


@_encode_op.register_fake
def _encode_fake(depth: torch.Tensor, d_min: float, d_max: float, backend: Optional[str]) -> torch.Tensor:
    return depth.new_empty((*depth.shape, 3), dtype=torch.uint8)


def _bins_impl(images: torch.Tensor, backend: Optional[str]) -> torch.Tensor:
    x = to_uint8(images, "images").contiguous()
    out: torch.Tensor = _BINS(x.device.type, x, backend=backend)
    return out


_bins_op = custom_op("turbo_bins")(_bins_impl)


@_bins_op.register_fake
def _bins_fake(images: torch.Tensor, backend: Optional[str]) -> torch.Tensor:
    return images.new_empty(images.shape[:3], dtype=torch.int32)


def _decode_impl(images: torch.Tensor, d_min: float, d_max: float, backend: Optional[str]) -> torch.Tensor:
    x = to_uint8(images, "images").contiguous()
    out: torch.Tensor = _DECODE(x.device.type, x, d_min, d_max, backend=backend)
    return out


_decode_op = custom_op("turbo_decode")(_decode_impl)


@_decode_op.register_fake
def _decode_fake(images: torch.Tensor, d_min: float, d_max: float, backend: Optional[str]) -> torch.Tensor:
    return images.new_empty(images.shape[:3], dtype=torch.float32)


@overload
def turbo_encode(depth: NDArray, d_min: float, d_max: float, *, backend: Optional[str] = None) -> NDArray: ...
@overload
def turbo_encode(depth: torch.Tensor, d_min: float, d_max: float, *,
                 backend: Optional[str] = None) -> torch.Tensor: ...
def turbo_encode(depth: ArrayLike, d_min: float, d_max: float, *, backend: Optional[str] = None) -> ArrayLike:
    """Turbo colour per depth value.

    depth: float ``[..., H, W]`` (at least 2 dimensions) in metres. ``bin = clip(floor((d -
    d_min) / (d_max - d_min) * 256), 0, 255)`` in float64, colour ``TURBO_TABLE[bin]``; NaN or
    ``d <= 0`` is invalid and drawn black. Returns uint8 ``[..., H, W, 3]``; numpy in, numpy
    out. Not differentiable (read without gradient); a ``torch.library`` op.
    """
    d, was_numpy = as_tensor(depth, "depth")
    if d.dtype not in FLOAT_DTYPES:
        raise TypeError(f"depth: expected a float dtype, got {d.dtype}")
    if d.ndim < 2:
        raise ValueError(f"depth: expected [..., H, W], got shape {tuple(d.shape)}")
    lo, hi = _check_range(d_min, d_max)
    d = d.detach().to(torch.float64).contiguous()
    return restore_one(call_op("turbo_encode", d, lo, hi, backend), was_numpy)


def _images(images: Any) -> tuple[torch.Tensor, bool, bool]:
    x, was_numpy = as_tensor(images, "images")
    x, single = batch_images(x, "images")
    check_quantisable(x, "images")
    return x.detach(), single, was_numpy


@overload
def turbo_bins(images: NDArray, *, backend: Optional[str] = None) -> NDArray: ...
@overload
def turbo_bins(images: torch.Tensor, *, backend: Optional[str] = None) -> torch.Tensor: ...
def turbo_bins(images: ArrayLike, *, backend: Optional[str] = None) -> ArrayLike:
    """Index of the nearest of the 256 turbo colours per pixel (squared RGB distance, ties to
    the lower bin). images: ``[B, H, W, 3]``/``[H, W, 3]`` uint8 or float in [0, 1]. Returns
    int32 ``[B, H, W]``/``[H, W]``; numpy in, numpy out. Not differentiable."""
    x, single, was_numpy = _images(images)
    out = call_op("turbo_bins", x, backend)
    return restore_one(out[0] if single else out, was_numpy)


@overload
def turbo_decode(images: NDArray, d_min: float, d_max: float, *, backend: Optional[str] = None) -> NDArray: ...
@overload
def turbo_decode(images: torch.Tensor, d_min: float, d_max: float, *,
                 backend: Optional[str] = None) -> torch.Tensor: ...
def turbo_decode(images: ArrayLike, d_min: float, d_max: float, *, backend: Optional[str] = None) -> ArrayLike:
    """Depth per pixel from a turbo image: the nearest turbo bin (as :func:`turbo_bins`) mapped
    to its centre ``d_min + (bin + 0.5) / 256 * (d_max - d_min)``, float32 ``[B, H, W]``/``[H, W]``
    (computed in float64, rounded once); numpy in, numpy out. Not differentiable."""
    lo, hi = _check_range(d_min, d_max)
    x, single, was_numpy = _images(images)
    out = call_op("turbo_decode", x, lo, hi, backend)
    return restore_one(out[0] if single else out, was_numpy)
