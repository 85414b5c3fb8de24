"""icl: fast, reproducible evaluation of in-context learners.

``icl.evaluate(benchmark, models=..., **options)`` runs a benchmark from Python. Importing
``icl`` never needs the native build or a GPU: backends are probed lazily.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "evaluate"]


def __getattr__(name: str) -> Any:
    if name == "evaluate":
        from icl.api import evaluate

        return evaluate
    raise AttributeError(f"module 'icl' has no attribute {name!r}")
