"""Result store: every benchmark's responses, scores, failures and compute records (SQLite,
resumable)."""

from __future__ import annotations

from icl.store.sqlite import ComputeRecord, Failure, Response, Score, ScoreKey, Store, StoreError

__all__ = ["ComputeRecord", "Failure", "Response", "Score", "ScoreKey", "Store", "StoreError"]
