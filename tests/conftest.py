"""Shared test fixtures. The repository root is on sys.path (pytest rootdir)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def builtin_root(tmp_path_factory):
    """One data root with the visual benchmark's fast built-ins, generated once per session."""
    import icl.benchmarks.vibe  # noqa: F401  (registers the built-in datasets)
    from icl.data.registry import get_dataset

    root = tmp_path_factory.mktemp("icl-data")
    for name in ("scenes-a", "scenes-b", "photos"):
        get_dataset(name, root=root, fast=True)
    return root
