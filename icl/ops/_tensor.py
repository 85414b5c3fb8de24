"""Argument handling shared by the public kernels: torch/numpy in, the same kind out."""

from __future__ import annotations

from typing import Any, Callable, Union

import numpy as np
import numpy.typing as npt
import torch
from torch._library.custom_ops import CustomOpDef
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

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


_IMPLS: dict[str, Callable[..., Any]] = {}  # op name -> the function its torch.library op wraps


def custom_op(name: str) -> Callable[[Callable[..., Any]], CustomOpDef]:
    """``torch.library.custom_op("icl::<name>")`` that also keeps the wrapped function, which
    :func:`call_op` runs directly when no graph needs the op."""

    def deco(fn: Callable[..., Any]) -> CustomOpDef:
        _IMPLS[name] = fn
        return torch.library.custom_op(f"icl::{name}", mutates_args=())(fn)

    return deco


def _direct(args: tuple[Any, ...]) -> bool:
    # Through torch.ops only while tracing, under a dispatch mode (fake tensors), for tensor
    # subclasses, and when autograd must record the op; everything else runs the function.
    if torch.compiler.is_compiling() or _current_dispatch_mode() is not None:
        return False
    grad = torch.is_grad_enabled()
    for a in args:
        if isinstance(a, torch.Tensor) and (type(a) is not torch.Tensor or (grad and a.requires_grad)):
            return False
    return True


def call_op(name: str, *args: Any) -> Any:
    """Run the op ``icl::<name>`` on ``args``: its function directly in eager mode, through
    ``torch.ops.icl.<name>`` when a graph needs it (tracing, fake tensors, autograd). The first
    call through ``torch.ops`` imports ``torch._dynamo`` (2-4 s a process) and each costs tens of
    microseconds; the function itself is what the op runs, so the results are the same."""
    if _direct(args):
        return _IMPLS[name](*args)
    return getattr(torch.ops.icl, name)(*args)


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
