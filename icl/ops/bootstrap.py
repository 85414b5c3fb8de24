"""Bootstrap totals from a counter-based index stream: the native kernel (``csrc/bootstrap.cpp``)
and its numpy reference, equal bit for bit. numpy only (no torch: ``icl.report.stats`` uses it).

The stream: draw ``j`` of resample ``r`` over ``K`` rows takes row
``floor(h * K / 2^64)`` with ``h = mix(mix(seed + G) + (r * K + j + 1) * G)``, where ``mix`` is
SplitMix64's finaliser and ``G = 0x9e3779b97f4a7c15`` its increment (Steele, Lea & Flood 2014),
and the product is Lemire's multiply-shift (2019) computed exactly from 32-bit halves. It is
not exactly uniform: a row's probability differs from ``1 / K`` by less than ``2^-64`` (``K / 2^64``
relative, 5e-15 at K = 10^5), far below any bootstrap's Monte Carlo error. Each resample's totals are
summed in draw order ``j = 0 .. K-1``; every other step is integer arithmetic, so the totals do
not depend on the thread count, the chunking or the instruction-set level, and the numpy
reference reproduces them (wrapping uint64 arithmetic, a sequential cumulative sum).
"""

from __future__ import annotations

import numbers
import os
from typing import Optional

import numpy as np

from icl.ops._dispatch import BackendError, warn_fallback, record_backend, backend_status, native

OP_NAME = "bootstrap_totals"
BACKENDS = ("cpu", "reference")

GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_LOW = np.uint64(0xFFFFFFFF)
MAX_ROWS = (1 << 32) - 1
CHUNK_DRAWS = 1 << 20  # draws the reference holds at once (a few arrays of 8 MiB)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 (multiplications wrap modulo 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def draw_indices(seed: int, rows: int, resamples: range | np.ndarray, draws: range | np.ndarray) -> np.ndarray:
    """Row indices ``[len(resamples), len(draws)]`` (int64) of the stream: draws ``draws`` of
    resamples ``resamples`` over ``rows`` rows."""
    k = np.uint64(rows)
    r = np.asarray(resamples, dtype=np.uint64)[:, None]
    j = np.asarray(draws, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], dtype=np.uint64) + GAMMA)
        h = _mix(key + (r * k + j + np.uint64(1)) * GAMMA)
        at = ((h >> np.uint64(32)) * k + (((h & _LOW) * k) >> np.uint64(32))) >> np.uint64(32)
    return at.astype(np.int64)


def reference_totals(rows: np.ndarray, seed: int, resamples: int) -> np.ndarray:
    """The numpy reference of :func:`bootstrap_totals` (slow: about 50x the native kernel)."""
    rows, seed, resamples = _checked(rows, seed, resamples)
    k, c = rows.shape
    out = np.zeros((resamples, c))
    if k == 0 or c == 0 or resamples == 0:
        return out
    # draws in blocks of columns j, all resamples of a block at once; each block's values are
    # accumulated after the running totals (a cumulative sum is strictly sequential)
    step = max(1, CHUNK_DRAWS // resamples)
    for start in range(0, k, step):
        stop = min(k, start + step)
        at = draw_indices(seed, k, range(resamples), range(start, stop)).T  # [draws, resamples]
        for col in range(c):
            values = rows[:, col][at]
            values[0] += out[:, col]
            out[:, col] = np.add.accumulate(values, axis=0)[-1]
    return out


def _checked(rows: object, seed: object, resamples: object) -> tuple[np.ndarray, int, int]:
    if not isinstance(rows, np.ndarray) or rows.dtype != np.float64:
        raise TypeError(f"bootstrap_totals: rows must be a float64 numpy array, got "
                        f"{getattr(rows, 'dtype', type(rows).__name__)}")
    if rows.ndim != 2:
        raise ValueError(f"bootstrap_totals: rows must be [K, C], got shape {rows.shape}")
    if rows.shape[0] > MAX_ROWS:
        raise ValueError(f"bootstrap_totals: at most 2^32 - 1 rows, got {rows.shape[0]}")
    if np.isnan(rows).any():
        raise ValueError("bootstrap_totals: rows hold NaN (replace missing values first: a NaN total is never summed)")
    for name, v, top in (("seed", seed, 1 << 64), ("resamples", resamples, 1 << 62)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or not 0 <= int(v) < top:
            raise ValueError(f"bootstrap_totals: {name} must be an integer in [0, {top}), got {v!r}")
    return rows, int(seed), int(resamples)  # type: ignore[call-overload]


def bootstrap_totals(rows: np.ndarray, seed: int, resamples: int, *, backend: Optional[str] = None) -> np.ndarray:
    """Column totals ``[resamples, C]`` (float64) of ``resamples`` bootstrap resamples of the K
    rows of ``rows`` (float64 ``[K, C]``; the columns of a row move together), drawn from the
    stream above. ``backend`` (else ``ICL_BACKEND`` when it names one of these): ``"cpu"`` (the
    native kernel) or ``"reference"`` (numpy); by default the native kernel where it loads, else
    the reference with a :class:`BackendFallbackWarning`. The same bits either way. NaN is
    refused (a caller replaces missing values); infinities sum as IEEE numbers."""
    rows, seed, resamples = _checked(rows, seed, resamples)
    forced = backend or (os.environ.get("ICL_BACKEND") if os.environ.get("ICL_BACKEND") in BACKENDS else None)
    if forced not in (None, *BACKENDS):
        raise ValueError(f"bootstrap_totals: backend must be 'cpu' or 'reference', got {forced!r}")
    if forced != "reference":
        ok, why = backend_status("cpu")
        fn = getattr(native(), "bootstrap_totals", None) if ok else None
        if fn is not None:
            record_backend(OP_NAME, "cpu")
            out: np.ndarray = fn(rows, seed, resamples)
            return out
        why = why if not ok else "icl._C has no bootstrap_totals (rebuild it)"
        if forced == "cpu":
            raise BackendError(f"{OP_NAME}: backend 'cpu' cannot serve: {why}")
        warn_fallback(OP_NAME, [("cpu", why)], "reference")
    record_backend(OP_NAME, "reference")
    return reference_totals(rows, seed, resamples)
