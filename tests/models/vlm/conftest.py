"""Tiny LLaVA and Idefics3 checkpoints, built once per session, and loaded hf-vlm adapters."""

from __future__ import annotations

import pytest
import torch
from tiny_vlm import BUILDERS

from icl.models.vlm.hf import HFVisionLanguage


class TinyFolders(dict):
    """family -> checkpoint folder, each built on first use."""

    def __init__(self, root):
        super().__init__()
        self.root = root

    def __missing__(self, family):
        self[family] = BUILDERS[family](self.root / family)
        return self[family]


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory):
    return TinyFolders(tmp_path_factory.mktemp("tiny-vlm"))


@pytest.fixture(scope="session", params=sorted(BUILDERS))
def vlm(request, tiny_folders):
    """A loaded fp32 hf-vlm adapter, once per family."""
    model = HFVisionLanguage(weights=str(tiny_folders[request.param]), max_batch=8)
    model.load("cpu")
    return model


@pytest.fixture(scope="session")
def llava(tiny_folders):
    model = HFVisionLanguage(weights=str(tiny_folders["llava"]), max_batch=16)
    model.load("cpu")
    return model


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread while these modules run: the tiny models' ops are too small to gain
    from a second thread, and on a shared CPU a descheduled worker stalls every parallel op."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
