"""Tiny generator folders, built once per session; one torch thread (the tiny models' ops are
too small to gain from a second one on a shared CPU)."""

from __future__ import annotations

import pytest
from tiny_t2i import build_janus, build_sd


@pytest.fixture(scope="session")
def sd_folder(tmp_path_factory):
    return build_sd(tmp_path_factory.mktemp("tiny-sd") / "sd")


@pytest.fixture(scope="session")
def janus_folder(tmp_path_factory):
    return build_janus(tmp_path_factory.mktemp("tiny-janus") / "janus")


@pytest.fixture(scope="module", autouse=True)
def _one_thread_per_module(one_thread):
    """Every module of this folder on one torch thread (tests/models/conftest.py)."""
    yield
