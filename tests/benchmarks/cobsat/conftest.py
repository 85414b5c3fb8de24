"""CoBSAT tests: a tiny chat checkpoint (``icl.models.vlm.tiny``); the tiny generators of
``tests/models/t2i/tiny_t2i.py`` on the path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory):
    """A tiny random LLaVA checkpoint folder (real transformers classes, nothing downloaded)."""
    from icl.models.vlm.tiny import build_llava

    return build_llava(tmp_path_factory.mktemp("cobsat-tiny") / "llava", max_positions=1024)


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "t2i"))  # tiny_t2i: CLIP, Janus


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory):
    """A tiny random CLIP folder (CLIPModel + CLIPProcessor, tests/models/t2i/tiny_t2i.py)."""
    from tiny_t2i import build_clip

    return build_clip(tmp_path_factory.mktemp("cobsat-clip") / "clip")


@pytest.fixture(scope="session")
def tiny_janus(tmp_path_factory):
    """The tiny Janus-Pro-layout folder of the generators issue (tests/models/t2i/tiny_t2i.py)."""
    from tiny_t2i import build_janus

    return build_janus(tmp_path_factory.mktemp("cobsat-janus") / "janus", max_positions=1024)
