"""Models answered by Ray workers (``--ray``): one actor per GPU (or ``--workers`` CPU actors),
each holding one loaded model; the driver (:class:`icl.run.execution.engine.Engine`) builds requests,
scores and alone writes the store.

:class:`RayPool` sends a batch to the least busy worker (:meth:`RayPool.submit`) and hands
back its answers (:meth:`RayPool.result`, waiting while it looks at the stop flag, so Ctrl-C
and SIGTERM still stop a run between batches). Inside a worker the model is called through the
same :class:`icl.run.execution.guard.ModelGuard` as in one process (read-only input copies, per-item
retries, the timeout), and image answers are reduced to uint8 on the worker's device as the
engine would (:func:`icl.run.execution.responses.to_uint8_image`), so what crosses back is what the
store keeps. Faults: a worker that dies (killed, out of memory, its node gone) is replaced by
a new actor (placed by Ray on any node with room) and its unfinished batch goes to the next
worker, at most ``retries`` times; after that the batch's requests fail with the reason, under
the run's one failure policy (recorded, asked again by a rerun).

Importing this module imports Ray; the runner imports it only for ``--ray``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
import weakref
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import ray
import ray.exceptions

from icl._parse import env_number
from icl.helpers import say
from icl.run.errors import ConfigError
from icl.run.execution.guard import ERROR, ItemOutcome, ModelGuard, idle_work
from icl._signals import check_stop

LOCAL_OBJECT_STORE = 512 * 2**20  # bytes; a local instance spills to disk beyond it
DEFAULT_RETRIES = 2
_WAIT_S = 0.1
#: seconds between heartbeats asked of a worker running a batch, and the silence after which it
#: is taken for stopped and killed (``ICL_WORKER_SILENCE_S``)
BEAT_S = 5.0
SILENCE_S = 60.0


def _seconds(name: str, default: float) -> float:
    value: float = env_number(name, default)
    return value
START_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0  # how often a driver waiting for a worker looks at the stop flag


def connect(address: str, workers: Optional[int], gpus: bool) -> str:
    """Use the Ray instance this process already joined, or join ``address`` (``auto``: the
    cluster named by ``RAY_ADDRESS``, else a new local instance on 127.0.0.1 with one CPU per
    worker); returns a description of where the workers run."""
    join = address if address != "auto" else os.environ.get("RAY_ADDRESS") or None
    if join is not None:
        _reachable(address, join)
    if ray.is_initialized():
        return "the Ray instance this process joined"
    common: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=True,
                                  logging_level="WARNING")
    if join is None:
        local = workers if workers else (_visible_gpus() if gpus else 1) or 1
        with _our_signals():
            ray.init(address="local", num_cpus=local, object_store_memory=LOCAL_OBJECT_STORE,
                     _node_ip_address="127.0.0.1", **common)
        _watch_local()
        return f"a local Ray instance ({local} CPU workers)" if not gpus else "a local Ray instance"
    try:
        with _our_signals():
            ray.init(address=join, **common)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"--ray {address}: cannot join the Ray cluster at {join!r} "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    return f"the Ray cluster at {join}"


@contextmanager
def _our_signals() -> Iterator[None]:
    """``ray.init`` installs Ray's own SIGTERM handlers (Python's ``sys.exit(15)`` and its core
    worker's crash dump): SLURM's SIGTERM at a time-out or preemption then ended the run with
    exit 1 and a stack dump instead of icl's clean stop. The run's handlers (the stop flag of
    :func:`icl._signals.stop_on_signals`) are put back as soon as it returns; a SIGTERM while
    Ray starts stops the run as an interruption (exit 130)."""
    main = threading.current_thread() is threading.main_thread()
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)} if main else {}
    try:
        yield
    except SystemExit as exc:
        if exc.code == signal.SIGTERM:  # Ray's handler, while it was in place
            raise KeyboardInterrupt("signal SIGTERM") from None
        raise
    finally:
        for s, handler in saved.items():
            if handler is not None:
                signal.signal(s, handler)


class RayLost(RuntimeError):
    """The local Ray instance this run started lost a process it cannot run without (its raylet,
    its GCS): the run stops with one line (exit 1); the batches committed are kept."""


def _local_processes() -> list[tuple[str, Any]]:
    """(kind, ``Popen``) of the raylet and GCS of the local Ray instance this process started;
    none for a cluster joined (its processes are not ours)."""
    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(node, "_global_node", None)
    if node is None or not getattr(node, "head", False):
        return []
    return [(kind, info.process) for kind, infos in list(getattr(node, "all_processes", {}).items())
            if kind in ("raylet", "gcs_server") for info in infos]


def _local_dead() -> Optional[str]:
    """Which process of the local Ray instance this process started has ended ("raylet (pid
    123, exit -9)"), or None (all alive, or a cluster joined)."""
    for kind, process in _local_processes():
        code = process.poll()
        if code is not None:
            return f"{kind} (pid {process.pid}, exit {code})"
    return None


