"""Argument handling shared by the public kernels: torch/numpy in, the same kind out."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import numpy.typing as npt
import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

NDArray = npt.NDArray[Any]
ArrayLike = Union[torch.Tensor, NDArray]


def as_tensor(x: Any, name: str) -> tuple[torch.Tensor, bool]:
    """``(tensor, was_numpy)``; numpy arrays are wrapped without a copy where possible."""
    if isinstance(x, torch.Tensor):
        return x, False
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x)), True
    raise TypeError(f"{name}: expected a torch.Tensor or numpy.ndarray, got {type(x).__name__}")


def eager_numpy(was_numpy: bool) -> bool:
    """Whether a call may run its op's implementation directly rather than through its
    ``torch.library`` op: numpy in and no graph being traced. The op's dispatch and tensor
    round trip cost about 50 us a call (7% of a 1024^2 nearest_palette)."""
    return was_numpy and not torch.compiler.is_compiling()


def restore_one(x: torch.Tensor, was_numpy: bool) -> ArrayLike:
    """``x``, or ``x`` as a host numpy array when the caller passed numpy."""
    return x.detach().cpu().numpy() if was_numpy else x


def restore(x: Any, was_numpy: bool) -> Any:
    """Return ``x`` as numpy when the caller passed numpy (recursing into tuples/dicts)."""
    if not was_numpy:
        return x
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, tuple):
        return tuple(restore(v, True) for v in x)
    if isinstance(x, list):
        return [restore(v, True) for v in x]
    if isinstance(x, dict):
        return {k: restore(v, True) for k, v in x.items()}
    return x


def batch_images(x: torch.Tensor, name: str, channels: int = 3) -> tuple[torch.Tensor, bool]:
    """Accept ``[H, W, C]`` or ``[B, H, W, C]``; return ``([B, H, W, C], was_single)``."""
    if x.ndim == 3:
        x, single = x.unsqueeze(0), True
    elif x.ndim == 4:
        single = False
    else:
        raise ValueError(f"{name}: expected [B, H, W, {channels}] or [H, W, {channels}], got shape {tuple(x.shape)}")
    if x.shape[-1] != channels:
        raise ValueError(f"{name}: expected {channels} channels in the last dimension, got shape {tuple(x.shape)}")
    return x, single


def check_finite(x: torch.Tensor, name: str) -> None:
    """``ValueError`` naming ``name`` when a float tensor holds NaN or infinity."""
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: contains NaN or infinite values")


def to_uint8(x: torch.Tensor, name: str) -> torch.Tensor:
    """PROTOCOL §1.3: uint8 passes through; float in [0, 1] becomes ``round(255 * clip(x, 0, 1))``.

    Values outside [0, 1] are clipped (the protocol's rule); NaN/inf raise ``ValueError``.
    Never differentiable: the result is computed from ``x.detach()``.
    """
    check_quantisable(x, name)
    if x.dtype == torch.uint8:
        return x
    check_finite(x, name)
    # round half to even matches numpy/torch rounding; float64 stays float64 (float32 would
    # move values within 1e-8 of a .5 level), half inputs are widened to float32 exactly.
    t = torch.float64 if x.dtype == torch.float64 else torch.float32
    return torch.round(x.detach().to(t).clamp(0.0, 1.0) * 255.0).to(torch.uint8)


def check_quantisable(x: torch.Tensor, name: str) -> None:
    """The dtype check of :func:`to_uint8` alone (it needs no data, so it runs while tracing)."""
    if x.dtype != torch.uint8 and x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected uint8 or a float dtype, got {x.dtype}")
