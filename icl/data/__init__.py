"""Canonical datasets, built-in data, splits, contexts and seeds.

``from icl.data import get_dataset, DataError`` is the usual entry; submodules load lazily.
"""

from __future__ import annotations

import importlib
from typing import Any

from icl.data.dataset import DataError, Dataset, DatasetMeta, Sample, load_dataset

_LAZY = {
    "get_dataset": "registry",
    "list_datasets": "registry",
    "register_dataset": "registry",
    "derive_seed": "seeds",
    "rng": "seeds",
    "split_ids": "contexts",
    "select_contexts": "contexts",
    "write_context_csv": "contexts",
    "ContextRow": "contexts",
}

__all__ = ["DataError", "Dataset", "DatasetMeta", "Sample", "load_dataset", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'icl.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"icl.data.{module}"), name)
    globals()[name] = value
    return value
