"""The errors of a missing or damaged weight file: a leaf module, so the local weight lookup
(:mod:`icl.models.weights`), the Hub client (:mod:`icl.models.hub`) and the checks of
``--check`` share them without importing each other at load time. Each says what it is by its
type, so a caller chooses the fix by the type, never by reading the message."""

from __future__ import annotations


class WeightsError(FileNotFoundError):
    """A weight file is missing, unreadable or does not match its recorded digest."""


class CheckpointDamaged(WeightsError):
    """A weight file that is not a complete checkpoint (truncated or damaged in a copy or a
    download): copying or downloading it again repairs it."""


class CheckpointRefused(WeightsError):
    """A torch checkpoint ``torch.load(weights_only=True)`` refuses (a bare pickle, globals it
    does not accept): it must be saved again (``torch.save`` of its state dict, or safetensors)."""
