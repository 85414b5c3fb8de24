"""The tiny models run single-threaded: on a loaded shared CPU, torch's intra-op thread team
costs far more than it saves on 32-wide layers (measured 40x on this machine)."""

from __future__ import annotations

from typing import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
