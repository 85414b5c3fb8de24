"""CoBSAT tests: the tiny chat checkpoints of ``tests/models/vlm/tiny_vlm.py`` on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "vlm"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory):
    """A tiny random LLaVA checkpoint folder (real transformers classes, nothing downloaded)."""
    from tiny_vlm import build_llava

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
