"""Public kernels with backend dispatch. Importable alone: ``from icl.ops import ...``.

Names resolve lazily so importing one kernel never loads the others.
"""

from __future__ import annotations

import importlib
from typing import Any

from icl.ops._dispatch import BackendError, backend_status

# public name -> module (relative to icl.ops) that defines it
_EXPORTS: dict[str, str] = {
    "nearest_palette": "palette",
    "TURBO_TABLE": "turbo",
    "turbo_encode": "turbo",
    "turbo_bins": "turbo",
    "turbo_decode": "turbo",
}

__all__ = ["BackendError", "backend_status", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'icl.ops' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"icl.ops.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def load_all() -> None:
    """Import every op module so each op's implementations are registered."""
    for module in sorted(set(_EXPORTS.values())):
        importlib.import_module(f"icl.ops.{module}")
