"""Fixtures shared by the model tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread while a module runs: tiny models' ops are too small to gain from
    a second thread, and on a shared CPU a descheduled worker stalls every parallel op. Modules
    take it with ``pytestmark = pytest.mark.usefixtures("one_thread")`` (the t2i and vlm folders'
    conftests for all their modules)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
