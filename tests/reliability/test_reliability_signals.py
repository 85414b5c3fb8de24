"""SIGTERM and SIGINT are never lost (issue 28): they set a flag that the runner checks between
batches and while it waits for a model, so a real ``python -m icl.run`` process signalled at any
moment of its run (while the model works, between batches, while the report is written) ends
with exit 130, keeps its finished batches, and the same command resumes it.

The audit found 1 of 5 mid-run signals swallowed (exit 0): the old handler raised
KeyboardInterrupt wherever the main thread was, including places where Python drops it.
"""

import os
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

from icl.run.execution.guard import ModelGuard
from icl._signals import check_stop, stop_on_signals
from tests.reliability.test_reliability_guard import _requests, invert
from tests.reliability.test_reliability_runner import _cmd, _env, _scored, _wait_for


def test_a_signal_sets_the_flag_and_the_block_ends_with_keyboard_interrupt():
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with stop_on_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler ran: nothing was raised where the program happened to be
            reached = True
    assert reached
    assert {s: signal.getsignal(s) for s in previous} == previous
    check_stop()  # the flag went with the block


def test_a_nested_block_keeps_the_outer_flag_and_a_thread_installs_nothing():
    """A download's block inside the command line's (icl.models.hub inside icl.run): a signal that
    arrived before it is not cleared by it, and its end raises; off the main thread (where signal
    handlers cannot be set) the block is a plain block."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with stop_on_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
                with stop_on_signals():  # nested: the pending signal is still there
                    pass
    assert {s: signal.getsignal(s) for s in previous} == previous
    errors = []

    def off_main():
        try:
            with stop_on_signals():
                check_stop()
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            errors.append(exc)

    t = threading.Thread(target=off_main)
    t.start()
    t.join(10)
    assert errors == [] and {s: signal.getsignal(s) for s in previous} == previous


def test_check_stop_raises_where_the_runner_calls_it_and_a_second_signal_at_once():
    with pytest.raises(KeyboardInterrupt, match="SIGINT"):  # still pending: the block cannot end normally
        with stop_on_signals():
            check_stop()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            with pytest.raises(KeyboardInterrupt, match="SIGINT"):
                check_stop()
            t0 = time.perf_counter()
            with pytest.raises(KeyboardInterrupt, match="SIGTERM .second"):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            assert time.perf_counter() - t0 < 2


def test_a_signal_stops_the_wait_for_a_slow_model_promptly():
    release = threading.Event()

    def slow(requests):
        release.wait(10)
        return invert(requests)

    guard = ModelGuard(slow, timeout_s=None)
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with stop_on_signals():
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
            guard(_requests(1))
    assert time.perf_counter() - t0 < 3
    release.set()
    guard.close()


def _integrity(db):
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def _signal_when_started(proc, store, sig, delay):
    _wait_for(store)
    time.sleep(delay)
    proc.send_signal(sig)


@pytest.mark.slow
def test_signals_at_every_moment_of_a_real_run_end_in_130_with_finished_batches_kept(tmp_path, builtin_root):
    """Five runs at once, each signalled once at a different moment after its store exists
    (from the first batch to the report); then one is resumed to completion by the same command."""
    plain = _env(tmp_path)
    env = {**plain, "ICL_TEST_SLEEP": "0.6"}  # 4 batches of one item: at least 2.4 s of model time
    moments = [(signal.SIGTERM, 0.0), (signal.SIGINT, 0.4), (signal.SIGTERM, 0.9), (signal.SIGINT, 1.4),
               (signal.SIGTERM, 1.9)]
    runs = []
    for i, (sig, delay) in enumerate(moments):
        out = tmp_path / f"run{i}"
        proc = subprocess.Popen(_cmd(out, builtin_root), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        sender = threading.Thread(target=_signal_when_started, args=(proc, out / "store.sqlite", sig, delay))
        sender.start()
        runs.append((out, proc, sender, sig, delay))
    for out, proc, sender, sig, delay in runs:
        stdout, stderr = proc.communicate(timeout=300)
        sender.join()
        assert proc.returncode == 130, (sig, delay, proc.returncode, stdout, stderr)
        assert "rerun the same command to resume" in stderr and "Traceback" not in stderr
        assert _integrity(out / "store.sqlite") == "ok"
    out = runs[2][0]
    kept = _scored(out / "store.sqlite")
    done = subprocess.run(_cmd(out, builtin_root), env=plain, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f" {kept} already in the store" in done.stdout
