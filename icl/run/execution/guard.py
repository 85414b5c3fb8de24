"""Call a model's ``predict`` on one batch so that nothing it does can harm the run.

:class:`ModelGuard` wraps a ``predict(requests) -> outputs`` callable and returns one
:class:`ItemOutcome` per request (``ok`` with the value, ``error`` with type and message, or
``timeout``), never raising for what the model does:

- Inputs: every numpy array of a request is copied and the copy made read-only (torch tensors
  are cloned), so a model that edits its inputs in place changes neither the caller's arrays
  nor what the next model sees. The caller's arrays and their flags are never touched. The
  copies are made inside the guarded call, so a copy that cannot be made (a ``MemoryError``
  for one request's huge image) is that call's error: the batch is retried one request at a
  time and only the request that cannot be copied fails.
- Exceptions: a batch that raises (or answers with the wrong number of outputs) is retried one
  request at a time, so only the failing requests fail. ``sys.exit`` inside a model is an
  ``error`` of type ``SystemExit``. ``KeyboardInterrupt`` is not contained: Ctrl-C still stops
  the run (it arrives in the caller's thread, which only waits for the model, checking
  :func:`check_stop` while it waits).
- Timeout: the model runs in one worker thread owned by the guard; the caller waits at most
  ``timeout_s`` per call. Python cannot kill a thread, so on a timeout the thread keeps running
  the batch in the background (it is a daemon thread and does not keep the process alive). The
  batch's requests are recorded as ``timeout``, and while that thread is still busy the model is
  *hung*: every later call returns ``timeout`` at once without calling it (a model is never
  entered twice concurrently). If the thread finishes later, its answer is discarded and the
  model is called again normally.
- Outputs that are read-only numpy arrays (a model handing back its input copy) are copied, so
  the caller may modify what it gets.
- Output size: an output far larger than its request allows (``output_limit(request)``
  elements; :func:`default_output_limit` allows 16 times the requested image size, or 64
  characters per allowed new token) is an ``error`` of type ``OutputTooLarge``.

Signals: inside :func:`stop_on_signals` (``sigterm_as_interrupt`` is the same), SIGTERM and
SIGINT only set a flag; :func:`check_stop` raises ``KeyboardInterrupt`` where stopping is safe:
the runner calls it between batches, the guard while it waits for the model, and the block
itself on its way out. A handler that raised at an arbitrary point could land in a finaliser or
a callback where Python prints and drops the exception (a SIGTERM then lost, the run ending
with exit 0); a flag cannot be dropped. A second signal while the first is pending raises at
once (a run stuck loading a model still stops on a second Ctrl-C).
"""

from __future__ import annotations

import copy
import dataclasses
import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from icl._signals import check_stop
from icl.models.requests import AnalogyRequest, ChatRequest, GenerationRequest

OK, ERROR, TIMEOUT = "ok", "error", "timeout"
#: how many times the requested image (or text budget) an output may be
OUTPUT_FACTOR = 16
_CHARS_PER_TOKEN = 64
_DEFAULT_IMAGE = (1024, 1024)
_POLL_S = 0.1  # how often a caller waiting for the model looks at the stop flag


@dataclass(frozen=True)
class ItemOutcome:
    """What became of one request: ``status`` "ok" (``value`` set), "error" (``error_type``,
    ``message``) or "timeout" (``message``); ``seconds``: its share of the model time."""

    status: str
    value: Any = None
    error_type: Optional[str] = None
    message: Optional[str] = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == OK


def readonly_copy(obj: Any) -> Any:
    """A deep copy of the arrays inside ``obj`` (dataclasses, lists, tuples, dicts), each numpy
    array copied and marked read-only, each torch tensor cloned; other values are shared."""
    if isinstance(obj, np.ndarray):
        out = np.array(obj, copy=True)
        out.flags.writeable = False
        return out
    if type(obj).__module__.startswith("torch") and hasattr(obj, "clone") and hasattr(obj, "detach"):
        return obj.detach().clone()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        new = copy.copy(obj)
        for f in dataclasses.fields(obj):
            object.__setattr__(new, f.name, readonly_copy(getattr(obj, f.name)))
        return new
    if isinstance(obj, tuple):
        items = [readonly_copy(v) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, list):
        return [readonly_copy(v) for v in obj]
    if isinstance(obj, dict):
        return {k: readonly_copy(v) for k, v in obj.items()}
    return obj


def output_size(value: Any) -> int:
    """Elements in an output: array or tensor elements, characters, bytes; summed over containers."""
    if isinstance(value, np.ndarray):
        return int(value.size)
    if hasattr(value, "numel") and callable(value.numel):
        return int(value.numel())
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(output_size(v) for v in value)
    if isinstance(value, dict):
        return sum(output_size(v) for v in value.values())
    return 0


