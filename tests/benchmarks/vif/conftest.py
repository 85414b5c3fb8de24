"""VIF tests: the tiny generators of ``tests/models/t2i/tiny_t2i.py`` on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "t2i"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_janus(tmp_path_factory):
    """A tiny random Janus-Pro folder (real transformers classes): a generator taking interleaved images."""
    from tiny_t2i import build_janus

    return build_janus(tmp_path_factory.mktemp("vif-janus") / "janus", max_positions=2048)
