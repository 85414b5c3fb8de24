"""This machine's copy bandwidth, measured in the benchmark's own process: the ceiling a
streaming kernel (read its input once, write its output once) is compared against."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from bench._peer import time_call

BUFFER_BYTES = 128 << 20  # four times a 32 MB L3: the copy streams from and to memory


@lru_cache(maxsize=1)
def copy_bandwidth() -> float:
    """Bytes per second moved (read + written) by ``np.copyto`` of a 128 MB buffer, median of 7."""
    src = np.ones(BUFFER_BYTES, np.uint8)
    dst = np.zeros_like(src)
    seconds = time_call(lambda: np.copyto(dst, src), 7)
    return 2.0 * BUFFER_BYTES / seconds


def bandwidth_share(bytes_moved: int, seconds: float) -> tuple[float, float]:
    """``(GB/s, fraction of copy_bandwidth())`` of a call that moved ``bytes_moved`` in ``seconds``."""
    rate = bytes_moved / seconds
    return rate / 1e9, rate / copy_bandwidth()
