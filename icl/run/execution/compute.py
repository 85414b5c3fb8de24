"""Per (model, stage) compute records: wall time, samples, peak memory.

Peak memory is, by what is available: ``torch.cuda.max_memory_allocated`` on a CUDA device
(reset before each measured call), the tracemalloc peak of Python and numpy allocations when
tracing is on (``--trace-memory``; it slows Python-heavy code), else the process's peak
resident set size (``getrusage``; a process-wide high-water mark, not per stage).

Each measured block also reports its own cost on its :class:`Timing`: the peak of the counter
above at the block's end (on the CPU without tracing, ``ru_maxrss`` is the process's high-water
mark so far, not the block's own growth) and the energy the GPU reports through NVML
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded; Volta and
newer) as the difference of two readings around the block, when ``pynvml`` (the
``nvidia-ml-py`` package, never a dependency) imports and the device answers; else None.

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
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from icl.store import ComputeRecord


@dataclass
class Timing:
    """Filled when a measured block ends: seconds, the memory counter's peak (bytes, counter
    ``ComputeMeter.kind``), the energy (joules; None when not reported)."""

    elapsed: float = 0.0
    peak: Optional[int] = None
    energy_j: Optional[float] = None


EnergyReader = Callable[[], Optional[float]]  # millijoules consumed so far; None when not reported


def nvml_energy_reader(device: str) -> Optional[EnergyReader]:
    """A reader of the CUDA ``device``'s energy counter (millijoules), or None when pynvml is
    not importable, NVML does not start or the GPU does not report energy."""
    if not device.startswith("cuda"):
        return None
    try:
        import pynvml  # nvidia-ml-py: optional

        pynvml.nvmlInit()
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        import torch

        if torch.cuda.is_available():  # NVML counts every GPU; CUDA may see a subset (CUDA_VISIBLE_DEVICES)
            uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
            handle = (pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}") if uuid is not None
                      else pynvml.nvmlDeviceGetHandleByIndex(index))
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # raises where not supported
    except Exception:  # no pynvml, no driver, an old GPU: energy is simply not reported
        return None
    return lambda: float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))


def energy_joules(before: Optional[float], after: Optional[float]) -> Optional[float]:
    """Joules between two millijoule readings (None when either is missing or the counter
    went back, e.g. a driver reload)."""
    if before is None or after is None or after < before:
        return None
    return (after - before) / 1000.0


@dataclass
class _Acc:
    samples: int = 0
    wall_s: float = 0.0
    peak: Optional[int] = None


def max_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


class ComputeMeter:
    """Accumulates measured calls; ``records(run_id)`` returns one record per (model, stage)."""

    def __init__(self, device: str = "cpu", trace_memory: bool = False,
                 energy: Optional[EnergyReader] = None):
        """``energy``: the energy counter to read (default: NVML's on a CUDA device, if any)."""
        self.device = device
        self.energy = energy if energy is not None else nvml_energy_reader(device)
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
        before = self._read_energy()
        t0 = time.perf_counter()
        try:
            yield timing
        finally:
            timing.elapsed = time.perf_counter() - t0
            if self.cuda:
                import torch

                self._sync(torch)
                peak = int(torch.cuda.max_memory_allocated(self.device))
            else:
                peak = tracemalloc.get_traced_memory()[1] if self.trace else max_rss_bytes()
            timing.peak = peak
            timing.energy_j = energy_joules(before, self._read_energy())
            self.add(model, stage, samples, timing.elapsed, peak)

    def add(self, model: str, stage: str, samples: int, seconds: float, peak: Optional[int] = None) -> None:
        """Account a call measured elsewhere (a Ray worker reports its own time and peak)."""
        with self._lock:
            acc = self._acc.setdefault((model, stage), _Acc())
            acc.wall_s += seconds
            acc.samples += samples
            if peak is not None:
                acc.peak = peak if acc.peak is None else max(acc.peak, peak)

    def _read_energy(self) -> Optional[float]:
        if self.energy is None:
            return None
        try:
            return self.energy()
        except Exception:  # a reading that fails is a reading not taken
            return None

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


@dataclass(frozen=True)
class CallCost:
    """One request's share of a model call: seconds (the call's wall time / its requests),
    the call's memory peak (shared by its requests, not divided; counter ``memory_kind``),
    energy in joules (the call's / its requests; None when not reported) and the generator's
    record of this request's image (None for other models and for answers from the store)."""

    seconds: float = 0.0
    peak_memory_bytes: Optional[int] = None
    memory_kind: Optional[str] = None
    energy_j: Optional[float] = None
    generation: Optional[dict] = None

    def plus(self, other: "CallCost") -> "CallCost":
        """An item's total over its calls: seconds and energy add, the peak is the highest."""
        peaks = [p for p in (self.peak_memory_bytes, other.peak_memory_bytes) if p is not None]
        energy = None if self.energy_j is None and other.energy_j is None else \
            (self.energy_j or 0.0) + (other.energy_j or 0.0)
        return CallCost(self.seconds + other.seconds, max(peaks) if peaks else None,
                        other.memory_kind or self.memory_kind, energy, other.generation or self.generation)


def call_costs(timing: Timing, kind: str, n: int) -> CallCost:
    """Each of ``n`` requests' share of the measured call ``timing``."""
    n = max(n, 1)
    return CallCost(timing.elapsed / n, timing.peak, kind, None if timing.energy_j is None else timing.energy_j / n)


def summarise_costs(scores: Mapping[str, Sequence[Any]]) -> dict[str, dict[str, Any]]:
    """Per model label, the per-sample compute of its stored scores (:class:`icl.store.Score`):
    ``measured`` items (answered by a model call, ``model_s`` > 0; answers reused from the store
    cost nothing in this run), their model seconds per item (mean, median, 95th percentile,
    total), scoring seconds per item (mean), the highest peak memory and its counter, and the
    energy (joules: total and mean per item over the ``energy_items`` that report it)."""
    import numpy as np

    out: dict[str, dict[str, Any]] = {}
    for label, rows in scores.items():
        measured = [s for s in rows if s.model_s > 0]
        seconds = np.array([s.model_s for s in measured], dtype=np.float64)
        peaks = [s.peak_memory_bytes for s in measured if s.peak_memory_bytes is not None]
        energy = [s.energy_j for s in measured if s.energy_j is not None]
        kinds = sorted({s.memory_kind for s in measured if s.memory_kind})
        out[label] = dict(
            items=len(rows), measured=len(measured),
            model_s_mean=float(seconds.mean()) if len(seconds) else None,
            model_s_median=float(np.median(seconds)) if len(seconds) else None,
            model_s_p95=float(np.percentile(seconds, 95)) if len(seconds) else None,
            model_s_total=float(seconds.sum()),
            score_s_mean=float(np.mean([s.score_s for s in rows])) if rows else None,
            peak_memory_bytes=max(peaks) if peaks else None, memory_kind=", ".join(kinds) or None,
            energy_items=len(energy), energy_j_total=float(sum(energy)) if energy else None,
            energy_j_mean=float(np.mean(energy)) if energy else None,
        )
    return out
