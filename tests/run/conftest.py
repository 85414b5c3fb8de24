"""Fixtures for runner tests: built-in fast data generated once, a plugin dist for subprocesses."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fast_data(tmp_path_factory) -> Path:
    """A data root holding the fast built-in datasets (generated once per session)."""
    from icl.data.registry import get_dataset, list_datasets

    root = tmp_path_factory.mktemp("icl-data")
    for name in list_datasets(root):
        get_dataset(name, root=root, fast=True)
    return root


@pytest.fixture
def data_copy(fast_data, tmp_path) -> Path:
    """A private copy of the fast data (for tests that corrupt files)."""
    dst = tmp_path / "data"
    shutil.copytree(fast_data, dst)
    return dst


@pytest.fixture(scope="session")
def plugin_env(tmp_path_factory) -> dict:
    """Environment for ``python -m icl.run`` subprocesses: the repository on the path and a
    dist-info declaring the test adapters in the ``icl.models`` entry-point group."""
    site = tmp_path_factory.mktemp("plugin-site")
    dist = site / "icl_test_adapters-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-test-adapters\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(
        "[icl.models]\n"
        "counting = tests.run._adapters:Counting\n"
        "bad-shape = tests.run._adapters:BadShape\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def icl_run(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "icl.run", *args]
