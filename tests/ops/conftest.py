"""Fixtures shared by the kernel tests."""

from __future__ import annotations

import pytest

from icl.ops._dispatch import backend_status

CPU_BACKENDS = ["reference", "cpu"]


@pytest.fixture(params=CPU_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each CPU-side backend, requested explicitly; skipped with its reason when unavailable."""
    ok, why = backend_status(request.param)
    if not ok:
        pytest.skip(f"{request.param} backend unavailable: {why}")
    return request.param
