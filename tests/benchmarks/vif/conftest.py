"""VIF tests: the tiny chat checkpoints of ``tests/models/vlm/tiny_vlm.py`` and the tiny generators of
``tests/models/t2i/tiny_t2i.py`` on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "vlm"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "t2i"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory):
    """A tiny random LLaVA checkpoint folder (real transformers classes, nothing downloaded)."""
    from tiny_vlm import build_llava

    return build_llava(tmp_path_factory.mktemp("vif-tiny") / "llava", max_positions=4096)


@pytest.fixture(scope="session")
def tiny_janus(tmp_path_factory):
    """A tiny random Janus-Pro folder (real transformers classes): a generator taking interleaved images."""
    from tiny_t2i import build_janus

    return build_janus(tmp_path_factory.mktemp("vif-janus") / "janus", max_positions=2048)
