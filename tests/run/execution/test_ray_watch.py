""":mod:`icl.run.execution._ray_watch`: the watcher beside a local Ray instance says icl's line when the
driver ended without a word after a watched process ended, and nothing otherwise. Real
processes: a ``sleep`` stands for the raylet, the watcher runs as the driver starts it
(``python -I -S`` by path). Ray's own part (ending a driver at its next object-store call) is
tested end to end in ``tests/run/execution/test_run_ray.py``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from icl.run.execution import _ray_watch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _watcher(pid: int, *, pidfd: bool = True) -> subprocess.Popen:
    if pidfd:
        cmd = [sys.executable, "-I", "-S", _ray_watch.__file__, f"raylet:{pid}"]
    else:  # as on a kernel without pidfd_open: the /proc fallback
        cmd = [sys.executable, "-I", "-S", "-c",
               "import os, runpy, sys; del os.pidfd_open; sys.argv = sys.argv[1:]; "
               "runpy.run_path(sys.argv[0], run_name='__main__')", _ray_watch.__file__, f"raylet:{pid}"]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    time.sleep(0.2)  # a zombie until reaped below: ended all the same


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "proc"])
def test_unspoken_end_after_the_raylet_is_icls_line(pidfd):
    raylet = subprocess.Popen(["sleep", "60"])
    watcher = _watcher(raylet.pid, pidfd=pidfd)
    try:
        _kill(raylet)
        out, err = watcher.communicate(b"", timeout=10)  # the driver's pipe closed, nothing said
    finally:
        raylet.wait()
    assert watcher.returncode == 1 and out == b""
    assert err.decode() == _ray_watch.message("raylet", raylet.pid)
    assert err.decode().startswith(f"icl.run: --ray: the local Ray instance's raylet (pid {raylet.pid}) has ended")
    assert err.count(b"\n") == 1


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "proc"])
def test_a_driver_that_spoke_gets_no_second_line(pidfd):
    raylet = subprocess.Popen(["sleep", "60"])
    watcher = _watcher(raylet.pid, pidfd=pidfd)
    try:
        _kill(raylet)
        watcher.stdin.write(_ray_watch.SPOKEN)
        watcher.stdin.flush()
        assert watcher.wait(timeout=10) == 0  # ends on the word, without waiting for the driver
        assert watcher.stderr.read() == b""
    finally:
        watcher.kill()
        watcher.communicate()
        raylet.wait()


def test_a_driver_ending_alone_gets_no_line():
    """The driver ended without a word while the instance lives (killed by itself): nothing to
    say of the raylet."""
    raylet = subprocess.Popen(["sleep", "60"])
    try:
        watcher = _watcher(raylet.pid)
        out, err = watcher.communicate(b"", timeout=10)
        assert (watcher.returncode, out, err) == (0, b"", b"")
    finally:
        raylet.kill()
        raylet.wait()


def test_sigterm_is_the_drivers_to_answer():
    """SLURM's SIGTERM to the job step reaches the watcher too: it stays for the driver's end."""
    raylet = subprocess.Popen(["sleep", "60"])
    watcher = _watcher(raylet.pid)
    try:
        time.sleep(0.5)  # its handlers in place
        watcher.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        assert watcher.poll() is None
        _kill(raylet)
        _, err = watcher.communicate(b"", timeout=10)
        assert watcher.returncode == 1 and b"raylet" in err
    finally:
        watcher.kill()
        raylet.wait()


def test_ended_reads_proc():
    alive = subprocess.Popen(["sleep", "60"])
    try:
        assert not _ray_watch.ended(alive.pid)
        _kill(alive)
        assert _ray_watch.ended(alive.pid)  # a zombie
    finally:
        alive.wait()
    assert _ray_watch.ended(alive.pid)  # reaped: gone
