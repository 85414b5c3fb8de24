"""Large outputs of the native kernels sit on recycled buffers: a dropped output's buffer is
handed to the next output of its size (its pages already mapped), never one still alive."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import icl.ops as ops

BIG = (1, 512, 512)  # 1 MB of int32 labels: the smallest recycled size


@pytest.fixture
def native():
    ok, why = ops.backend_status("cpu")
    if not ok:
        pytest.skip(why)
    from icl import _C

    if _C._output_cache_info()[0] == 0:
        pytest.skip("ICL_OUTPUT_CACHE_MB=0 in this environment")
    return _C


def _images(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, BIG + (3,), dtype=np.uint8)


PALETTE = np.array([[0, 0, 0], [255, 255, 255], [200, 30, 40], [10, 220, 90]], np.uint8)


def test_dropped_buffer_is_reused_with_right_values(native):
    first = ops.nearest_palette(_images(0), PALETTE, backend="cpu")
    address = first.ctypes.data
    del first
    images = _images(1)
    second = ops.nearest_palette(images, PALETTE, backend="cpu")
    assert second.ctypes.data == address  # the same pages, recycled
    np.testing.assert_array_equal(second, ops.nearest_palette(images, PALETTE, backend="reference"))


def test_live_outputs_and_views_keep_their_buffers(native):
    a = ops.nearest_palette(_images(2), PALETTE, backend="cpu")
    kept = a.copy()
    view = a[0, 10:20]
    b = ops.nearest_palette(_images(3), PALETTE, backend="cpu")  # a is alive: another buffer
    assert b.ctypes.data != a.ctypes.data
    del a
    c = ops.nearest_palette(_images(4), PALETTE, backend="cpu")  # a's buffer is held by the view
    assert not np.shares_memory(c, view)
    np.testing.assert_array_equal(view, kept[0, 10:20])
    del b, c, view


def test_components_and_turbo_outputs_are_writable_arrays(native):
    mask = np.random.default_rng(5).random(BIG) < 0.5
    res = ops.connected_components(mask, 8)
    assert res.labels.flags.writeable and res.labels.flags.c_contiguous and res.labels.dtype == np.int32
    depth = ops.turbo_decode(ops.turbo_encode(np.random.default_rng(6).random(BIG), 0, 1), 0, 1, backend="cpu")
    assert depth.flags.writeable and depth.dtype == np.float32 and depth.shape == BIG
    depth[0, 0, 0] = -1.0


def test_held_bytes_stay_under_the_limit(native):
    limit, _ = native._output_cache_info()
    size = (1, 1024, 2048)  # 8 MB each
    outs = [ops.nearest_palette(np.zeros(size + (3,), np.uint8), PALETTE, backend="cpu")
            for _ in range(limit // (8 << 20) + 3)]
    del outs
    assert native._output_cache_info()[1] <= limit


_CHILD = ("import numpy as np, icl.ops as ops; from icl import _C\n"
          "p = np.array([[0, 0, 0], [255, 255, 255]], np.uint8)\n"
          "out = ops.nearest_palette(np.zeros((1, 512, 512, 3), np.uint8), p, backend='cpu'); del out\n"
          "print(*_C._output_cache_info())")


def _child(value: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ICL_OUTPUT_CACHE_MB=value)
    return subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("value, limit", [("0", 0), ("16", 16 << 20)])
def test_limit_from_the_environment(native, value, limit):
    got = _child(value)
    assert got.returncode == 0, got.stderr
    got_limit, held = map(int, got.stdout.split())
    assert got_limit == limit
    assert held == (0 if limit == 0 else 2 << 20)  # one 1 MB array on a 2 MB-aligned buffer


def test_a_bad_limit_is_named(native):
    got = _child("lots")
    assert got.returncode != 0
    assert "ICL_OUTPUT_CACHE_MB: expected a whole number of MB (0 = off), got 'lots'" in got.stderr
