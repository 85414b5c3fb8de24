"""Device-resident evaluation for the runner: batch uploads and the scoring pipeline.

With ``--eval device`` (the default on CUDA) predictions are decoded and scored as tensors on
the run's device (``Benchmark.score_batch(..., device=...)``). Adapters that accept tensors receive
each batch's images uploaded once (:func:`upload`); the others receive numpy requests and
their outputs move to the device for scoring. :class:`ScorePipeline` decodes and scores batch
``i`` in one background thread (on its own CUDA stream) while the main thread runs the model
on batch ``i + 1``; results are handed back in order and the store is written on the main
thread.
"""

from __future__ import annotations

from collections import deque
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Optional, Sequence

import numpy as np

EVAL_MODES = ("auto", "host", "device")


def eval_device(device: str, mode: str) -> Optional[str]:
    """The device predictions are scored on, or None for the host (numpy) path. ``auto``
    scores on CUDA devices and on the host otherwise."""
    if mode not in EVAL_MODES:
        raise ValueError(f"eval mode: expected one of {EVAL_MODES}, got {mode!r}")
    if mode == "device" or (mode == "auto" and device.startswith("cuda")):
        return device
    return None


def upload(arrays: Sequence[np.ndarray], device: str) -> list[Any]:
    """The arrays as tensors on ``device``: each distinct array (by identity) crosses once, and
    arrays of one shape and dtype cross together in one stacked copy (pinned and asynchronous
    on CUDA). Returns views, in order."""
    import torch

    dev = torch.device(device)
    slots: dict[int, int] = {}
    unique: list[np.ndarray] = []
    for a in arrays:
        if id(a) not in slots:
            slots[id(a)] = len(unique)
            unique.append(a)
    groups: dict[tuple, list[int]] = {}
    for j, a in enumerate(unique):
        groups.setdefault((a.shape, a.dtype.str), []).append(j)
    out: list[Any] = [None] * len(unique)
    for members in groups.values():
        host = torch.from_numpy(np.stack([unique[j] for j in members]))
        if dev.type == "cuda":
            stacked = host.pin_memory().to(dev, non_blocking=True)
        else:
            stacked = host.to(dev)
        for j, t in zip(members, stacked.unbind(0)):
            out[j] = t
    return [out[slots[id(a)]] for a in arrays]


def tensor_requests(requests: Sequence[Any], device: str) -> list[Any]:
    """The requests with every image uploaded to ``device`` in one go (see :func:`upload`)."""
    from dataclasses import replace

    arrays: list[np.ndarray] = []
    for r in requests:
        arrays += [r.query, *r.context_inputs, *r.context_outputs]
        if r.oracle_target is not None:
            arrays.append(r.oracle_target)
    tensors = iter(upload(arrays, device))
    out = []
    for r in requests:
        query = next(tensors)
        c_in = [next(tensors) for _ in r.context_inputs]
        c_out = [next(tensors) for _ in r.context_outputs]
        oracle = next(tensors) if r.oracle_target is not None else None
        out.append(replace(r, query=query, context_inputs=c_in, context_outputs=c_out, oracle_target=oracle,
                           device=device))
    return out


def tensors_in(outputs: Any) -> list[Any]:
    """The torch tensors among a batch's outputs (a list, or one batched tensor)."""
    from icl.run.execution.responses import is_tensor

    if is_tensor(outputs):
        return [outputs]
    return [p for p in outputs if is_tensor(p)]


