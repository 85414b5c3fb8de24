"""LPIPS v0.1 (Zhang et al. 2018): learned perceptual distance, AlexNet or VGG16 trunk.

Our own torch implementation of the official metric: scaling layer, trunk features at the
official layers, channel-wise unit normalisation, squared difference, 1x1 linear heads,
spatial average, summed over the five layers. Weights: see :mod:`icl.ops._lpips_weights`.
``python -m icl.ops.lpips --prepare`` converts the weights once into the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence, overload

import numpy as np
import torch

from icl._parse import env_number
from icl.ops import _lpips_nets as nets
from icl.ops._autograd import recording
from icl.ops._dispatch import record_backend, backend_status, native, op
from icl.ops._lpips_weights import (LPIPSWeights, LPIPSWeightsNotFound, PathLike, cache_dir, find, host_params,
                                    lpips_weights)
from icl.ops._tensor import ArrayLike, NDArray, as_tensor, check_finite, call_op, custom_op, restore_one

__all__ = ["lpips", "lpips_each", "lpips_weights", "LPIPSWeights", "LPIPSWeightsNotFound"]

_OP = op("lpips")
_HALF = (torch.float16, torch.bfloat16)
# pairs per trunk pass: about this many pair-pixels (CPU memory stays near 1-2 GB for VGG)
_PAIR_PIXELS = {"cpu": 1 << 20, "cuda": 1 << 24}

_lock = threading.Lock()
_dev: dict[tuple[str, str, str, torch.dtype], dict[str, torch.Tensor]] = {}  # (net, source, device, dtype)


def _params(net: str, weights: Optional[str], device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    host, source = host_params(net, weights)
    head = torch.float64 if dtype == torch.float64 else torch.float32
    with _lock:
        dkey = (net, source, str(device), dtype)
        if dkey not in _dev:
            # trunk in the compute dtype; linear heads in float32 (they act on float32 diffs)
            _dev[dkey] = {
                name: torch.from_numpy(a).to(device=device, dtype=head if name.startswith("lin") else dtype)
                for name, a in host.items()
            }
        return _dev[dkey]


def _scaled(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[N, 3, H, W]`` uint8 or float in [0, 1] -> LPIPS scaling layer output in ``dtype``."""
    t = torch.float64 if dtype == torch.float64 else torch.float32
    x = x.to(t) * (2.0 / 255.0) - 1.0 if x.dtype == torch.uint8 else x.to(t) * 2.0 - 1.0
    shift = torch.tensor(nets.SHIFT, device=x.device, dtype=t).view(1, 3, 1, 1)
    scale = torch.tensor(nets.SCALE, device=x.device, dtype=t).view(1, 3, 1, 1)
    # channels-last memory: oneDNN (CPU) and tensor cores (GPU) run these convolutions faster
    return ((x - shift) / scale).to(dtype).contiguous(memory_format=torch.channels_last)


def _distance(a: torch.Tensor, b: torch.Tensor, params: dict[str, torch.Tensor], net: str,
              dtype: torch.dtype, batch_size: int) -> torch.Tensor:
    out = [a.new_zeros(0, dtype=torch.float64 if dtype == torch.float64 else torch.float32)]
    for s in range(0, a.shape[0], batch_size):
        out.append(nets.distance(_scaled(a[s:s + batch_size], dtype), _scaled(b[s:s + batch_size], dtype), params, net))
    return torch.cat(out)


@_OP.register("reference")
def _reference(a: torch.Tensor, b: torch.Tensor, params: dict[str, torch.Tensor], net: str,
               dtype: torch.dtype, batch_size: int) -> torch.Tensor:
    with torch.no_grad():
        return _distance(a, b, params, net, dtype, batch_size)


def _check_range(t: torch.Tensor, name: str) -> None:
    """Float images must be finite and in [0, 1] (a data check, run inside the op)."""
    if t.is_floating_point():
        check_finite(t, name)
        if t.numel() and (float(t.min()) < 0.0 or float(t.max()) > 1.0):
            raise ValueError(f"{name}: float images must lie in [0, 1] (got [{float(t.min()):g}, {float(t.max()):g}]); "
                             "clip them or pass uint8")


@custom_op("lpips")
def _lpips_op(a: torch.Tensor, b: torch.Tensor, net: str, weights: Optional[str], dtype: torch.dtype,
              batch_size: int, backend: Optional[str]) -> torch.Tensor:
    _check_range(a, "a")
    _check_range(b, "b")
    params = _params(net, weights, a.device, dtype)
    out: torch.Tensor = _OP(a.device.type, a.detach(), b.detach(), params, net, dtype, batch_size, backend=backend)
    return out


