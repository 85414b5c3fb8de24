"""Shared test fixtures. The repository root is on sys.path (pytest rootdir).

Every test (and every subprocess it starts) uses a private icl cache (``$ICL_CACHE``), where the
built-in synthetic datasets are generated, with the user's converted LPIPS weights linked in:
a test that damages a built-in file never damages the user's cache or another test's data.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest


def private_cache(path: Path) -> Path:
    """``path`` as an icl cache folder holding (a link to) the converted LPIPS weights."""
    path.mkdir(parents=True, exist_ok=True)
    real = Path(os.environ.get("ICL_USER_CACHE") or Path.home() / ".cache" / "icl") / "lpips"
    if real.is_dir() and not (path / "lpips").exists():
        (path / "lpips").symlink_to(real, target_is_directory=True)
    return path


os.environ.setdefault("ICL_USER_CACHE", os.environ.get("ICL_CACHE") or str(Path.home() / ".cache" / "icl"))
_SESSION_CACHE = tempfile.mkdtemp(prefix="icl-test-cache-")
os.environ["ICL_CACHE"] = str(private_cache(Path(_SESSION_CACHE)))


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    """A private copy of the session's icl cache (built-ins included) for tests that corrupt
    built-in files; ``$ICL_CACHE`` points at it for the test and its subprocesses."""
    dst = tmp_path / "icl-cache"
    if (Path(_SESSION_CACHE) / "builtin").is_dir():
        shutil.copytree(Path(_SESSION_CACHE) / "builtin", dst / "builtin")
    monkeypatch.setenv("ICL_CACHE", str(private_cache(dst)))
    return dst


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
