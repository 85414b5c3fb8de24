"""Tiny LLaVA and Idefics3 checkpoints, built once per session, and loaded hf-vlm adapters."""

from __future__ import annotations

import pytest
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
def _one_thread_per_module(one_thread):
    """Every module of this folder on one torch thread (tests/models/conftest.py)."""
    yield