@_lpips_op.register_fake
def _lpips_fake(a: torch.Tensor, b: torch.Tensor, net: str, weights: Optional[str], dtype: torch.dtype,
                batch_size: int, backend: Optional[str]) -> torch.Tensor:
    return a.new_empty((a.shape[0],), dtype=torch.float64 if dtype == torch.float64 else torch.float32)


@custom_op("lpips_backward")
def _lpips_backward_op(grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor, net: str, weights: Optional[str],
                       dtype: torch.dtype, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    # the network is pure torch: recompute it with autograd recording and differentiate
    params = _params(net, weights, a.device, dtype)
    with recording():
        x = a.detach().requires_grad_()
        y = b.detach().requires_grad_()
        gx, gy = torch.autograd.grad(_distance(x, y, params, net, dtype, batch_size), (x, y), grad)
    return gx, gy


@_lpips_backward_op.register_fake
def _lpips_backward_fake(grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor, net: str, weights: Optional[str],
                         dtype: torch.dtype, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(a), torch.empty_like(b)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    a, b, net, weights, dtype, batch_size, _ = inputs
    ctx.save_for_backward(a, b)
    ctx.args = (net, weights, dtype, batch_size)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], ...]:
    a, b = ctx.saved_tensors
    gx, gy = call_op("lpips_backward", grad, a, b, *ctx.args)
    return (gx if ctx.needs_input_grad[0] else None), (gy if ctx.needs_input_grad[1] else None), *([None] * 5)


_lpips_op.register_autograd(_backward, setup_context=_setup_context)


def _nchw(x: torch.Tensor, name: str) -> tuple[torch.Tensor, bool]:
    if x.ndim not in (3, 4):
        raise ValueError(f"{name}: expected [B, H, W, 3], [B, 3, H, W], [H, W, 3] or [3, H, W], got shape {tuple(x.shape)}")
    single = x.ndim == 3
    x = x.unsqueeze(0) if single else x
    if x.shape[-1] == 3:  # channels-last wins when both axes have size 3
        return x.permute(0, 3, 1, 2), single
    if x.shape[1] == 3:
        return x, single
    raise ValueError(f"{name}: expected 3 channels in the last axis (or in axis -3), got shape {tuple(x.shape)}")


def _prepare(x: Any, name: str) -> tuple[torch.Tensor, bool, bool]:
    t, was_numpy = as_tensor(x, name)
    if t.dtype != torch.uint8 and not t.is_floating_point():
        raise TypeError(f"{name}: expected uint8 or a float dtype, got {t.dtype}")
    t, single = _nchw(t, name)
    return t, was_numpy, single


@overload
def lpips(a: NDArray, b: NDArray, net: str = "alex", weights: Optional[PathLike] = None, *,
          dtype: Optional[torch.dtype] = None, batch_size: Optional[int] = None,
          backend: Optional[str] = None) -> NDArray: ...
@overload
def lpips(a: torch.Tensor, b: torch.Tensor, net: str = "alex", weights: Optional[PathLike] = None, *,
          dtype: Optional[torch.dtype] = None, batch_size: Optional[int] = None,
          backend: Optional[str] = None) -> torch.Tensor: ...
