"""GPU backend tests. On a CPU machine they run the Triton kernels under TRITON_INTERPRET=1
and the numba kernels under NUMBA_ENABLE_CUDASIM=1 (both set here, before any kernel is
imported); on a GPU machine ``ICL_GPU_TESTS_DEVICE=cuda`` runs them on the device."""

from __future__ import annotations

import os

import pytest

DEVICE = os.environ.get("ICL_GPU_TESTS_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


@pytest.fixture
def device() -> str:
    return DEVICE


def _require(backend: str) -> str:
    """Skip with the backend's own reason when it cannot run here."""
    from icl.ops._dispatch import backend_status

    ok, why = backend_status(backend)
    if not ok:
        pytest.skip(f"{backend} backend unavailable: {why}")
    return backend


@pytest.fixture
def triton_backend() -> str:
    return _require("triton")


@pytest.fixture
def cuda_backend() -> str:
    return _require("cuda")


@pytest.fixture
def cpu_backend() -> str:
    return _require("cpu")
