"""Model adapters: the request type, the adapter ABC and a lazy registry.

``from icl.models import get_model, list_models, AnalogyRequest, ChatRequest, Adapter``.
"""

from __future__ import annotations

from icl.models.base import PRECISIONS, Adapter, ContextOverflowError
from icl.models.requests import AnalogyRequest, ChatRequest, GenerationRequest, Message, content_hash
from icl.models.registry import UnknownModelError, get_model, list_models, register_model

__all__ = [
    "PRECISIONS",
    "Adapter",
    "AnalogyRequest",
    "ChatRequest",
    "ContextOverflowError",
    "GenerationRequest",
    "Message",
    "content_hash",
    "UnknownModelError",
    "get_model",
    "list_models",
    "register_model",
]
