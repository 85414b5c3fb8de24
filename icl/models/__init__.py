"""Model adapters: the request type, the adapter ABC and a lazy registry.

``from icl.models import get_model, list_models, AnalogyRequest, Adapter``.
"""

from __future__ import annotations

from icl.models.base import PRECISIONS, Adapter, AnalogyRequest
from icl.models.registry import UnknownModelError, get_model, list_models, register_model

__all__ = [
    "PRECISIONS",
    "Adapter",
    "AnalogyRequest",
    "UnknownModelError",
    "get_model",
    "list_models",
    "register_model",
]