def _watch_local() -> None:
    """Start :mod:`icl.run.execution._ray_watch` beside the local instance just started: Ray ends a
    driver that lost its raylet with exit 1 and no word at its next object-store call, which can
    come before :meth:`RayPool._check_local` sees it; the watcher then says icl's line. Told
    :data:`~icl.run.execution._ray_watch.SPOKEN` when this process ends through Python (``atexit``: icl's
    own last line is out). A watcher that cannot start is no reason to stop the run."""
    import atexit
    import subprocess

    from icl.run.execution import _ray_watch

    watched = [f"{kind}:{process.pid}" for kind, process in _local_processes()]
    if not watched:
        return
    try:
        watcher = subprocess.Popen([sys.executable, "-I", "-S", _ray_watch.__file__, *watched],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    except OSError:
        return
    pipe = watcher.stdin
    if pipe is None:  # never: stdin=PIPE
        return

    def spoken() -> None:
        try:
            pipe.write(_ray_watch.SPOKEN)
            pipe.close()
        except (OSError, ValueError):  # already told, or the watcher is gone
            pass

    global tell_watcher
    tell_watcher = spoken
    atexit.register(spoken)  # after Ray's own handlers were registered: run before them


def tell_watcher() -> None:
    """Tell the watcher of :func:`_watch_local` that icl has said its last word (a no-op
    without one); for an exit that skips ``atexit``."""


def _reachable(flag: str, address: str) -> None:
    """One line at once for an address nothing listens on (Ray itself retries for minutes)."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError(f"--ray {flag}: nothing answers at {address} ({exc.strerror or exc}); start the cluster "
                          f"with 'ray start --head' or give its address") from None


def _visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


def default_workers(gpus: bool, per_worker: int = 1) -> int:
    """One per ``per_worker`` GPUs of the joined cluster on a CUDA run, else one."""
    return max(1, int(ray.cluster_resources().get("GPU", 0)) // per_worker) if gpus else 1


@dataclass
class Answer:
    """A worker's answer to one batch: ``outcomes`` (one per request), or ``load_error``."""

    outcomes: list[ItemOutcome]
    seconds: float = 0.0
    peak: Optional[int] = None
    load_s: float = 0.0
    load_error: Optional[str] = None
    worker: str = ""


class ModelWorker:
    """The actor: one loaded model at a time (a new model id drops the previous one)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.model_id: Optional[str] = None
        self.guard: Optional[ModelGuard] = None
        self.load_error: Optional[str] = None

    def pid(self) -> int:
        return os.getpid()

    @ray.method(concurrency_group="beat")
    def beat(self) -> int:
        """Answered beside a running batch (its own thread): a worker that does not answer is
        stopped or frozen, not busy."""
        return os.getpid()

    def predict(self, model_id: str, adapter: list, label: str, timeout_s: float, requests: list) -> Answer:
        where = f"{ray.util.get_node_ip_address()} pid {os.getpid()}"
        load_s = 0.0
        if model_id != self.model_id:
            self._drop()
            self.model_id = model_id
            t0 = time.perf_counter()
            try:
                loaded = ray.get(adapter[0])  # the unloaded adapter, shipped once per worker
                loaded.load(self.device)
                self.guard = ModelGuard(loaded.predict, timeout_s=timeout_s, name=label)
            except Exception as exc:  # the driver records it as the model's load failure
                from icl._lazy import extra_hint
                from icl.run.execution.engine import short_trace

                self.load_error = f"{short_trace(exc)}{extra_hint(exc)}"
            load_s = time.perf_counter() - t0
        if self.load_error is not None:
            return Answer([], load_error=self.load_error, worker=where)
        assert self.guard is not None
        cuda = self.device.startswith("cuda")
        if cuda:
            import torch

            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        outcomes = self.guard(requests)
        outcomes = [_portable(r, o) for r, o in zip(requests, outcomes)]
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        if cuda:
            peak: Optional[int] = int(torch.cuda.max_memory_allocated())
        else:
            from icl.run.execution.compute import max_rss_bytes

            peak = max_rss_bytes()
        return Answer(outcomes, seconds, peak, load_s, worker=where)

    def _drop(self) -> None:
        if self.guard is not None:
            self.guard.close()
        self.guard, self.load_error = None, None
        import gc

        gc.collect()
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()


def _portable(request: Any, outcome: ItemOutcome) -> ItemOutcome:
    """An image answer as the uint8 host array the driver stores (converted on the worker's
    device, as the engine converts a local answer); other values as they are, tensors on the host."""
    from dataclasses import replace

    from icl.run.execution import responses as R

    if not outcome.ok:
        return outcome
    value = outcome.value
    if not R.expects_text(request):
        try:
            value = R.to_host(R.to_uint8_image(value, R.max_pixels(request)))
        except R.InvalidOutput:  # the driver records the same error from the value itself
            pass
    if R.is_tensor(value):
        value = value.detach().cpu()
    return replace(outcome, value=value)


@dataclass(eq=False)  # hashed by identity (kept in a WeakSet)
class Ticket:
    """A batch sent to a worker: resent elsewhere when that worker dies."""

    model_id: str
    args: tuple
    n: int
    slot: int = 0
    generation: int = 0
    ref: Any = None
    deaths: int = 0
    error: Optional[str] = None  # why it was never sent (reported as the model's load failure)


class RayPool:
    """``workers`` actors on ``device`` (``cpu``, or ``cuda``: one GPU each); ``ahead``: batches
    the engine keeps in flight (two per worker, so none waits while the driver scores)."""

    def __init__(self, address: str, workers: Optional[int], device: str, retries: int = DEFAULT_RETRIES,
                 flag: str = "--workers", local_cpus: Optional[int] = None, beside: int = 0,
                 gpus_per_worker: int = 1):
        """``beside``: GPUs (CPUs) of the run's other pool (the models' beside the judge's);
        ``gpus_per_worker``: GPUs each actor sees, for a model spread over them (``device_map``)."""
        gpus = device.startswith("cuda")
        self.where = connect(address, local_cpus or workers, gpus)
        per = gpus_per_worker if gpus else 1
        self.size = workers or default_workers(gpus, per)
        self.units = self.size * per  # GPUs (CPUs) this pool holds
        have = ray.cluster_resources()
        need = "GPU" if gpus else "CPU"
        if have.get(need, 0) < self.units + beside:
            also = f" (and {beside} for the run's other workers)" if beside else ""
            raise ConfigError(f"{flag} {self.size}: needs {self.units} {need}s{also} and {self.where} has "
                              f"{int(have.get(need, 0))}")
        self.device = "cuda" if gpus else "cpu"  # Ray gives each GPU actor its own CUDA_VISIBLE_DEVICES
        self.retries = retries
        self.ahead = 2 * self.size
        # workers import what the driver imports and see icl's settings (caches, data roots) as
        # they are when the run starts
        env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH" or k.startswith("ICL_")}
        # ray.remote's typed overloads leave out concurrency_groups, an actor option Ray documents
        self._actor = ray.remote(concurrency_groups={"beat": 1})(ModelWorker).options(  # type: ignore[call-overload]
                                                      num_cpus=0 if gpus else 1, num_gpus=per if gpus else 0,
                                                      max_restarts=0, max_concurrency=1,
                                                      runtime_env={"env_vars": env} if env else None)
        self.actors: list[Any] = [self._actor.remote(self.device) for _ in range(self.size)]
        try:  # started before the run's clock: a worker that cannot start is one line, not a hang
            ray.get([a.pid.remote() for a in self.actors], timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise ConfigError(f"--ray: {self.size} workers did not start within {START_TIMEOUT_S:g} s on "
                              f"{self.where}") from None
        self.generation = [0] * self.size
        self._up: list[Any] = [None] * self.size  # per slot: a replacing worker's start, until it is up
        self._live: weakref.WeakSet[Ticket] = weakref.WeakSet()  # sent, not yet answered (dropped ones vanish)
        self._next = 0
        self._adapters: dict[str, list] = {}
        self.answered: dict[str, int] = {}  # batches per worker (node address and process)
        self.replaced = 0

    def describe(self) -> dict[str, Any]:
        """For results.json: where the workers ran and who answered how many batches."""
        return dict(where=self.where, device=self.device, workers=self.size, retries=self.retries,
                    batches_per_worker=dict(sorted(self.answered.items())), replaced_workers=self.replaced)

    def pids(self) -> list[int]:
        return ray.get([a.pid.remote() for a in self.actors])

    def submit(self, model: Any, requests: Sequence[Any]) -> Ticket:
        box = self._adapters.get(model.model_id)
        if box is None:  # wrapped in a list: workers fetch it only when they load the model
            self._check_local()  # see _send
            try:
                box = [ray.put(model.adapter)]
            except Exception as exc:  # an adapter holding what cannot be pickled (a lock, a socket)
                root: BaseException = exc
                while root.__cause__ is not None or root.__context__ is not None:  # pickle's own words
                    root = root.__cause__ or root.__context__  # type: ignore[assignment]
                why = f"{type(root).__name__}: {(str(root).splitlines() or [''])[0]}"
                box = [f"the adapter cannot be sent to a Ray worker ({why})"]
            self._adapters[model.model_id] = box
        from icl.run.execution.engine import DEFAULT_TIMEOUT_S

        ticket = Ticket(model.model_id, (model.model_id, box, model.label, model.timeout or DEFAULT_TIMEOUT_S,
                                         list(requests)), len(requests))
        if isinstance(box[0], str):
            ticket.error = box[0]
        else:
            self._send(ticket, self._least_busy())
        return ticket

    def _least_busy(self, avoid: int = -1) -> int:
        busy = [0] * self.size
        for t in list(self._live):
            if t.ref is not None and t.generation == self.generation[t.slot]:
                busy[t.slot] += 1
        order = [(self._next + i) % self.size for i in range(self.size)]
        slot = min((s for s in order if s != avoid or self.size == 1), key=lambda s: busy[s])
        self._next = (slot + 1) % self.size
        return slot

    def _send(self, ticket: Ticket, slot: int) -> None:
        self._check_local()  # a batch's images go through the object store: Ray ends a driver without it
        ticket.slot, ticket.generation = slot, self.generation[slot]
        ticket.ref = self.actors[slot].predict.remote(*ticket.args)
        self._live.add(ticket)

    def result(self, ticket: Ticket) -> Answer:
        """The worker's answer; a dead worker's batch is resent (at most ``retries`` times)."""
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, RayError

        if ticket.error is not None:
            return Answer([], load_error=ticket.error, worker="(not sent)")
        while True:
            self._wait(ticket)
            self._check_local()  # an image answer is read from the object store (see _send)
            try:
                answer = ray.get(ticket.ref)
                self._done(ticket)
                self.answered[answer.worker] = self.answered.get(answer.worker, 0) + 1
                return _writable(answer)
            except (RayActorError, ActorDiedError, ActorUnavailableError) as exc:
                self._done(ticket)
                self._check_local()  # a worker lost with its raylet: nothing to resend it to
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
                self._replace(ticket.slot, ticket.generation)
                ticket.deaths += 1
                if ticket.deaths > self.retries:
                    return _failed(ticket.n, f"the batch's Ray worker died on each of its {ticket.deaths} "
                                             f"tries (--worker-retries {self.retries}; last: {why})")
                self._send(ticket, self._least_busy(avoid=ticket.slot))
            except RayError as exc:  # a worker that cannot even run the call
                self._done(ticket)
                return _failed(ticket.n, f"Ray worker error: {type(exc).__name__}: {str(exc)[:500]}")

    def _check_local(self) -> None:
        """:class:`RayLost` when the local instance's raylet or GCS has ended (SIGKILL, out of
        memory), before any call that would need it: Ray's own reaction is to end the process
        with exit 1 and no word. A stop signal that came with it (SLURM's SIGTERM to the whole
        job step) wins: an interruption, exit 130."""
        dead = _local_dead()
        if dead is not None:
            time.sleep(0.2)  # a SIGTERM sent to the whole process group reaches this process too
            check_stop()
            raise RayLost(f"the local Ray instance's {dead} has ended; the batches committed are kept in the "
                          f"store, rerun the same command to resume")

    def _wait(self, ticket: Ticket) -> None:
        """Until the batch is answered (or its worker is gone), looking at the stop flag; its
        worker is asked for a heartbeat every :data:`BEAT_S` meanwhile, and one that answers none
        for ``ICL_WORKER_SILENCE_S`` (stopped, frozen) is killed (one line): the batch then goes
        to another worker as a dead worker's would."""
        silence = _seconds("ICL_WORKER_SILENCE_S", SILENCE_S)
        every = min(BEAT_S, silence / 3)
        alive = time.monotonic()
        ping: Any = None
        asked = 0.0
        while not ray.wait([ticket.ref], timeout=_WAIT_S)[0]:
            check_stop()
            idle_work()  # the engine's scored batches are committed meanwhile
            self._check_local()
            now = time.monotonic()
            up = self._up[ticket.slot]
            if up is not None:  # a new worker still starting (up to START_TIMEOUT_S): not silent yet
                if ray.wait([up], timeout=0)[0] or now - alive > START_TIMEOUT_S:
                    self._up[ticket.slot] = None
                alive = now
                continue
            if ping is None:
                if now - alive >= every:
                    ping, asked = self.actors[ticket.slot].beat.remote(), now
            elif ray.wait([ping], timeout=0)[0]:
                ping, alive = None, now
            elif now - asked > silence and self.generation[ticket.slot] == ticket.generation:
                say(f"icl.run: Ray worker {ticket.slot} answered no heartbeat for {silence:g} s (stopped or "
                    f"frozen?); killed it, its batches go to another worker")  # above the progress bar
                try:
                    ray.kill(self.actors[ticket.slot], no_restart=True)
                except Exception:  # already gone
                    pass
                ping, alive = None, now

    def _done(self, ticket: Ticket) -> None:
        ticket.ref = None

    def _replace(self, slot: int, generation: int) -> None:
        """A new actor in ``slot`` unless the death of this generation was already handled."""
        if self.generation[slot] != generation:
            return
        try:
            ray.kill(self.actors[slot], no_restart=True)
        except Exception:  # already gone
            pass
        self.actors[slot] = self._actor.remote(self.device)
        self._up[slot] = self.actors[slot].pid.remote()
        self.generation[slot] += 1
        self.replaced += 1

    def close(self) -> None:
        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # already gone
                pass
        self.actors = []


def _failed(n: int, message: str) -> Answer:
    return Answer([ItemOutcome(ERROR, error_type="WorkerDied", message=message)] * n)


def _writable(answer: Answer) -> Answer:
    """Arrays read from Ray's object store are read-only views of it: own copies instead."""
    import numpy as np
    from dataclasses import replace

    answer.outcomes = [replace(o, value=np.array(o.value)) if isinstance(o.value, np.ndarray) else o
                       for o in answer.outcomes]
    return answer