def default_output_limit(request: Any) -> Optional[int]:
    """Most output elements a request allows: :data:`OUTPUT_FACTOR` times an RGB image of the
    requested size (``target_size`` of an analogy, ``size`` of a generation, 1024 x 1024 when
    unset), or :data:`OUTPUT_FACTOR` x 64 characters per ``max_new_tokens`` of a chat request,
    at least 64 KiB; None (no limit) for other request types."""
    if isinstance(request, AnalogyRequest):
        h, w = request.target_size
    elif isinstance(request, GenerationRequest):
        h, w = request.size or _DEFAULT_IMAGE
    elif isinstance(request, ChatRequest):
        return max(1 << 16, OUTPUT_FACTOR * _CHARS_PER_TOKEN * int(request.max_new_tokens))
    else:
        return None
    return OUTPUT_FACTOR * int(h) * int(w) * 3


class _Call:
    __slots__ = ("fn", "done", "result", "error")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[BaseException] = None


_profiles: Optional[list] = None  # the worker threads' profilers while profile_workers() is on


def _thread_profiler(profiles: list) -> Any:
    """A cProfile profiler for the calling worker thread, kept in ``profiles`` (None where the
    interpreter cannot profile a second thread, as Python 3.12's sys.monitoring-based cProfile)."""
    import cProfile

    prof = cProfile.Profile()
    try:
        prof.enable()
        prof.disable()
    except ValueError:  # "Another profiling tool is already active"
        return None
    profiles.append(prof)
    return prof


@contextmanager
def profile_workers() -> Iterator[list]:
    """Inside the block every model call in a guard's worker thread runs under a
    :class:`cProfile.Profile` of that thread (one per thread, enabled only around the calls);
    yields the list of them, to add to the main thread's stats (``--profile``: the model's
    batches run in the worker, which the main thread's profiler does not see)."""
    global _profiles
    profiles: list = []
    _profiles = profiles
    try:
        yield profiles
    finally:
        _profiles = None


