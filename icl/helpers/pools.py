"""The run's side of the helper processes: the named pools, starting and stopping helpers, jobs
handed to them (or run here when no helper can serve), stuck helpers killed, deferred values
(:mod:`icl.helpers`)."""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from icl._parse import env_bool, env_number
from icl._signals import check_stop
from icl.helpers.wire import ANSWER, BEAT, HEADER, HELLO, JOB, MAGIC, MAX_FRAME, Target, boot_argv, resolve


ENV = "ICL_HELPERS"
SILENCE_S = 30.0
#: seconds one job may take in a helper before the helper is killed and the job runs here:
#: ``ICL_HELPER_DEADLINE_S``
DEADLINE_S = 3600.0
_POLL_S = 0.1  # how often a caller waiting for a helper looks at the run's stop flag


@dataclass(frozen=True)
class PoolSpec:
    """A pool of ``size`` helpers (see :func:`pool_size`), each first running ``warm_up``
    (``"module:name"``: imports and caches)."""
    size: int
    warm_up: str
    doc: str
    nice: int = 0  # added to the helpers' niceness: work needed later yields the CPU to work needed now
    fork: bool = False  # helpers after the first are forked from it once warm (one thread each)


POOLS: dict[str, PoolSpec] = {
    # drawn after the tables, so their start-up must not slow the run (or the LPIPS helper) down
    "figures": PoolSpec(2, "icl.report.plots:warm_up", "matplotlib figures (PNG and SVG)", nice=10, fork=True),
    "lpips": PoolSpec(1, "icl.ops.lpips:warm_up", "LPIPS of host images: torch and the weights loaded once, "
                                                   "features cached by content in the one helper"),
}


class HelperLost(RuntimeError):
    """A helper process ended (or never started) before it answered: the job runs here."""


class HelperError(RuntimeError):
    """A job's exception that could not be carried back as its own type (its traceback as text)."""


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def pool_size(name: str) -> int:
    """Helpers of pool ``name`` here: none when ``ICL_HELPERS`` is false or on a single CPU
    (a helper would only compete with the run), else the pool's size, at most the CPUs."""
    if not env_bool(ENV, True):
        return 0
    cpus = _cpus()
    return 0 if cpus < 2 else min(POOLS[name].size, cpus)


def _address(target: Target) -> Optional[tuple[str, str]]:
    """``(module, qualified name)`` a helper imports the target by, or None (a lambda, a local)."""
    if isinstance(target, str):
        module, _, name = target.partition(":")
        return (module, name) if module and name else None
    mod: Optional[str] = getattr(target, "__module__", None)
    qual: str = getattr(target, "__qualname__", "<")
    return None if mod is None or mod == "__main__" or "<" in qual else (mod, qual)


class Job:
    """A submitted job: :meth:`result` waits for it (running it here when no helper could)."""

    def __init__(self, target: Target, args: tuple[Any, ...], kwargs: dict[str, Any],
                 future: "Optional[Future[Any]]", pool: "Optional[HelperPool]" = None) -> None:
        self._target, self._args, self._kwargs, self._future = target, args, kwargs, future
        self._pool = pool

    @property
    def remote(self) -> bool:
        """Whether a helper took the job (else :meth:`result` runs it here)."""
        return self._future is not None

    def done(self) -> bool:
        """Whether :meth:`result` would not wait for a helper."""
        return self._future is None or self._future.done()

    def result(self) -> Any:
        """The job's value: waits for its helper (a SIGTERM or Ctrl-C of the run still stops
        the wait, :func:`icl._signals.check_stop`), or runs it here when no helper could."""
        if self._future is not None:
            try:
                return _wait(self._future)
            except HelperLost:
                pass
        return _here(self._target, self._args, self._kwargs)

    def settle(self, timeout_s: float) -> None:
        """For a job whose value is no longer wanted (a run that stops): wait at most
        ``timeout_s`` for its helper, then kill the pool's helpers if it is still running
        (nothing of it may go on writing files); never runs it here."""
        if self._future is None or self._future.done():
            return
        try:
            self._future.result(timeout=timeout_s)
        except FutureTimeout:
            if self._pool is not None:
                self._pool.kill()
        except BaseException:  # its error does not matter any more
            pass


def _check_stop() -> None:
    """The run's stop flag (SIGTERM, SIGINT: :mod:`icl._signals`), looked at from the main thread only."""
    if threading.current_thread() is threading.main_thread():
        check_stop()


def _wait(future: "Future[Any]") -> Any:
    while True:
        try:
            return future.result(timeout=_POLL_S)
        except FutureTimeout:
            _check_stop()


_here_lock = threading.RLock()


