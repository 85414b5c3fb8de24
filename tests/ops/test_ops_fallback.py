"""A missing or broken native build: one warning with the reason and the backend chosen,
ICL_STRICT_BACKEND=1 makes it an error, and backends_used() records who ran each op."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import icl.ops as ops
from icl.ops import _dispatch


@pytest.fixture
def no_native(monkeypatch):
    """icl._C fails to import (as after a failed build); the probe and the warnings start fresh."""
    monkeypatch.setitem(sys.modules, "icl._C", None)  # import raises ImportError
    monkeypatch.delenv("ICL_BACKEND", raising=False)
    monkeypatch.delenv(_dispatch.STRICT_ENV, raising=False)
    monkeypatch.setattr(_dispatch, "_warned", set())
    monkeypatch.setattr(_dispatch, "_used", {})  # what earlier tests ran must not decide backends_used()
    _dispatch.backend_status.cache_clear()
    yield
    _dispatch.backend_status.cache_clear()


def _images() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (1, 16, 16, 3), dtype=np.uint8)
    return a, np.clip(a.astype(int) + 3, 0, 255).astype(np.uint8)


def test_failed_native_build_warns_once_with_reason_and_backend(no_native):
    a, b = _images()
    with pytest.warns(ops.BackendFallbackWarning) as record:
        ops.ssim(a, b)
    assert len(record) == 1
    msg = str(record[0].message)
    assert "native module icl._C is not built or failed to load" in msg
    assert "'reference'" in msg and "ssim" in msg and _dispatch.STRICT_ENV in msg
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second fallback, of any op, stays quiet
        ops.ssim(a, b)
        ops.psnr(a, b)
    assert ops.backends_used()["ssim"].split(", ")[-1] == "reference"


def test_strict_backend_turns_the_fallback_into_an_error(no_native, monkeypatch):
    monkeypatch.setenv(_dispatch.STRICT_ENV, "1")
    a, b = _images()
    with pytest.raises(ops.BackendError, match=f"cpu: native module.*{_dispatch.STRICT_ENV}=1 forbids"):
        ops.psnr(a, b)


def test_ops_without_a_native_implementation_do_not_warn(no_native):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops.match_points(np.zeros((1, 2)), np.zeros((1, 2)), 1.0, backend="reference")


def test_backends_used_records_each_backend_that_ran(monkeypatch):
    monkeypatch.delenv("ICL_BACKEND", raising=False)
    if not ops.backend_status("cpu")[0]:
        pytest.skip("needs the native module")
    monkeypatch.setattr(_dispatch, "_used", {})
    a, b = _images()
    ops.ssim(a, b, backend="cpu")
    ops.ssim(a, b, backend="reference")
    ops.ssim(a, b)
    ops.box_iou(np.zeros((1, 4)), np.ones((1, 4)))
    assert ops.backends_used() == {"box_iou": "cpu", "ssim": "cpu, reference"}
