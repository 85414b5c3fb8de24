"""A helper process's side: its warm-up, the siblings it forks, its loop of jobs in and answers
out, and the heartbeat that tells the run it is at work (:mod:`icl.helpers`)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from typing import Any, Optional, Sequence

from icl.helpers.wire import ANSWER, BEAT, HEARTBEAT_S, HELLO, boot_argv, receive_job, resolve, send


def run_warm_up(target: str) -> None:
    try:
        resolve(target)()
    except Exception:  # a warm-up that fails (no LPIPS weights) fails again, and is reported, in the real job
        pass


class Answers:
    """A helper's answers stream: answers, and a heartbeat every :data:`HEARTBEAT_S` while
    it is busy (warming up, running a job) from a thread of its own, so the run can tell a
    helper at work from a stopped one."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.lock = threading.Lock()
        self.busy = False
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._pid = str(os.getpid()).encode()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._beat, name="icl-heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the heartbeat thread (before forking: a forked process must have one thread)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self.lock:
                if self.busy:
                    try:
                        send(self.stream, self._pid, BEAT)
                    except (OSError, ValueError):
                        return

    def hello(self) -> None:
        with self.lock:
            send(self.stream, self._pid, HELLO)

    def working(self) -> None:
        with self.lock:
            self.busy = True

    def answer(self, data: bytes) -> None:
        with self.lock:
            self.busy = False
            send(self.stream, data, ANSWER)

    def flush(self) -> None:
        with self.lock:
            self.stream.flush()


def one_thread(settle_s: float = 1.0) -> bool:
    """Whether this process runs one thread only (Linux: ``/proc``; elsewhere unknown: False).
    A thread just joined (the heartbeat's) stays listed until its kernel task has ended, a
    moment after ``join()`` returns (longer on a loaded machine): it is waited for up to
    ``settle_s``, so that a sibling is forked rather than started afresh for no reason."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            if len(os.listdir("/proc/self/task")) == 1:
                return True
        except OSError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def serve(warm_up: str = "", siblings: Sequence[Sequence[int]] = ()) -> None:
    """A helper's life: ``warm_up`` (``"module:name"``, or nothing), then the helpers of
    ``siblings`` (each the fds of its jobs' read end and its answers' write end) forked from this
    one (started fresh where this process runs more than one thread), then :func:`_loop` on
    standard input and output. What a job prints goes to standard error, never into the answers."""
    import signal

    signal.signal(signal.SIGTERM, _terminated)  # stopped while warming up: temporary files cleaned up
    try:
        _helper_life(warm_up, siblings)
    except (SystemExit, BrokenPipeError):  # stopped, or the run is gone (nobody reads the answers)
        os._exit(0)


def _terminated(signum: int, frame: Any) -> None:
    # the run asked this helper to stop (or is stopping itself): what the unwinding prints (a
    # library's teardown, "Exception ignored in ...") would land in the run's standard error
    # after its own last line, so nothing is printed from here on
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    except OSError:
        pass
    raise SystemExit(0)


ANSWERS_FD = -1  # in a helper: the descriptor of its answers stream (tests write garbage into it)


def _helper_life(warm_up: str, siblings: Sequence[Sequence[int]]) -> None:
    import gc

    # a helper imports large libraries, then runs jobs that make many short-lived objects: with
    # the collector's default (a pass every 700 allocations) collections took 10-15% of torch's
    # and matplotlib's imports and of drawing figures
    gc.set_threshold(10_000, 50, 100)
    global ANSWERS_FD
    answers = os.fdopen(os.dup(1), "wb")
    ANSWERS_FD = answers.fileno()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = Answers(answers)
    out.hello()
    out.working()  # the warm-up beats: a run waiting for its first answer sees a helper at work
    out.start()
    if warm_up:
        run_warm_up(warm_up)
    gc.freeze()  # what the imports made is never scanned again (nor copied into forked siblings' pages)
    pairs = [(int(r), int(w)) for r, w in siblings]
    if pairs:
        out.stop()  # one thread again, so that the siblings can be forked
    for i, (jobs_fd, answers_fd) in enumerate(pairs):
        if one_thread():
            if os.fork() == 0:  # the sibling: its own pipes only
                answers.close()
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                for fd in (fd for pair in pairs[i + 1:] for fd in pair):
                    os.close(fd)
                sibling = Answers(os.fdopen(answers_fd, "wb"))
                sibling.hello()
                _loop(os.fdopen(jobs_fd, "rb"), sibling)
        else:
            subprocess.Popen(boot_argv(0, warm_up, []), stdin=jobs_fd, stdout=answers_fd, close_fds=True)
        os.close(jobs_fd)
        os.close(answers_fd)
    _loop(sys.stdin.buffer, out)


def _loop(jobs: Any, out: Answers) -> None:
    """A job in, ``(ok, value, seconds)`` out, until the parent closes the input; then exit.
    Heartbeats go out while a job runs."""
    out.busy = False
    out.start()
    while True:
        try:
            module, name, args, kwargs = pickle.loads(receive_job(jobs))
        except EOFError:
            break
        out.working()
        start = time.perf_counter()
        try:
            reply: tuple[bool, Any] = (True, resolve(f"{module}:{name}")(*args, **kwargs))
        except Exception as exc:  # carried back to the caller
            reply = (False, exc)
        seconds = time.perf_counter() - start
        try:
            data = pickle.dumps((*reply, seconds), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an unpicklable result or exception: its text
            import traceback

            data = pickle.dumps((False, "".join(traceback.format_exception(exc if reply[0] else reply[1])), seconds))
        out.answer(data)
    out.flush()
    os._exit(0)  # no teardown of torch's and matplotlib's modules: the parent may be waiting
