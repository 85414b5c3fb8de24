"""Public kernels with backend dispatch. Importable alone: ``from icl.ops import ...``.

Names resolve lazily so importing one kernel never loads the others.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from icl._lazy import lazy_getattr
from icl.ops._dispatch import BackendError, BackendFallbackWarning, backend_status, backends_used

# public name -> module (relative to icl.ops) that defines it; ``_host`` serves numpy calls
# without torch and hands the rest to the op's own module
_EXPORTS: dict[str, str] = {
    "average_precision": "_host",
    "box_iou": "_host",
    "Components": "_numpy_core",
    "connected_components": "_host",
    "detection_matches": "average_precision",
    "DetectionMatches": "average_precision",
    "greedy_match": "_host",
    "greedy_match_counts": "_host",
    "lpips": "lpips",
    "lpips_weights": "_lpips_weights",
    "LPIPSWeights": "_lpips_weights",
    "match_points": "_host",
    "nearest_palette": "_host",
    "patch_match": "patch_match",
    "psnr": "_host",
    "redness": "_host",
    "ssim": "_host",
    "TURBO_TABLE": "_turbo_table",
    "turbo_bins": "_host",
    "turbo_decode": "_host",
    "turbo_encode": "_host",
}

if TYPE_CHECKING:  # what the lazy names resolve to, for type checkers (`icl.ops.ssim` is the function)
    from icl.ops.average_precision import DetectionMatches as DetectionMatches
    from icl.ops.average_precision import average_precision as average_precision
    from icl.ops.average_precision import detection_matches as detection_matches
    from icl.ops.box_iou import box_iou as box_iou
    from icl.ops.components import Components as Components
    from icl.ops.components import connected_components as connected_components
    from icl.ops.greedy_match import greedy_match as greedy_match
    from icl.ops.greedy_match import greedy_match_counts as greedy_match_counts
    from icl.ops.lpips import LPIPSWeights as LPIPSWeights
    from icl.ops.lpips import lpips as lpips
    from icl.ops.lpips import lpips_weights as lpips_weights
    from icl.ops.match_points import match_points as match_points
    from icl.ops.palette import nearest_palette as nearest_palette
    from icl.ops.psnr import psnr as psnr
    from icl.ops.redness import redness as redness
    from icl.ops.ssim import ssim as ssim
    from icl.ops.turbo import TURBO_TABLE as TURBO_TABLE
    from icl.ops.turbo import turbo_bins as turbo_bins
    from icl.ops.turbo import turbo_decode as turbo_decode
    from icl.ops.turbo import turbo_encode as turbo_encode

__all__ = ["BackendError", "BackendFallbackWarning", "backend_status", "backends_used", *_EXPORTS]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


def load_all() -> None:
    """Import every op module so each op's implementations are registered."""
    for module in sorted(set(_EXPORTS.values())):
        importlib.import_module(f"icl.ops.{module}")


class _Package(types.ModuleType):
    """Keeps a public function bound on the package when a submodule has its name
    (``box_iou.py`` defines ``box_iou``): importing the submodule would otherwise bind the
    module over the function. Reach such modules with ``importlib.import_module``."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
