"""Canonical datasets, built-in data, splits, contexts and seeds.

``from icl.data import get_dataset, DataError`` is the usual entry; submodules load lazily.
"""

from __future__ import annotations

from icl._lazy import lazy_getattr

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


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
