"""Per (model, stage) compute records: wall time, samples, peak memory.

Peak memory is, by what is available: ``torch.cuda.max_memory_allocated`` on a CUDA device
(reset before each measured call), the tracemalloc peak of Python and numpy allocations when
tracing is on (``--trace-memory``; it slows Python-heavy code), else the process's peak
resident set size (``getrusage``; a process-wide high-water mark, not per stage).

Stages may be measured from two threads at once (device evaluation scores one batch while the
model runs the next). Then (``per_stream``) a CUDA measurement waits only for its own thread's
stream rather than the whole device; the peak counter is shared by the process, so
overlapping stages report a common peak.
"""

from __future__ import annotations

import resource
import sys
import threading
import time
import tracemalloc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from icl.store import ComputeRecord


@dataclass
class Timing:
    """Filled when a measured block ends."""

    elapsed: float = 0.0


@dataclass
class _Acc:
    samples: int = 0
    wall_s: float = 0.0
    peak: Optional[int] = None


def _max_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


class ComputeMeter:
    """Accumulates measured calls; ``records(run_id)`` returns one record per (model, stage)."""

    def __init__(self, device: str = "cpu", trace_memory: bool = False):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.trace = trace_memory and not self.cuda
        if self.trace and not tracemalloc.is_tracing():
            tracemalloc.start()
        self.kind = "cuda-max-allocated" if self.cuda else ("tracemalloc-peak" if self.trace else "process-max-rss")
        self._acc: dict[tuple[str, str], _Acc] = {}
        self._lock = threading.Lock()
        self.per_stream = False  # set while another thread scores on its own CUDA stream

    @contextmanager
    def measure(self, model: str, stage: str, samples: int) -> Iterator[Timing]:
        if self.cuda:
            import torch

            self._sync(torch)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.trace:
            tracemalloc.reset_peak()
        timing = Timing()
        t0 = time.perf_counter()
        try:
            yield timing
        finally:
            timing.elapsed = time.perf_counter() - t0
            if self.cuda:
                import torch

                self._sync(torch)
                peak = int(torch.cuda.max_memory_allocated(self.device))
            elif self.trace:
                peak = tracemalloc.get_traced_memory()[1]
            else:
                peak = _max_rss_bytes()
            self.add(model, stage, samples, timing.elapsed, peak)

    def add(self, model: str, stage: str, samples: int, seconds: float, peak: Optional[int] = None) -> None:
        """Account a call measured elsewhere (a Ray worker reports its own time and peak)."""
        with self._lock:
            acc = self._acc.setdefault((model, stage), _Acc())
            acc.wall_s += seconds
            acc.samples += samples
            if peak is not None:
                acc.peak = peak if acc.peak is None else max(acc.peak, peak)

    def _sync(self, torch: Any) -> None:
        if self.per_stream:
            torch.cuda.current_stream(self.device).synchronize()
        else:
            torch.cuda.synchronize(self.device)

    def records(self, run_id: str) -> list[ComputeRecord]:
        return [ComputeRecord(run_id, model, stage, self.device, a.samples, a.wall_s, a.peak, self.kind)
                for (model, stage), a in sorted(self._acc.items())]

    def close(self) -> None:
        if self.trace and tracemalloc.is_tracing():
            tracemalloc.stop()