def _here(target: Target, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A job run in this process, one at a time: two threads falling back at once (a killed
    LPIPS helper's jobs, waited for by the scoring thread and the main thread) would import the
    job's module concurrently, and one of them would see ``torch`` partially initialised."""
    while not _here_lock.acquire(timeout=_POLL_S):
        _check_stop()
    try:
        return resolve(target)(*args, **kwargs)
    finally:
        _here_lock.release()


def _seconds(name: str, default: float) -> float:
    value: float = env_number(name, default)
    return value


def say(line: str) -> None:
    """One line on standard error while a run may be drawing its progress bar (a helper or a
    Ray worker that had to be killed), on a line of its own: the bar (tqdm) is cleared first and
    drawn again below it, not left with the line glued to its end. tqdm is used only when the
    run already loaded it."""
    bars = sys.modules.get("tqdm")
    try:
        if bars is not None and hasattr(bars, "tqdm"):
            bars.tqdm.write(line.rstrip(), file=sys.stderr)
        else:
            sys.stderr.write(line.rstrip() + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


#: the environment of a forking pool's helpers: one thread each (a process forked while other
#: threads run can hang; the pool's parallelism is its processes)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENCV_FOR_THREADS_NUM": "1"}


class _Stuck(RuntimeError):
    """A helper that is alive but not answering (no heartbeat, a job past its deadline) or
    whose answers stream is corrupt: it is killed."""


class _Frames:
    """The frames a helper writes (its answers stream), each read within a time limit."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.fd, self.buf = stream, stream.fileno(), bytearray()

    def _fill(self, n: int, silence_s: float) -> bool:
        """At least ``n`` bytes buffered; False when nothing came for ``silence_s``."""
        while len(self.buf) < n:
            ready, _, _ = select.select([self.fd], [], [], silence_s)
            if not ready:
                return False
            chunk = os.read(self.fd, max(1 << 16, n - len(self.buf)))
            if not chunk:
                raise EOFError("end of stream")
            self.buf += chunk
        return True

    def next(self, silence_s: float) -> Optional[tuple[int, bytes]]:
        """``(kind, payload)``, or None when the helper sent nothing for ``silence_s``."""
        if not self._fill(HEADER.size, silence_s):
            return None
        magic, kind, size = HEADER.unpack_from(self.buf)
        if magic != MAGIC or kind not in (ANSWER, BEAT, HELLO) or size > MAX_FRAME:
            raise _Stuck(f"wrote corrupt framing into its answers ({bytes(self.buf[:16])!r})")
        if not self._fill(HEADER.size + size, silence_s):
            return None
        payload = bytes(self.buf[HEADER.size:HEADER.size + size])
        del self.buf[:HEADER.size + size]
        return kind, payload


class _Helper:
    """One helper process (``proc``; None for one forked by another helper, whose pid its
    first frame says) and the thread that feeds it jobs from its pool's queue, one at a time,
    through ``send`` and ``answers``, watching its heartbeats."""

    def __init__(self, jobs: "queue.Queue[Optional[tuple[bytes, Future[Any], str]]]", send: Any, answers: Any,
                 proc: "Optional[subprocess.Popen[bytes]]", name: str = "") -> None:
        self.jobs, self.send, self.answers, self.proc, self.name = jobs, send, answers, proc, name
        self.pid: Optional[int] = proc.pid if proc is not None else None
        self.frames = _Frames(answers)
        self.busy = False  # a job sent, its answer not yet read
        self.killed = False
        self.thread = threading.Thread(target=self._feed, name="icl-helper", daemon=True)
        self.thread.start()

    @property
    def who(self) -> str:
        kind = f"{self.name} helper process" if self.name else "helper process"
        return f"{kind} {self.pid}" if self.pid is not None else f"forked {kind}"

    def _feed(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            message, future, label = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                self.busy = True
                self._put(message)
                answer = self._answer(label)
                self.busy = False
            except (OSError, EOFError, ValueError) as exc:  # ValueError: a closed pipe
                future.set_exception(HelperLost(f"{self.who} ended: {exc}"))
                self._drain()
                return
            except _Stuck as exc:  # alive but of no use: killed, its jobs run in the caller (one line)
                self.kill()
                say(f"icl: {self.who} {exc}; killed it, its jobs run in this process")
                future.set_exception(HelperLost(f"{self.who} {exc}"))
                self._drain()
                return
            try:
                ok, value, seconds = pickle.loads(answer)
            except Exception as exc:  # an exception type that cannot be rebuilt here
                ok, value, seconds = False, f"cannot read the helper's answer: {type(exc).__name__}: {exc}", 0.0
            _count(label, seconds)
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value if isinstance(value, BaseException) else HelperError(value))

    def _put(self, message: bytes) -> None:
        """Write a job frame; a helper that takes none of it for ``ICL_HELPER_SILENCE_S`` (a
        stopped one, with the pipe full) is :class:`_Stuck`."""
        silence = _seconds("ICL_HELPER_SILENCE_S", SILENCE_S)
        fd = self.send.fileno()
        os.set_blocking(fd, False)
        data = memoryview(HEADER.pack(MAGIC, JOB, len(message)) + message)
        while data:
            _, ready, _ = select.select([], [fd], [], silence)
            if not ready:
                raise _Stuck(f"took none of its job for {silence:g} s (stopped or frozen?)")
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue

    def _answer(self, label: str) -> bytes:
        """The answer to the job just sent; a helper silent for ``ICL_HELPER_SILENCE_S`` (a
        busy helper beats every :data:`HEARTBEAT_S`) or still at it after
        ``ICL_HELPER_DEADLINE_S`` is :class:`_Stuck`."""
        silence, deadline = _seconds("ICL_HELPER_SILENCE_S", SILENCE_S), _seconds("ICL_HELPER_DEADLINE_S", DEADLINE_S)
        start = time.monotonic()
        while True:
            frame = self.frames.next(silence)
            if frame is None:
                raise _Stuck(f"sent no heartbeat for {silence:g} s (stopped or frozen?)")
            kind, payload = frame
            if kind == ANSWER:
                return payload
            if kind == HELLO and self.pid is None:
                self.pid = int(payload)
            if time.monotonic() - start > deadline:
                raise _Stuck(f"ran job {label} past its deadline of {deadline:g} s")

    def kill(self) -> None:
        """SIGKILL (a stopped process too), and the pipes closed."""
        self.killed = True
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        for stream in (self.send, self.answers):
            try:
                stream.close()
            except OSError:
                pass

    def _drain(self) -> None:
        """This helper is gone: the jobs still queued run in the caller (:class:`Job`)."""
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                return
            if job is None:
                self.jobs.put(None)  # another helper's stop signal
                return
            if job[1].set_running_or_notify_cancel():
                job[1].set_exception(HelperLost("no helper process left"))

    def close(self) -> None:
        try:
            self.send.close()  # the helper exits at the end of its input
        except OSError:
            pass


class HelperPool:
    """``size`` helper processes sharing one queue of jobs (started on construction, each first
    running ``warm_up``; with ``fork``, all but the first forked from it once warm)."""

    def __init__(self, size: int, warm_up: Optional[str] = None, nice: int = 0, fork: bool = False,
                 name: str = "") -> None:
        self.pid, self.name = os.getpid(), name
        self.jobs: "queue.Queue[Optional[tuple[bytes, Future[Any], str]]]" = queue.Queue()
        self.helpers: list[_Helper] = []
        fork = fork and hasattr(os, "fork")  # POSIX: elsewhere every helper starts fresh
        env = {**os.environ, **ONE_THREAD} if fork else None
        # a forked helper's pipes: (its jobs' read end, its answers' write end) go to the first helper
        pipes = [(os.pipe(), os.pipe()) for _ in range(size - 1)] if fork and size > 1 else []
        kept = [(jobs_r, answers_w) for (jobs_r, _), (_, answers_w) in pipes]
        try:
            for _ in range(size if not pipes else 1):
                proc = subprocess.Popen(boot_argv(nice, warm_up or "", kept if pipes else []),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
                                        pass_fds=[fd for pair in kept for fd in pair] if pipes else (), env=env)
                self.helpers.append(_Helper(self.jobs, proc.stdin, proc.stdout, proc, name))
        except OSError:  # no process could start: the jobs run in the caller (or in those that did)
            pass
        for (jobs_r, jobs_w), (answers_r, answers_w) in pipes:
            os.close(jobs_r)  # the first helper holds them now (or nobody, and the pipes read as closed)
            os.close(answers_w)
            if self.helpers:
                self.helpers.append(_Helper(self.jobs, os.fdopen(jobs_w, "wb"), os.fdopen(answers_r, "rb"), None, name))
            else:
                os.close(jobs_w)
                os.close(answers_r)

    def submit(self, target: Target, *args: Any, **kwargs: Any) -> Job:
        address = _address(target)
        if address is None or not any(h.thread.is_alive() for h in self.helpers):
            return Job(target, args, kwargs, None)
        try:
            message = pickle.dumps((*address, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return Job(target, args, kwargs, None)
        future: Future[Any] = Future()
        self.jobs.put((message, future, ":".join(address)))
        return Job(target, args, kwargs, future, self)

    def close(self) -> None:
        """Stop the helpers: each ends at the end of its input once its job is answered; one
        without a job is stopped at once (it may still be warming up: importing torch, for
        a run that ended early, e.g. on a usage error); one still busy after 2 s is killed
        (a stopped helper would never end)."""
        for _ in self.helpers:
            self.jobs.put(None)
        for h in self.helpers:
            h.close()
        started = [h.proc for h in self.helpers if h.proc is not None]  # forked ones end at their input's end
        for h in self.helpers:
            if h.proc is not None and not h.busy:
                h.proc.terminate()
        deadline = time.monotonic() + 2
        for proc in started:  # all stopping at once, then waited for
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for h in self.helpers:
            if h.proc is None and h.busy and h.thread.is_alive():
                h.thread.join(max(0.0, deadline - time.monotonic()))
                if h.thread.is_alive():
                    h.kill()
        self.helpers = []

    def kill(self) -> None:
        """Kill every helper now (a run that stops and must not wait for them); later jobs run
        in the caller."""
        for h in self.helpers:
            h.kill()
        for h in self.helpers:
            if h.proc is not None:
                h.proc.wait()


class Deferred:
    """A score still being computed by a helper (LPIPS of host images): ``float()`` waits for
    it; ``ready()`` says whether that would not wait. ``values()`` returns the scores of its
    whole job (computed once); this one is ``values()[index]``. A benchmark may return such
    values from ``score_batch``: the runner commits them once ready (scoring the next batches
    meanwhile), and every other caller gets floats (:func:`resolved`)."""

    __slots__ = ("_values", "_index", "_ready")

    def __init__(self, values: Callable[[], Any], index: int, ready: Callable[[], bool] = lambda: True) -> None:
        self._values, self._index, self._ready = values, index, ready

    def ready(self) -> bool:
        return bool(self._ready())

    def __float__(self) -> float:
        return float(self._values()[self._index])


def resolved(scores: Any) -> Any:
    """``scores`` (a list of metric dicts) with every :class:`Deferred` value waited for, as a float."""
    return [{k: float(v) if isinstance(v, Deferred) else v for k, v in s.items()} for s in scores]


def pending(values: Any) -> bool:
    """Whether any of ``values`` is a :class:`Deferred` not ready yet."""
    return any(isinstance(v, Deferred) and not v.ready() for v in values)


_pools: dict[str, HelperPool] = {}
_lock = threading.Lock()


def pool(name: str) -> HelperPool:
    """This process's pool ``name`` (:data:`POOLS`), started on first use (a forked child
    starts its own)."""
    with _lock:
        p = _pools.get(name)
        if p is None or p.pid != os.getpid():
            spec = POOLS[name]
            p = _pools[name] = HelperPool(pool_size(name), spec.warm_up, spec.nice, spec.fork, name)
            if p.helpers:
                atexit.register(p.close)
        return p


def started() -> list[str]:
    """The pools this process has started (and not stopped)."""
    with _lock:
        return [name for name, p in _pools.items() if p.pid == os.getpid()]


def stop(name: str) -> None:
    """Stop pool ``name`` if this process started it (a later :func:`pool` starts it again)."""
    with _lock:
        p = _pools.pop(name, None)
    if p is not None and p.pid == os.getpid():
        p.close()


_guessed: set[str] = set()  # pools started on a guess (warm(..., guess=True)), not yet confirmed


def warm(name: str, guess: bool = False) -> None:
    """Start pool ``name`` now: a run calls this before its own work, so the helpers are ready
    when their jobs come. ``guess``: started before anyone knows it is needed (the command line,
    from the benchmark's name): :func:`settle_guesses` keeps it or stops it."""
    pool(name)
    with _lock:
        if guess:
            _guessed.add(name)
        else:
            _guessed.discard(name)


def settle_guesses(needed: Sequence[str]) -> None:
    """Stop the pools started on a guess that are not ``needed``; those that are become
    ordinary pools (a pool a run started itself is never stopped here: the next run may use it)."""
    with _lock:
        guessed = set(_guessed)
        _guessed.clear()
    for name in sorted(guessed - set(needed)):
        stop(name)


def submit(name: str, target: Target, *args: Any, **kwargs: Any) -> Job:
    """``target(*args, **kwargs)`` in a helper of pool ``name``; ``.result()`` waits for it (it
    runs in the caller when ``ICL_HELPERS`` is false now, whatever was started before)."""
    if pool_size(name) == 0:
        return Job(target, args, kwargs, None)
    return pool(name).submit(target, *args, **kwargs)


_busy: dict[str, float] = {}


def _count(target: str, seconds: float) -> None:
    with _lock:
        _busy[target] = _busy.get(target, 0.0) + seconds


def busy_seconds() -> dict[str, float]:
    """Seconds the helpers of this process spent on each job target (``module:name``) so far:
    work done beside the run, which its own timers do not see."""
    with _lock:
        return dict(_busy)
