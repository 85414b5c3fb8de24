"""The last word for a driver that Ray ends without one.

A driver whose local Ray instance lost its raylet (the host of the object store) is ended by
Ray itself, with exit 1 and no message, at its next object-store call (Ray's ``connection.cc``:
"The connection to the plasma store is failed. Terminate the process."), often before icl's
own check sees the raylet gone. This process, started by the driver right after it starts
the instance (:func:`icl.run.execution.pool.connect`), reads the driver's pipe on standard input:

- :data:`SPOKEN` when the driver ended through Python (icl printed its own last line, or the
  run ended normally): nothing to add, this process ends;
- end of file without it: the driver ended without a word. If a watched process (the raylet,
  the GCS) ended before or with it, icl's line goes to the standard error both processes
  share; otherwise (the driver alone killed) nothing is said.

Standard library only, run by path (``python -I -S``): importing nothing of icl or Ray, it
costs a few megabytes. SIGTERM and SIGINT are ignored: SLURM's signal to the whole job step
is the driver's to answer; this process ends with the driver's pipe.

Arguments: ``KIND:PID`` per watched process.
"""

from __future__ import annotations

import os
import select
import signal
import sys

SPOKEN = b"spoken\n"
#: seconds between looks at a watched process that cannot be waited on (no ``pidfd_open``)
POLL_S = 0.05


def ended(pid: int) -> bool:
    """Whether ``pid`` has ended (gone, or a zombie its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"Z", b"X")


def message(kind: str, pid: int) -> str:
    return (f"icl.run: --ray: the local Ray instance's {kind} (pid {pid}) has ended, and Ray ended this run "
            f"without a word (exit 1); the batches committed are kept in the store, rerun the same command "
            f"to resume\n")


def watch(watched: list[tuple[str, int]], driver: int = 0) -> int:
    """Wait on ``driver`` (a pipe's read end) and ``watched``; 0 once the driver spoke or ended
    without a watched process ending, 1 when icl's line was written."""
    poller = select.poll()
    poller.register(driver, select.POLLIN)
    waitable: dict[int, tuple[str, int]] = {}
    polled: list[tuple[str, int]] = []
    for kind, pid in watched:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # an old kernel: looked at every POLL_S instead
            polled.append((kind, pid))
            continue
        waitable[fd] = (kind, pid)
        poller.register(fd, select.POLLIN)
    dead = None
    said = b""
    while True:
        events = poller.poll(int(POLL_S * 1000) if polled and dead is None else None)
        for fd, _ in events:
            if fd in waitable:
                poller.unregister(fd)  # readable from now on: looked at once
                dead = dead or waitable[fd]
        if dead is None:
            dead = next((w for w in polled if ended(w[1])), None)
        if any(fd == driver for fd, _ in events):
            chunk = os.read(driver, 4096)
            said += chunk
            if SPOKEN in said:
                return 0
            if not chunk:  # the driver ended without a word
                break
    if dead is None:  # ended in the same instant as the driver: seen only now
        dead = next((waitable[fd] for fd, _ in poller.poll(0) if fd in waitable), None) or \
            next((w for w in polled if ended(w[1])), None)
    if dead is None:
        return 0
    os.write(2, message(*dead).encode())
    return 1


def main(argv: list[str]) -> int:
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    watched = []
    for arg in argv:
        kind, _, pid = arg.rpartition(":")
        watched.append((kind, int(pid)))
    return watch(watched)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
