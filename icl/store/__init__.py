"""Result store: every sample's scores, failures and compute records (SQLite, resumable)."""

from __future__ import annotations

from icl.store.sqlite import ComputeRecord, Failure, SampleKey, SampleResult, Store

__all__ = ["ComputeRecord", "Failure", "SampleKey", "SampleResult", "Store"]
