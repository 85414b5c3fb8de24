"""CoBSAT tests: the tiny chat checkpoints of ``tests/models/vlm/tiny_vlm.py`` on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "vlm"))
