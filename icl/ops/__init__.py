"""Public kernels with backend dispatch. Importable alone: ``from icl.ops import ...``.

Names resolve lazily so importing one kernel never loads the others.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from icl._lazy import lazy_getattr
from icl.ops._dispatch import BackendError, BackendFallbackWarning, backend_status, backends_used

# public name -> module (relative to icl.ops) that defines it
_EXPORTS: dict[str, str] = {
    "average_precision": "average_precision",
    "box_iou": "box_iou",
    "Components": "components",
    "connected_components": "components",
    "detection_matches": "average_precision",
    "DetectionMatches": "average_precision",
    "greedy_match": "greedy_match",
    "greedy_match_counts": "greedy_match",
    "lpips": "lpips",
    "lpips_weights": "lpips",
    "LPIPSWeights": "lpips",
    "match_points": "match_points",
    "nearest_palette": "palette",
    "psnr": "psnr",
    "redness": "redness",
    "ssim": "ssim",
    "TURBO_TABLE": "turbo",
    "turbo_bins": "turbo",
    "turbo_decode": "turbo",
    "turbo_encode": "turbo",
}

__all__ = ["BackendError", "BackendFallbackWarning", "backend_status", "backends_used", *_EXPORTS]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


def load_all() -> None:
    """Import every op module so each op's implementations are registered."""
    for module in sorted(set(_EXPORTS.values())):
        importlib.import_module(f"icl.ops.{module}")


class _Package(types.ModuleType):
    """Keeps a public function bound on the package when its module has the same name
    (``box_iou.py`` defines ``box_iou``): importing the submodule would otherwise bind the
    module over the function. Reach such modules with ``importlib.import_module``."""

    def __setattr__(self, name: str, value: Any) -> None:
        same_name = _EXPORTS.get(name) == name and isinstance(value, types.ModuleType)
        if same_name and value.__name__ == f"{__name__}.{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
