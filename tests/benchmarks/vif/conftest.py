"""VIF tests: the tiny chat checkpoints of ``tests/models/vlm/tiny_vlm.py`` on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "vlm"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory):
    """A tiny random LLaVA checkpoint folder (real transformers classes, nothing downloaded)."""
    from tiny_vlm import build_llava

    return build_llava(tmp_path_factory.mktemp("vif-tiny") / "llava", max_positions=4096)