class _Worker:
    """One daemon thread running calls in order (a model always sees the same thread)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.current: Optional[_Call] = None
        threading.Thread(target=self._loop, name=f"icl-model-{name}", daemon=True).start()

    def _loop(self) -> None:
        prof: Any = None  # this thread's profiler while :func:`profile_workers` is on
        while True:
            call: Optional[_Call] = self._jobs.get()
            if call is None:  # close(): the thread ends after the call it was running
                return
            profiles = _profiles
            if profiles is not None and prof is None:
                prof = _thread_profiler(profiles)
            running = profiles is not None and prof is not None
            try:
                if running:
                    prof.enable()
                call.result = call.fn()
            except BaseException as exc:  # everything goes back to the caller, SystemExit included
                call.error = exc
            finally:
                if running:
                    prof.disable()  # before done: the caller may dump the stats as soon as it is told
                call.done.set()

    @property
    def busy(self) -> bool:
        return self.current is not None and not self.current.done.is_set()

    def submit(self, fn: Callable[[], Any]) -> _Call:
        call = _Call(fn)
        self.current = call
        self._jobs.put(call)
        return call

    def stop(self) -> None:
        self._jobs.put(None)


def _length(value: Any) -> str:
    try:
        return str(len(value))
    except Exception:  # no length (or a broken __len__)
        return "?"


def _describe(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, SystemExit):
        return "SystemExit", f"the model called sys.exit({exc.code!r})"
    text = str(exc) or type(exc).__name__
    return type(exc).__name__, text[:2000]


class ModelGuard:
    """Guarded calls of ``predict`` (see the module docstring).

    ``timeout_s``: seconds one call may take (None: no limit; the default is generous);
    ``output_limit``: ``request -> max elements`` (None: no limit); ``copy_inputs``: give the
    model read-only copies (turn off only for adapters that receive device tensors they must
    not be handed twice); ``name``: used in messages and the worker thread's name.
    """

    def __init__(self, predict: Callable[[list], Any], *, timeout_s: Optional[float] = 3600.0,
                 output_limit: Optional[Callable[[Any], Optional[int]]] = default_output_limit,
                 copy_inputs: bool = True, name: str = "model") -> None:
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds or None, got {timeout_s!r}")
        self.predict = predict
        self.timeout_s = timeout_s
        self.output_limit = output_limit
        self.copy_inputs = copy_inputs
        self.name = name
        self._closed = False
        self._worker = _Worker(name)

    @property
    def hung(self) -> bool:
        """True while a call that timed out is still running in the worker thread."""
        return self._worker.busy

    def close(self) -> None:
        """End the worker thread (after a call it may still be running); the guard is unusable after."""
        if not self._closed:
            self._closed = True
            self._worker.stop()

    def __enter__(self) -> "ModelGuard":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, requests: Sequence[Any]) -> list[ItemOutcome]:
        """One :class:`ItemOutcome` per request, in order."""
        if self._closed:
            raise RuntimeError(f"ModelGuard for {self.name!r} is closed")
        requests = list(requests)
        if not requests:
            return []
        if self.hung:
            return [ItemOutcome(TIMEOUT, message=f"model {self.name!r} is still running a batch that timed out; "
                                             f"not called again until it returns") for _ in requests]
        outcomes, failure = self._batch(requests)
        if outcomes is not None:
            return outcomes
        if failure.status == TIMEOUT or len(requests) == 1:
            return [failure] * len(requests)
        # retry one by one so that only the failing requests fail
        out = []
        for req in requests:
            if self.hung:
                out.append(ItemOutcome(TIMEOUT, message=f"model {self.name!r} is still running a batch that timed out"))
                continue
            single, fail = self._batch([req])
            out.append(single[0] if single is not None else fail)
        return out

    def _batch(self, requests: list) -> tuple[Optional[list[ItemOutcome]], ItemOutcome]:
        """``(outcomes, unused)`` when the call returned one output per request, else ``(None, failure)``."""
        copy_inputs, predict = self.copy_inputs, self.predict

        def guarded() -> Any:  # the copies are part of the guarded call (see the module docstring)
            return predict([readonly_copy(r) for r in requests] if copy_inputs else list(requests))

        start = time.perf_counter()
        call = self._worker.submit(guarded)
        finished = _wait(call.done, self.timeout_s)  # Ctrl-C and SIGTERM stop this wait in the caller's thread
        seconds = time.perf_counter() - start
        if not finished:
            return None, ItemOutcome(TIMEOUT, message=f"model {self.name!r} did not answer {len(requests)} request(s) "
                                                  f"within {self.timeout_s:g} s", seconds=seconds)
        if call.error is not None:
            if isinstance(call.error, KeyboardInterrupt):
                raise call.error
            kind, text = _describe(call.error)
            return None, ItemOutcome(ERROR, error_type=kind, message=text, seconds=seconds)
        values = self._split(call.result, len(requests))
        if values is None:
            got = call.result
            return None, ItemOutcome(ERROR, error_type="OutputCountError", seconds=seconds,
                                     message=f"model {self.name!r} returned {type(got).__name__} of length "
                                             f"{_length(got)} for {len(requests)} request(s)")
        share = seconds / len(requests)
        return [self._check(req, value, share) for req, value in zip(requests, values)], ItemOutcome(OK)

    @staticmethod
    def _split(result: Any, n: int) -> Optional[list]:
        """One value per request, or None when ``result`` is not n outputs (never raises)."""
        if isinstance(result, (list, tuple)):
            return list(result) if len(result) == n else None
        try:
            shape = tuple(getattr(result, "shape", None) or ())
            if len(shape) == 4 and shape[0] == n:  # one [B, h, w, 3] batch
                return [result[i] for i in range(n)]
        except Exception:  # an object with a strange shape: not a batch
            return None
        return None

    def _check(self, request: Any, value: Any, seconds: float) -> ItemOutcome:
        limit = None if self.output_limit is None else self.output_limit(request)
        if limit is not None:
            try:
                size = output_size(value)
            except Exception as exc:  # an output whose size cannot even be measured
                return ItemOutcome(ERROR, error_type="InvalidOutput", seconds=seconds,
                                   message=f"cannot measure the output ({type(exc).__name__}: {exc})"[:2000])
            if size > limit:
                return ItemOutcome(ERROR, error_type="OutputTooLarge", seconds=seconds,
                               message=f"output of {size:,} elements exceeds the {limit:,} this request allows")
        if isinstance(value, np.ndarray) and not value.flags.writeable:
            value = value.copy()  # a model that hands back its read-only input: callers get their own array
        return ItemOutcome(OK, value=value, seconds=seconds)


def _wait(done: threading.Event, timeout_s: Optional[float]) -> bool:
    """Wait for ``done`` up to ``timeout_s`` (None: no limit), looking at the stop flag meanwhile."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
        if left <= 0:
            return done.is_set()
        if done.wait(left):
            return True
        check_stop()
        idle_work()


# what the main thread does while it waits for a model (the engine commits its scored batches);
# main thread only, like the stop flag
_idle: list[Callable[[], None]] = []


@contextmanager
def while_waiting(work: Callable[[], None]) -> Iterator[None]:
    """Inside the block, a caller waiting for a model (:func:`_wait`, the Ray pool's wait) runs
    ``work`` every poll: the engine commits the batches scored meanwhile, so a batch is in the
    store as soon as it is scored, not after the next batch's model call."""
    _idle.append(work)
    try:
        yield
    finally:
        _idle.remove(work)


def idle_work() -> None:
    """Run the work registered by :func:`while_waiting` (called between polls of a wait)."""
    for work in list(_idle):
        work()
