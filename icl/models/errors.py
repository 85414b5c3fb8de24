"""The error of a missing or damaged weight file: a leaf module, so the local weight lookup
(:mod:`icl.models.weights`) and the Hub client (:mod:`icl.models.hub`) share it without importing
each other at load time."""

from __future__ import annotations


class WeightsError(FileNotFoundError):
    """A weight file is missing, unreadable or does not match its recorded digest."""
