"""GPU (triton / numba.cuda) implementations of the ops; each module registers itself on import.

Nothing here imports triton or numba at module level: the kernels are loaded on first call.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import torch


def kernels_module(name: str) -> ModuleType:
    """``icl.kernels.<name>``; from a source checkout, the top-level ``kernels/`` folder.

    Wheels ship ``kernels/`` as ``icl.kernels`` (its ``__init__.py`` is written at build time,
    CMakeLists.txt). In-tree development (``make build``) has no such package, so the folder
    beside ``icl/`` is registered under that name: never as a top-level ``kernels`` module, a
    name that belongs to another library (Hugging Face's ``kernels``).
    """
    try:
        return importlib.import_module(f"icl.kernels.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != "icl.kernels":
            raise
    source = Path(__file__).resolve().parents[3] / "kernels"
    if not (source / f"{name}.py").is_file():
        raise ModuleNotFoundError(f"icl.kernels is not installed and the source folder {source} has no {name}.py",
                                  name="icl.kernels")
    # The folder has no __init__.py on purpose: from the repository root it must never be
    # importable as a regular top-level package ``kernels`` (Hugging Face's ``kernels``, which
    # transformers imports, would be shadowed). It becomes the package ``icl.kernels`` here.
    spec = importlib.machinery.ModuleSpec("icl.kernels", None, is_package=True)
    spec.submodule_search_locations = [str(source)]
    module = importlib.util.module_from_spec(spec)
    module.__doc__ = "Triton and numba.cuda kernels of the source checkout (the wheel ships them as icl.kernels)."
    sys.modules["icl.kernels"] = module
    return importlib.import_module(f"icl.kernels.{name}")


def float32_only(x: torch.Tensor, *args: Any) -> Optional[str]:
    """``supports`` check of the triton kernels that compute in float32: float64 input keeps its
    float64 result contract on the cpu/reference backends."""
    if x.dtype == torch.float64:
        return "the triton kernel computes in float32; float64 input keeps float64 on cpu/reference"
    return None
