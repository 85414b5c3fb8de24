"""The bootstrap index stream and totals (icl.ops.bootstrap, csrc/bootstrap.cpp): the native
kernel equals the numpy reference bit for bit, on every instruction-set level and thread count;
the stream is the one documented (SplitMix64, Vigna's splitmix64.c; Lemire's multiply-shift),
checked against plain Python integers; its draws are uniform; bad arguments are named."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from icl.ops._dispatch import backend_status
from icl.ops.bootstrap import GAMMA, _mix, bootstrap_totals, draw_indices, reference_totals

needs_native = pytest.mark.skipif(not backend_status("cpu")[0], reason="native module not built")
MASK = (1 << 64) - 1


def _python_index(seed: int, rows: int, r: int, j: int) -> int:
    """The stream in Python integers: SplitMix64 (mix of state + G) and floor(h * K / 2^64)."""
    def mix(z: int) -> int:
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    gamma = 0x9E3779B97F4A7C15
    key = mix((seed + gamma) & MASK)
    h = mix((key + (r * rows + j + 1) * gamma) & MASK)
    return (h * rows) >> 64


def _rows(k: int, c: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(10.0, 3.0, (k, c))


def test_the_stream_is_the_documented_one():
    # SplitMix64's first five outputs for seed 1234567 (the test vector of Vigna's splitmix64.c,
    # prng.di.unimi.it): the finaliser and increment the stream uses
    with np.errstate(over="ignore"):
        outputs = _mix(np.uint64(1234567) + GAMMA * np.arange(1, 6, dtype=np.uint64))
    assert outputs.tolist() == [6457827717110365317, 3203168211198807973, 9817491932198370423,
                                4593380528125082431, 16408922859458223821]
    for seed, rows in ((0, 1), (0, 7), (2**64 - 1, 100_003), (123456789, 2**32 - 1)):
        got = draw_indices(seed, rows, range(3), range(5))
        want = [[_python_index(seed, rows, r, j) for j in range(5)] for r in range(3)]
        np.testing.assert_array_equal(got, want)
        assert got.min() >= 0 and got.max() < rows


@needs_native
@pytest.mark.parametrize("k, c, resamples", [(1, 1, 5), (2, 3, 16), (7, 1, 17), (31, 5, 33), (100, 2, 1),
                                             (257, 4, 47), (1000, 1, 100)])
def test_native_equals_the_numpy_reference_bit_for_bit(k, c, resamples):
    x = _rows(k, c, k)
    for seed in (0, 2**63 + 11, 2**64 - 1):
        native = bootstrap_totals(x, seed, resamples, backend="cpu")
        np.testing.assert_array_equal(native, reference_totals(x, seed, resamples))
        assert native.shape == (resamples, c) and native.dtype == np.float64


@needs_native
def test_totals_are_sums_in_draw_order_of_the_drawn_rows():
    x = _rows(50, 3)
    at = draw_indices(9, 50, range(20), range(50))
    want = np.zeros((20, 3))
    for j in range(50):  # sequentially, as documented
        want += x[at[:, j]]
    np.testing.assert_array_equal(bootstrap_totals(x, 9, 20, backend="cpu"), want)
    # more resamples extend the stream: the first ones are unchanged
    np.testing.assert_array_equal(bootstrap_totals(x, 9, 45, backend="cpu")[:20], want)


@needs_native
def test_same_bits_on_every_cpu_level_and_thread_policy():
    import icl._C as C

    x = _rows(3001, 3)
    level, policy = C.cpu_level(), C.thread_policy()
    try:
        got = {}
        for lv in C.cpu_levels():
            C.cpu_level(lv)
            for pol in ("single", "fixed", "adaptive"):
                C.thread_policy(pol)
                got[(lv, pol)] = C.bootstrap_totals(x, 77, 101)
    finally:
        C.cpu_level(level)
        C.thread_policy(policy)
    want = reference_totals(x, 77, 101)
    for key, totals in got.items():
        np.testing.assert_array_equal(totals, want, err_msg=str(key))


@needs_native
def test_same_bits_with_other_openmp_thread_counts():
    code = ("import hashlib, numpy as np, icl._C as C; C.thread_policy('fixed'); "
            "x = np.random.default_rng(3).normal(size=(2003, 2)); "
            "print(C.max_threads(), hashlib.sha256(C.bootstrap_totals(x, 5, 333).tobytes()).hexdigest())")
    x = np.random.default_rng(3).normal(size=(2003, 2))
    want = hashlib.sha256(reference_totals(x, 5, 333).tobytes()).hexdigest()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for threads in ("1", "3", "5"):
        env = {**os.environ, "OMP_NUM_THREADS": threads, "PYTHONPATH": root}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split() == [threads, want]


@needs_native
def test_draws_are_uniform_chi_square():
    # one-hot rows: column i totals how often row i was drawn, so the native kernel counts
    k, resamples = 13, 4000
    counts = bootstrap_totals(np.eye(k), 2024, resamples, backend="cpu")
    assert np.all(counts.sum(axis=1) == k)
    per_row = counts.sum(axis=0)
    np.testing.assert_array_equal(per_row, np.bincount(draw_indices(2024, k, range(resamples), range(k)).ravel(),
                                                       minlength=k))
    expected = resamples  # k * resamples draws over k rows
    chi2 = float(((per_row - expected) ** 2 / expected).sum())
    assert chi2 < 32.9  # chi-square with 12 degrees of freedom: P(> 32.9) = 0.001
    # and over many rows, from the reference stream itself
    big = np.bincount(draw_indices(7, 1009, range(200), range(1009)).ravel(), minlength=1009)
    chi2_big = float(((big - 200) ** 2 / 200).sum())
    assert abs(chi2_big - 1008) < 4.5 * math.sqrt(2 * 1008)  # mean 1008, sd sqrt(2016)


def test_reference_serves_alone_with_the_same_numbers(monkeypatch):
    from icl.report import stats

    x = np.random.default_rng(2).normal(size=300)
    stats.forget()
    default = stats.mean_ci(x, identity="fallback", resamples=500)
    monkeypatch.setenv("ICL_BACKEND", "reference")
    stats.forget()
    assert stats.mean_ci(x, identity="fallback", resamples=500) == default
    stats.forget()


def test_without_the_native_module_stats_warn_once_and_give_the_same_numbers(monkeypatch):
    from icl.ops import _dispatch
    from icl.report import stats

    x = np.random.default_rng(4).gamma(2.0, size=400)
    stats.forget()
    default = stats.mean_ci(x, identity="no native", resamples=300)
    monkeypatch.setitem(sys.modules, "icl._C", None)  # import raises ImportError, as after a failed build
    monkeypatch.delenv("ICL_BACKEND", raising=False)
    monkeypatch.delenv(_dispatch.STRICT_ENV, raising=False)
    monkeypatch.setattr(_dispatch, "_warned", set())
    _dispatch.backend_status.cache_clear()
    try:
        stats.forget()
        with pytest.warns(_dispatch.BackendFallbackWarning, match="bootstrap_totals.*'reference'"):
            assert stats.mean_ci(x, identity="no native", resamples=300) == default
        with pytest.raises(_dispatch.BackendError, match="backend 'cpu' cannot serve"):
            bootstrap_totals(np.zeros((3, 1)), 0, 2, backend="cpu")
    finally:
        _dispatch.backend_status.cache_clear()
        stats.forget()


@needs_native
def test_edges_and_infinities():
    assert bootstrap_totals(np.zeros((0, 2)), 1, 4).tolist() == [[0.0, 0.0]] * 4
    assert bootstrap_totals(_rows(5, 2), 1, 0).shape == (0, 2)
    assert bootstrap_totals(np.zeros((5, 0)), 1, 3).shape == (3, 0)
    x = _rows(6, 1)
    x[2, 0] = np.inf
    np.testing.assert_array_equal(bootstrap_totals(x, 3, 40, backend="cpu"), reference_totals(x, 3, 40))
    # a non-contiguous view is read as its values
    wide = _rows(40, 4)
    np.testing.assert_array_equal(bootstrap_totals(wide[:, ::2], 3, 9, backend="cpu"),
                                  reference_totals(np.ascontiguousarray(wide[:, ::2]), 3, 9))


@pytest.mark.parametrize("args, error, words", [
    ((np.zeros((4, 2), np.float32), 0, 5), TypeError, "float64"),
    (([[1.0], [2.0]], 0, 5), TypeError, "float64"),
    ((np.zeros(4), 0, 5), ValueError, r"\[K, C\]"),
    ((np.array([[1.0], [np.nan]]), 0, 5), ValueError, "NaN"),
    ((np.zeros((4, 1)), -1, 5), ValueError, "seed"),
    ((np.zeros((4, 1)), 2**64, 5), ValueError, "seed"),
    ((np.zeros((4, 1)), 0, -1), ValueError, "resamples"),
    ((np.zeros((4, 1)), 0, True), ValueError, "resamples"),
    ((np.zeros((4, 1)), 1.5, 5), ValueError, "seed"),
])
def test_bad_arguments_are_named(args, error, words):
    for fn in (bootstrap_totals, reference_totals):
        with pytest.raises(error, match=words):
            fn(*args)


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="backend must be 'cpu' or 'reference', got 'gpu'"):
        bootstrap_totals(np.zeros((2, 1)), 0, 3, backend="gpu")


@needs_native
def test_native_entry_checks_its_own_arguments():
    import icl._C as C

    with pytest.raises(TypeError, match="float64"):
        C.bootstrap_totals(np.zeros((3, 1), np.float32), 0, 4)
    with pytest.raises(ValueError, match=r"\[K, C\]"):
        C.bootstrap_totals(np.zeros(3), 0, 4)
    with pytest.raises(ValueError, match="resamples"):
        C.bootstrap_totals(np.zeros((3, 1)), 0, -2)