class ScorePipeline:
    """Runs scoring jobs in one worker thread, at most one batch behind the main thread.

    ``submit(job, commit, outputs)`` queues ``job()`` (decode and score, returning what
    ``commit`` writes) and then commits, on the calling thread and in submission order, every
    finished job but the newest, so that the model can run on the next batch meanwhile;
    ``commit_ready()`` commits the jobs scored since, waiting for nothing (the engine calls it
    while it waits for the model). ``drain()`` commits everything. Without overlap, ``submit``
    runs and commits at once. On CUDA the worker scores on its own stream, after the model's work
    queued so far.

    ``waits(result)``: whether committing a finished job would wait for values a helper process
    still computes (:class:`icl.helpers.Deferred`); such jobs stay queued, up to
    ``MAX_WAITING`` of them, while the next batches are scored, and are committed, in order,
    once their values are there (or when the queue is full, or at ``drain``).

    Waits look at the run's stop flag (SIGTERM, Ctrl-C: :func:`icl._signals.check_stop`), and
    ``close(stopping=True)`` (a run that stops) commits only what is ready, waiting for nothing:
    the worker is a daemon thread, so a job stuck on a helper never holds up the exit.
    """

    #: seconds a stopping run waits, in all, for jobs still being scored before dropping them
    STOP_GRACE_S = 2.0
    #: finished jobs waiting for helpers' values that may stay queued (their outputs are held)
    MAX_WAITING = 16

    def __init__(self, device: Optional[str], overlap: bool):
        self.overlap = overlap
        self.device = device
        self.stream: Any = None
        if device is not None:
            import torch  # loaded here, not inside the first batch's model time

            if self.overlap and device.startswith("cuda"):
                self.stream = torch.cuda.Stream(torch.device(device))
        self._pool = _Worker() if self.overlap else None
        self._queue: deque[tuple[Future, Callable[[Any], None], Optional[Callable[[Any], bool]]]] = deque()

    def submit(self, job: Callable[[], Any], commit: Callable[[Any], None], outputs: Any = (),
               waits: Optional[Callable[[Any], bool]] = None) -> None:
        if self._pool is None:
            commit(job())
            return
        ready = None
        if self.stream is not None:
            import torch

            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(self.device))  # after the model's queued work
            for t in tensors_in(outputs):
                if t.is_cuda:  # the allocator must not reuse their memory before the scoring stream is done
                    t.record_stream(self.stream)
        self._queue.append((self._pool.submit(self._run, job, ready), commit, waits))
        while len(self._queue) > 1 and (len(self._queue) > self.MAX_WAITING or not self._waiting(self._queue[0])):
            self._commit_oldest()

    @staticmethod
    def _waiting(entry: tuple) -> bool:
        """Whether the job, once scored (waited for here), would wait for a helper's values at
        its commit (see the class)."""
        future, _, waits = entry
        _wait(future)
        return waits is not None and future.exception() is None and waits(future.result())

    def _run(self, job: Callable[[], Any], ready: Any) -> Any:
        if self.stream is None:
            return job()
        import torch

        with torch.cuda.stream(self.stream):
            self.stream.wait_event(ready)
            out = job()
            self.stream.synchronize()
            return out

    def _commit_oldest(self) -> None:
        future, commit, _ = self._queue.popleft()
        commit(_wait(future))

    def commit_ready(self) -> None:
        """Commit, in order, the queued jobs already scored whose values are all there, waiting
        for nothing (the engine calls it while it waits for a model: a batch is committed as soon
        as it is scored). A job that failed is left for :meth:`drain` to raise."""
        while self._queue:
            future, _, waits = self._queue[0]
            if not future.done() or future.exception() is not None or (
                    waits is not None and waits(future.result())):
                return
            self._commit_oldest()

    def drain(self) -> None:
        """Wait for every queued job and commit it, in order."""
        while self._queue:
            self._commit_oldest()

    def close(self, stopping: bool = False) -> None:
        """Commit what is queued, then stop the worker. ``stopping`` (the run was told to
        stop): commit the jobs that are scored with every value there, drop the others (a rerun
        redoes them), wait for nothing."""
        try:
            if stopping:
                # a job still being scored gets a short grace (scoring is milliseconds; a job stuck
                # on a stopped helper is what must not hold the stop up), then is dropped
                deadline = time.monotonic() + self.STOP_GRACE_S
                while self._queue:
                    future, commit, waits = self._queue.popleft()
                    try:
                        future.exception(timeout=max(0.0, deadline - time.monotonic()))
                    except FutureTimeout:
                        continue
                    if future.exception() is None and not (waits and waits(future.result())):
                        commit(future.result())
            else:
                self.drain()
        finally:
            self._queue.clear()
            if self._pool is not None:
                self._pool.shutdown()


def _wait(future: Future) -> Any:
    """``future.result()``, looking at the run's stop flag meanwhile."""
    from icl._signals import check_stop

    while True:
        try:
            return future.result(timeout=0.1)
        except FutureTimeout:
            if threading.current_thread() is threading.main_thread():
                check_stop()


class _Worker:
    """One daemon thread running jobs in order (a ``ThreadPoolExecutor``'s threads are joined
    at the interpreter's exit: a scoring job stuck on a helper would hold a stopped run up)."""

    def __init__(self) -> None:
        self._jobs: "queue.SimpleQueue[Optional[tuple]]" = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="icl-score", daemon=True).start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # everything goes to the committing thread
                future.set_exception(exc)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        self._jobs.put(None)