def lpips(a: ArrayLike, b: ArrayLike, net: str = "alex", weights: Optional[PathLike] = None, *,
          dtype: Optional[torch.dtype] = None, batch_size: Optional[int] = None,
          backend: Optional[str] = None) -> ArrayLike:
    """LPIPS v0.1 distance per image pair -> float32 ``[B]`` (a 0-d value for single images).

    ``a``, ``b``: torch tensors or numpy arrays (numpy in -> numpy out) of the same shape,
    ``[B, H, W, 3]`` (icl's channels-last layout) or ``[B, 3, H, W]``, or a single image
    ``[H, W, 3]`` / ``[3, H, W]``. Layout rule: if the last axis has size 3 the input is
    channels-last (even if axis -3 has size 3 too); otherwise axis -3 must have size 3.
    dtype uint8 (mapped ``x / 255 * 2 - 1``) or float in [0, 1] (mapped ``2x - 1``, no
    quantisation; values outside [0, 1] raise). H and W must be >= 31 for "alex", >= 16 for
    "vgg". Lower is more similar; identical images give 0.

    ``net``: "alex" (the protocol's metric) or "vgg". ``weights``: a path overriding the
    search (see :mod:`icl.ops._lpips_weights`); raises :class:`LPIPSWeightsNotFound` listing
    every place looked at when none exist. ``dtype``: the trunk's compute dtype; default
    float16/bfloat16 when an input has that dtype, else float32 (half precision is for GPUs;
    on CPU it works where torch implements it, slowly), or float64 (everything in float64,
    a float64 result: for gradient checks). Normalisation, heads and the spatial average run
    in float32 otherwise. ``batch_size``: pairs per trunk pass (default: about 1M pair-pixels
    on CPU, 16M on CUDA). Every weights source is digest-checked; :func:`lpips_weights` says
    which weights are used.

    Differentiable in ``a`` and ``b`` for float inputs (the backward recomputes the network
    with autograd); a ``torch.library`` op (``torch.ops.icl.lpips``).
    """
    if net not in nets.STEPS:
        raise ValueError(f"net: expected 'alex' or 'vgg', got {net!r}")
    ta, was_numpy, single = _prepare(a, "a")
    tb, _, _ = _prepare(b, "b")
    if ta.shape != tb.shape:
        raise ValueError(f"a and b must have the same shape, got {tuple(ta.shape)} and {tuple(tb.shape)} (as [B, 3, H, W])")
    if ta.device != tb.device:
        raise ValueError(f"a and b must be on the same device, got {ta.device} and {tb.device}")
    h, w = ta.shape[2:]
    if min(h, w) < nets.MIN_SIZE[net]:
        raise ValueError(f"a, b: LPIPS-{net} needs H and W >= {nets.MIN_SIZE[net]}, got {h}x{w}")
    if dtype is None:
        halves = {t.dtype for t in (ta, tb)} & set(_HALF)
        if len(halves) > 1:
            raise TypeError("a is float16 and b bfloat16 (or the reverse); pass dtype= to choose the compute dtype")
        dtype = halves.pop() if halves else torch.float32
    elif dtype not in (torch.float32, torch.float64, *_HALF):
        raise TypeError(f"dtype: expected torch.float32, float64, float16 or bfloat16, got {dtype}")
    if batch_size is None:
        batch_size = max(1, _PAIR_PIXELS.get(ta.device.type, 1 << 20) // (h * w))
    elif batch_size < 1:
        raise ValueError(f"batch_size: expected >= 1, got {batch_size}")
    path = None if weights is None else os.fspath(weights)
    out = call_op("lpips", ta, tb, net, path if isinstance(path, str) else None, dtype, batch_size, backend)
    return restore_one(out[0] if single else out, was_numpy)


# unit features of single images by content, most recent last (see lpips_each)
_features: OrderedDict[tuple[Any, ...], list[torch.Tensor]] = OrderedDict()
_feature_bytes = [0]


def _cache_limit() -> int:
    megabytes: int = env_number("ICL_LPIPS_CACHE_MB", 512)
    return megabytes << 20


def _trunk_batch(height: int, width: int) -> int:
    """Images per trunk pass for this image size: a function of the size alone, so an image's
    features never depend on which others share its pass (see :func:`_units_of`)."""
    return max(1, min(8, (1 << 19) // (height * width)))


@contextmanager
def _adaptive_threads() -> Iterator[None]:
    # On a busy machine torch's intra-op team waits for descheduled threads at every small
    # convolution (measured 5-10x slower with 2 threads than with 1 at load 8 on 2 cores): use
    # the native thread policy's count of idle cores, when the native module is there.
    ok, _ = backend_status("cpu")
    before = torch.get_num_threads()
    team = min(before, max(1, int(native().team_size()))) if ok else before
    if team != before:
        torch.set_num_threads(team)
    try:
        yield
    finally:
        if team != before:
            torch.set_num_threads(before)


def _units_of(images: list[np.ndarray], net: str, params: dict[str, torch.Tensor]) -> list[list[torch.Tensor]]:
    """Unit features of uint8 ``[H, W, 3]`` images of one shape, in passes of exactly
    :func:`_trunk_batch` images (the last one padded with zeros). oneDNN picks its convolution
    algorithm by the batch size, so batch 1 and batch 8 differ in the last bits, but within a
    fixed batch size each image's result does not depend on its position or its companions
    (tests/ops/test_lpips.py checks this to 0)."""
    h, w, _ = images[0].shape
    size = _trunk_batch(h, w)
    out: list[list[torch.Tensor]] = []
    with torch.inference_mode(), _adaptive_threads():
        for s in range(0, len(images), size):
            chunk = [torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1) for x in images[s:s + size]]
            chunk += [torch.zeros_like(chunk[0])] * (size - len(chunk))
            units = nets.unit_taps(nets.features(_scaled(torch.stack(chunk), torch.float32), params, net),
                                   torch.float32)
            out += [[u[i:i + 1].clone() for u in units] for i in range(min(size, len(images) - s))]
    return out


def _cached_units(images: Sequence[np.ndarray], net: str, weights: Optional[str],
                  params: dict[str, torch.Tensor]) -> list[list[torch.Tensor]]:
    """Unit features of each image, from the content-keyed cache or computed (new images of
    one shape together, see :func:`_units_of`)."""
    keys = [(net, weights, x.shape, hashlib.blake2b(np.ascontiguousarray(x).data, digest_size=20).digest())
            for x in images]
    found: dict[tuple[Any, ...], list[torch.Tensor]] = {}
    with _lock:
        for k in keys:
            if k in _features:
                _features.move_to_end(k)
                found[k] = _features[k]
    todo: dict[tuple[Any, ...], np.ndarray] = {}
    for k, x in zip(keys, images):
        if k not in found:
            todo.setdefault(k, x)
    by_shape: dict[tuple[int, ...], list[tuple[Any, ...]]] = {}
    for k, x in todo.items():
        by_shape.setdefault(x.shape, []).append(k)
    for group in by_shape.values():
        for k, units in zip(group, _units_of([todo[k] for k in group], net, params)):
            found[k] = units
    with _lock:
        for k in todo:
            if k not in _features:
                _features[k] = found[k]
                _feature_bytes[0] += sum(u.numel() * u.element_size() for u in found[k])
        while _feature_bytes[0] > _cache_limit() and _features:
            _, old = _features.popitem(last=False)
            _feature_bytes[0] -= sum(u.numel() * u.element_size() for u in old)
    return [found[k] for k in keys]


def lpips_each(a: Sequence[np.ndarray], b: Sequence[np.ndarray], net: str = "alex",
               weights: Optional[PathLike] = None) -> NDArray:
    """LPIPS of each pair ``(a[i], b[i])`` of uint8 ``[H, W, 3]`` numpy images -> float32 ``[N]``.

    Images go through the trunk in passes of a fixed size per image shape, where an image's
    features do not depend on its companions (tested to 0), so a score never depends on which
    other pairs were scored with it (``--limit``, sharding, batch size); their unit features
    are kept in memory, keyed by content (``ICL_LPIPS_CACHE_MB``, default 512, least recently
    used first out): a target scored against several models' predictions, or an image that
    comes back as a prediction, runs through the trunk once. The trunk and heads run in float32
    on the CPU, as :func:`lpips` with ``dtype=torch.float32``; scores agree with it to float32
    rounding (its trunk sees the pair as a batch of two). Torch threads follow the native thread
    policy (idle cores) during the call. Raises
    :class:`LPIPSWeightsNotFound` like :func:`lpips`.
    """
    if net not in nets.STEPS:
        raise ValueError(f"net: expected 'alex' or 'vgg', got {net!r}")
    if len(a) != len(b):
        raise ValueError(f"a and b: expected as many images, got {len(a)} and {len(b)}")
    path = None if weights is None else os.fspath(weights)
    key_path = path if isinstance(path, str) else None
    params = _params(net, key_path, torch.device("cpu"), torch.float32)
    for i, (x, y) in enumerate(zip(a, b)):
        for name, img in (("a", x), ("b", y)):
            if not isinstance(img, np.ndarray) or img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
                raise TypeError(f"{name}[{i}]: expected a uint8 numpy image [H, W, 3], got "
                                f"{type(img).__name__} {getattr(img, 'dtype', '')} {getattr(img, 'shape', '')}")
            if min(img.shape[:2]) < nets.MIN_SIZE[net]:
                raise ValueError(f"{name}[{i}]: LPIPS-{net} needs H and W >= {nets.MIN_SIZE[net]}, got "
                                 f"{img.shape[0]}x{img.shape[1]}")
        if x.shape != y.shape:
            raise ValueError(f"a[{i}] and b[{i}] must have the same shape, got {x.shape} and {y.shape}")
    units = _cached_units([*a, *b], net, key_path, params)
    out = np.empty(len(a), np.float32)
    with torch.inference_mode():
        for i in range(len(a)):
            out[i] = float(nets.head_distance(units[i], units[len(a) + i], params)[0])
    record_backend("lpips", "reference")
    return out


def warm_up(net: str = "alex") -> None:
    """Torch, the weights of ``net`` and the convolution kernels loaded, as the first
    :func:`lpips_each` call would (the LPIPS helper process runs this when it starts,
    :mod:`icl.helpers`); raises :class:`LPIPSWeightsNotFound` without weights."""
    params = _params(net, None, torch.device("cpu"), torch.float32)
    with torch.inference_mode():
        nets.features(torch.zeros(1, 3, nets.MIN_SIZE[net], nets.MIN_SIZE[net]), params, net)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl.ops.lpips", description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", action="store_true",
                        help=f"find and verify the weights of both nets, converting them once into {cache_dir()}")
    parser.add_argument("--weights", default=None, help="a weights path to convert from (default: the search)")
    args = parser.parse_args(argv)
    if not args.prepare:
        parser.print_help()
        return 2
    status = 0
    for net in nets.STEPS:
        try:
            _, source = find(net, args.weights)
            print(f"lpips {net}: {source}")
        except LPIPSWeightsNotFound as exc:
            print(exc)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
