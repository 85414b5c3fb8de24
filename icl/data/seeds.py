"""Deterministic seeds (PROTOCOL §1.1).

Every random choice in the toolkit draws from ``numpy.random.default_rng(derive_seed(...))``
so that results never depend on run order, sharding or Python's salted ``hash()``.

Conventions for the ``split`` and ``sample_id`` fields:
- the split permutation of a dataset uses ``split="*"``, ``sample_id="*"``, ``purpose="split"``;
- randomness that belongs to one sample (inpainting rectangle, denoising noise, context
  tie-breaks of a query) uses ``split="*"``: a sample's randomness must not change with the
  split it happens to fall in.
"""

from __future__ import annotations

import hashlib

import numpy as np

ANY = "*"


def seed_string(global_seed: int | str, dataset: str, split: str, sample_id: str, purpose: str) -> str:
    """The exact string that is hashed: ``"{global_seed}/{dataset}/{split}/{sample_id}/{purpose}"``."""
    return f"{global_seed}/{dataset}/{split}/{sample_id}/{purpose}"


def derive_seed(global_seed: int | str, dataset: str, split: str, sample_id: str, purpose: str) -> int:
    """First 8 bytes (little endian) of SHA-256 over the UTF-8 seed string, as an int in [0, 2**64)."""
    digest = hashlib.sha256(seed_string(global_seed, dataset, split, sample_id, purpose).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def rng(global_seed: int | str, dataset: str, split: str, sample_id: str, purpose: str) -> np.random.Generator:
    """``numpy.random.default_rng(derive_seed(...))``."""
    return np.random.default_rng(derive_seed(global_seed, dataset, split, sample_id, purpose))
