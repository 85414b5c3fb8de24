"""Tiny generator folders, built once per session; one torch thread (the tiny models' ops are
too small to gain from a second one on a shared CPU)."""

from __future__ import annotations

import pytest
import torch
from tiny_t2i import build_janus, build_sd


@pytest.fixture(scope="session")
def sd_folder(tmp_path_factory):
    return build_sd(tmp_path_factory.mktemp("tiny-sd") / "sd")


@pytest.fixture(scope="session")
def janus_folder(tmp_path_factory):
    return build_janus(tmp_path_factory.mktemp("tiny-janus") / "janus")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
