"""Modules another thread may be importing right now."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Optional


def imported(name: str) -> Optional[ModuleType]:
    """Module ``name`` when its import has finished, else None (never imports it). Code that
    avoids importing torch asks ``sys.modules`` whether someone has; while another thread is
    still importing it (a killed LPIPS helper's job falling back to this process) that module
    is partially initialised and has no ``Tensor`` yet: it counts as not imported."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module
