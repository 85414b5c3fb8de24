"""Public kernels with backend dispatch. Importable alone: ``from icl.ops import ...``.

Names resolve lazily so importing one kernel never loads the others.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from icl.ops._dispatch import BackendError, backend_status

# public name -> module (relative to icl.ops) that defines it
_EXPORTS: dict[str, str] = {
    "greedy_match": "greedy_match",
    "greedy_match_counts": "greedy_match",
    "lpips": "lpips",
}

__all__ = ["BackendError", "backend_status", *_EXPORTS]


class _OpsModule(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # Importing icl.ops.<op> binds that submodule on this package, which would shadow the op
        # function of the same name (module icl/ops/psnr.py vs function psnr): keep the function.
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == name and hasattr(value, name):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _OpsModule


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
