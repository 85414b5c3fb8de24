"""GPU (triton / numba.cuda) implementations of the ops; each module registers itself on import.

Nothing here imports triton or numba at module level: the kernels are loaded on first call.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import torch


def kernels_module(name: str) -> ModuleType:
    """``icl.kernels.<name>``; from a source checkout, the top-level ``kernels/`` folder.

    Wheels ship ``kernels/`` as ``icl.kernels``. In-tree development (``make build``) has no
    such package, so the folder beside ``icl/`` is registered under that name: never as a
    top-level ``kernels`` module, a name that belongs to another library.
    """
    try:
        return importlib.import_module(f"icl.kernels.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != "icl.kernels":
            raise
    source = Path(__file__).resolve().parents[3] / "kernels"
    init = source / "__init__.py"
    if not init.is_file():
        raise ModuleNotFoundError(f"icl.kernels is not installed and no source folder {source} exists",
                                  name="icl.kernels")
    spec = importlib.util.spec_from_file_location("icl.kernels", init, submodule_search_locations=[str(source)])
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"cannot load {init} as icl.kernels", name="icl.kernels")
    module = importlib.util.module_from_spec(spec)
    sys.modules["icl.kernels"] = module
    spec.loader.exec_module(module)
    return importlib.import_module(f"icl.kernels.{name}")


def float32_only(x: torch.Tensor, *args: Any) -> Optional[str]:
    """``supports`` check of the triton kernels that compute in float32: float64 input keeps its
    float64 result contract on the cpu/reference backends."""
    if x.dtype == torch.float64:
        return "the triton kernel computes in float32; float64 input keeps float64 on cpu/reference"
    return None
