"""Approximate nearest-neighbour field between two images (PatchMatch, Barnes et al. 2009).

The search is a deterministic, parallel form of PatchMatch, identical on every backend:

1. Start: ``init`` when given, else a uniform random source position per target pixel.
2. Each iteration: propagation passes, four in the first iteration (jump flooding with steps
   8, 4, 2, 1), one with step 1 afterwards. A pass reads a snapshot of the field; each target pixel ``p`` tries, in the order left, right, up, down,
   its neighbour ``q = p + s * n`` (for the unit offset ``n``) and the candidate
   ``field[q] - s * n`` (skipped outside either image or when equal to ``p``'s match).
3. Then a random search: radii ``max(Hs, Ws)``, halved (integer division) down to 1; at radius
   ``R`` the candidate is uniform in the window ``[match - R, match + R]`` clipped to the source.
   Random-search candidates pay the coherence factor ``1 + kappa`` (Hertzmann et al.'s
   coherence: a jump away from the propagated, coherent match must be that much better).

A candidate replaces the match only when its cost is strictly lower. The cost of a match is
its SSD times the factor it was accepted with. Random draws are a counter-based 32-bit hash
of ``(seed, stream, pixel)`` (see :func:`_draw`), so results do not depend on threads.
Patch distances are sums of squared differences over ``patch_size``-square patches centred on
the two pixels, borders replicated: exact integers for uint8 features, float64 sums otherwise.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional

import numpy as np
import torch

from icl.ops._dispatch import native, op
from icl.ops._tensor import as_tensor, restore

_OP = op("patch_match")

FIRST_STEPS = (8, 4, 2, 1)
LATER_STEPS = (1,)
NEIGHBOURS = ((0, -1), (0, 1), (-1, 0), (1, 0))  # (dy, dx): left, right, up, down
_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    # (x * c) mod 2^32 without int64 overflow: split x into 16-bit halves.
    lo = (x & 0xFFFF) * c
    hi = ((x >> 16) * c) & 0xFFFF
    return (lo + (hi << 16)) & _M32


def _hash32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _key(seed: int) -> int:
    lo, hi = torch.tensor([seed & _M32]), torch.tensor([seed >> 32])
    return int(_hash32(lo ^ _hash32(hi)))


def _draw(key: int, stream: int, pixel: torch.Tensor) -> torch.Tensor:
    s = torch.tensor(stream & _M32, dtype=torch.int64)
    return _hash32(key ^ _hash32(s ^ _hash32(pixel)))


def _uniform(u: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    return lo + u % (hi - lo + 1)


class _Patches:
    """All patches of an edge-padded image as rows ``[H * W, P * P * C]``."""

    def __init__(self, image: torch.Tensor, patch: int, dtype: torch.dtype):
        r = patch // 2
        h, w, c = image.shape
        ys = torch.arange(-r, h + r).clamp(0, h - 1)
        xs = torch.arange(-r, w + r).clamp(0, w - 1)
        padded = image.to(dtype)[ys][:, xs]  # [h + 2r, w + 2r, c]
        win = padded.unfold(0, patch, 1).unfold(1, patch, 1)  # [h, w, c, P, P]
        self.rows = win.permute(0, 1, 3, 4, 2).reshape(h * w, patch * patch * c)
        self.w = w


@_OP.register("reference")
def _reference(source: torch.Tensor, target: torch.Tensor, init: Optional[torch.Tensor], patch: int,
               iterations: int, kappa: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = torch.int64 if source.dtype == torch.uint8 else torch.float64
    src, tgt = _Patches(source, patch, dtype), _Patches(target, patch, dtype)
    hs, ws = source.shape[:2]
    ht, wt = target.shape[:2]
    n = ht * wt
    pix = torch.arange(n, dtype=torch.int64)
    py, px = pix // wt, pix % wt
    key = _key(seed)

    def ssd(sy: torch.Tensor, sx: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        d = tgt.rows[rows] - src.rows[sy * ws + sx]
        return (d * d).sum(1).to(torch.float64)

    if init is not None:
        my, mx = init[..., 0].reshape(-1).long(), init[..., 1].reshape(-1).long()
    else:
        zero = torch.zeros_like(pix)
        my = _uniform(_draw(key, 0, pix), zero, zero + hs - 1)
        mx = _uniform(_draw(key, 1, pix), zero, zero + ws - 1)
    dist = ssd(my, mx, pix)
    eff = dist.clone()
    coherence = 1.0 + kappa

    def offer(cy: torch.Tensor, cx: torch.Tensor, ok: torch.Tensor, factor: float) -> None:
        nonlocal dist, eff
        ok = ok & ~((cy == my) & (cx == mx))
        rows = ok.nonzero().squeeze(1)
        if rows.numel() == 0:
            return
        d = ssd(cy[rows], cx[rows], rows)
        cost = d * factor
        win = cost < eff[rows]
        rows, d, cost = rows[win], d[win], cost[win]
        my[rows], mx[rows] = cy[rows], cx[rows]
        dist[rows], eff[rows] = d, cost

    for it in range(iterations):
        for step in FIRST_STEPS if it == 0 else LATER_STEPS:
            snap_y, snap_x = my.clone(), mx.clone()
            for dy, dx in NEIGHBOURS:
                qy, qx = py + dy * step, px + dx * step
                inside = (qy >= 0) & (qy < ht) & (qx >= 0) & (qx < wt)
                q = (qy.clamp(0, ht - 1) * wt + qx.clamp(0, wt - 1))
                cy, cx = snap_y[q] - dy * step, snap_x[q] - dx * step
                ok = inside & (cy >= 0) & (cy < hs) & (cx >= 0) & (cx < ws)
                offer(cy, cx, ok, 1.0)
        rad, i = max(hs, ws), 0
        while rad >= 1:
            stream = (it + 1) * 128 + i * 2
            cy = _uniform(_draw(key, stream, pix), (my - rad).clamp(min=0), (my + rad).clamp(max=hs - 1))
            cx = _uniform(_draw(key, stream + 1, pix), (mx - rad).clamp(min=0), (mx + rad).clamp(max=ws - 1))
            offer(cy, cx, torch.ones(n, dtype=torch.bool), coherence)
            rad //= 2
            i += 1
    nnf = torch.stack([my, mx], 1).to(torch.int32).reshape(ht, wt, 2)
    return nnf, dist.reshape(ht, wt)


@_OP.register("cpu")
def _cpu(source: torch.Tensor, target: torch.Tensor, init: Optional[torch.Tensor], patch: int,
         iterations: int, kappa: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    _C = native()
    has_init = init is not None
    init_np = init.numpy() if init is not None else np.zeros((1, 1, 1), np.int32)
    nnf, dist = _C.patch_match(source.contiguous().numpy(), target.contiguous().numpy(), init_np, has_init,
                               patch, iterations, kappa, seed)
    return torch.from_numpy(nnf), torch.from_numpy(dist)


def _image(x: Any, name: str) -> tuple[torch.Tensor, bool]:
    t, was_numpy = as_tensor(x, name)
    if t.ndim == 2:
        t = t.unsqueeze(-1)
    if t.ndim != 3 or t.shape[0] < 1 or t.shape[1] < 1 or t.shape[2] < 1:
        raise ValueError(f"{name}: expected a non-empty [H, W, C] or [H, W] image, got shape {tuple(t.shape)}")
    if t.dtype != torch.uint8:
        if not t.is_floating_point():
            raise TypeError(f"{name}: expected uint8 or a float dtype, got {t.dtype}")
        t = t.to(torch.float32)
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name}: contains NaN or infinite values")
    return t.cpu(), was_numpy


def _int_arg(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    return int(value)


def patch_match(source: Any, target: Any, *, patch_size: int = 7, iterations: int = 5,
                init: Any = None, kappa: float = 0.0, seed: int = 0,
                backend: Optional[str] = None) -> tuple[Any, Any]:
    """Nearest-neighbour field from ``target`` patches to ``source`` patches (module docstring).

    ``source`` ``[Hs, Ws, C]`` and ``target`` ``[Ht, Wt, C]`` (or ``[H, W]``): the same C, both
    uint8 (integer distances, exact) or both float (computed on float32 values, summed in
    float64). ``init``: optional int ``[Ht, Wt, 2]`` starting field of ``(y, x)`` source
    positions. ``patch_size``: odd, >= 1. ``kappa`` >= 0: coherence (0 is plain PatchMatch).
    ``seed``: integer in ``[0, 2**64)`` (derive it with ``icl.data.seeds.derive_seed``).
    Returns ``(nnf, ssd)``: int32 ``[Ht, Wt, 2]`` source ``(y, x)`` per target pixel and
    float64 ``[Ht, Wt]`` patch SSD of each match; numpy when ``target`` is numpy. CUDA inputs
    are searched on the host.
    """
    s, _ = _image(source, "source")
    t, was_numpy = _image(target, "target")
    if s.dtype != t.dtype:
        raise TypeError(f"source and target must both be uint8 or both float, got {s.dtype} and {t.dtype}")
    if s.shape[2] != t.shape[2]:
        raise ValueError(f"source and target must have the same channels, got {s.shape[2]} and {t.shape[2]}")
    patch = _int_arg(patch_size, "patch_size", 1)
    if patch % 2 == 0:
        raise ValueError(f"patch_size: expected an odd integer, got {patch}")
    if patch * s.shape[2] >= 33025:
        raise ValueError(f"patch_size * channels must be below 33025, got {patch} * {s.shape[2]}")
    iters = _int_arg(iterations, "iterations", 0)
    seed = _int_arg(seed, "seed", 0)
    if seed >= 1 << 64:
        raise ValueError(f"seed: expected an integer below 2**64, got {seed}")
    if isinstance(kappa, bool) or not isinstance(kappa, numbers.Real) or not np.isfinite(kappa) or kappa < 0:
        raise ValueError(f"kappa: expected a finite number >= 0, got {kappa!r}")
    init_t = None
    if init is not None:
        init_t, _ = as_tensor(init, "init")
        if init_t.dtype.is_floating_point or init_t.dtype == torch.bool:
            raise TypeError(f"init: expected an integer dtype, got {init_t.dtype}")
        if tuple(init_t.shape) != (t.shape[0], t.shape[1], 2):
            raise ValueError(f"init: expected shape {(t.shape[0], t.shape[1], 2)}, got {tuple(init_t.shape)}")
        init_t = init_t.cpu().to(torch.int32).contiguous()
        ys, xs = init_t[..., 0], init_t[..., 1]
        if bool((ys < 0).any() | (ys >= s.shape[0]).any() | (xs < 0).any() | (xs >= s.shape[1]).any()):
            raise ValueError(f"init: positions must lie inside the source image of size {tuple(s.shape[:2])}")
    out = _OP("cpu", s, t, init_t, patch, iters, float(kappa), seed, backend=backend)
    return restore(out, was_numpy)
