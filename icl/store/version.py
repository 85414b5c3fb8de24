"""The store's schema version and the error of a store that cannot be opened or is of another
version: a leaf module, so the store (``icl.store.sqlite``) and its copier (``icl.store.copy``)
share them without importing each other."""

from __future__ import annotations

SCHEMA_VERSION = 3


class StoreError(RuntimeError):
    """The store file cannot be opened or is of another schema version."""
