"""A small synthetic best50 package, written once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from icl.benchmarks.best50.synthetic import write_package


@pytest.fixture(scope="session")
def package_dir(tmp_path_factory) -> Path:
    return write_package(tmp_path_factory.mktemp("best50") / "pkg", n_per_class=2, seed=1)
