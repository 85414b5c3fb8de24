"""Helper processes (icl.helpers): jobs run in another process with the same results as here,
exceptions come back as their own type, a helper that dies loses nothing (its jobs run here),
``ICL_HELPERS=0`` runs everything here, and figures drawn by a helper are the same bytes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from icl import helpers
from icl.helpers import pools
from icl.helpers import HelperError, HelperPool

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def jobs_module(tmp_path, monkeypatch):
    """A module of job functions on ``sys.path`` (helpers started afterwards see it)."""
    (tmp_path / "helper_jobs.py").write_text(textwrap.dedent("""
        import os, sys

        class Odd(Exception):
            def __init__(self, a, b):  # two required arguments: pickles but cannot be rebuilt
                super().__init__(f"{a}/{b}")

        def pid():
            return os.getpid()

        def add(a, b, *, scale=1):
            return (a + b) * scale

        def shout():
            print("a job that prints")  # must not reach the answers' stream
            sys.stdout.flush()
            return "ok"

        def fail(kind):
            if kind == "value":
                raise ValueError("bad value in job")
            if kind == "lpips":
                from icl.ops._lpips_weights import LPIPSWeightsNotFound
                raise LPIPSWeightsNotFound("looked in: nowhere (helper test)")
            if kind == "odd":
                raise Odd(1, 2)
            return lambda: 0  # an answer that cannot be pickled

        def die(parent):
            if os.getpid() != parent:
                os._exit(3)  # the helper dies running it
            return "ran in the parent"

        WARMED_IN = None

        def warm():
            global WARMED_IN
            WARMED_IN = os.getpid()

        def warm_with_a_thread():
            import threading, time
            warm()
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()

        def who():
            return os.getpid(), os.getppid(), WARMED_IN, os.environ.get("OMP_NUM_THREADS")

        def stop_myself(parent):
            import signal
            if os.getpid() != parent:
                os.kill(os.getpid(), signal.SIGSTOP)  # a stopped helper: alive, silent
            return "ran in the parent"

        def garble(parent):
            if os.getpid() != parent:
                import time
                from icl.helpers import child
                os.write(child.ANSWERS_FD, b"not a frame at all, and more than a header")
                time.sleep(60)  # still beating: only the framing tells
            return "ran in the parent"

        def noisy_warm_up():
            import time
            try:
                time.sleep(60)
            finally:  # a library that prints while it is torn down
                print("Traceback (most recent call last): noise of a helper stopped", file=sys.stderr, flush=True)

        def hold(path):
            import time
            while not os.path.exists(path):  # keeps this helper busy until the test says
                time.sleep(0.01)
            return who()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ICL_HELPERS", raising=False)
    yield "helper_jobs"
    sys.modules.pop("helper_jobs", None)


@pytest.fixture
def pool(jobs_module):
    p = HelperPool(1)
    yield p
    p.close()


def test_a_job_runs_in_another_process_with_the_same_result(pool):
    job = pool.submit("helper_jobs:pid")
    assert job.remote and job.result() != os.getpid()
    assert pool.submit("helper_jobs:add", 2, 3, scale=4).result() == 20
    # by name: the caller never imported the module
    assert "helper_jobs" not in sys.modules
    assert pool.submit("helper_jobs:shout").result() == "ok"  # printing does not corrupt the answers
    assert helpers.busy_seconds().get("helper_jobs:add", 0.0) > 0.0  # the helpers' time, reported back


def test_exceptions_come_back_as_their_own_type(pool):
    from icl.ops._lpips_weights import LPIPSWeightsNotFound

    with pytest.raises(ValueError, match="bad value in job"):
        pool.submit("helper_jobs:fail", "value").result()
    with pytest.raises(LPIPSWeightsNotFound, match="nowhere"):
        pool.submit("helper_jobs:fail", "lpips").result()
    with pytest.raises(HelperError, match="Odd"):  # cannot be rebuilt here: the helper's traceback, as text
        pool.submit("helper_jobs:fail", "odd").result()
    with pytest.raises(HelperError, match="pickle"):  # an answer that cannot be pickled
        pool.submit("helper_jobs:fail", "other").result()
    assert pool.submit("helper_jobs:add", 1, 1).result() == 2  # the helper is still serving


def test_a_helper_that_dies_loses_no_job(pool):
    first = pool.submit("helper_jobs:die", os.getpid())
    queued = [pool.submit("helper_jobs:add", i, 1) for i in range(3)]
    assert first.remote and first.result() == "ran in the parent"
    assert [j.result() for j in queued] == [1, 2, 3]  # the queued jobs ran here
    later = pool.submit("helper_jobs:pid")
    assert not later.remote and later.result() == os.getpid()


def _both_helpers(warm_up, tmp_path):
    """``who()`` of each helper of a two-helper forking pool, the first helper's first: one holds a
    job while the other answers."""
    pool = HelperPool(2, warm_up, fork=True)
    try:
        release = tmp_path / "release"
        held = pool.submit("helper_jobs:hold", str(release))
        other = pool.submit("helper_jobs:who").result()
        release.touch()
        a = held.result()
    finally:
        pool.close()
    return (a, other) if a[1] == os.getpid() else (other, a)


def _ended(pid, timeout=10.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True  # exited, not yet reaped
        except OSError:
            return True
        time.sleep(0.02)
    return False


def test_a_helper_stopped_while_warming_up_prints_nothing_into_the_runs_stderr(jobs_module, tmp_path):
    """A run that ends early (a read-only output folder) stops helpers still importing; what
    they printed while unwinding came after the run's one line in its standard error (CI saw a
    stray traceback there). A stopped helper is silent; the pool still ends it at once."""
    code = textwrap.dedent("""
        import sys, time
        sys.path.insert(0, sys.argv[1])
        from icl.helpers.pools import HelperPool
        pool = HelperPool(1, "helper_jobs:noisy_warm_up")
        time.sleep(1.5)  # the helper is in its warm-up
        start = time.monotonic()
        pool.close()
        print(f"closed in {time.monotonic() - start:.2f} s")
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert float(proc.stdout.split()[2]) < 2.0  # terminated, not waited for nor killed after 2 s


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="forking needs /proc to count threads")
def test_a_forking_pool_warms_up_once_and_forks_the_others(jobs_module, tmp_path):
    """The figure pool's mechanism: the first helper starts fresh and warms up; the second is
    forked from it afterwards (its parent is the first helper, its warm-up state the first's),
    both single-threaded by environment; closing the pool ends both."""
    first, forked = _both_helpers("helper_jobs:warm", tmp_path)
    assert first[1] == os.getpid() and forked[1] == first[0] != forked[0]
    assert first[2] == forked[2] == first[0]  # the warm-up ran once, in the first helper
    assert first[3] == forked[3] == "1"
    assert _ended(first[0]) and _ended(forked[0])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="forking needs /proc to count threads")
def test_a_helper_with_threads_after_warm_up_starts_the_others_fresh(jobs_module, tmp_path):
    """Forking a process that runs other threads can hang: the siblings then start from a
    fresh interpreter (and warm up themselves)."""
    first, fresh = _both_helpers("helper_jobs:warm_with_a_thread", tmp_path)
    assert fresh[1] == first[0] and fresh[2] == fresh[0] != first[2]


def _within(seconds, fn):
    """``fn()`` run in a thread, or an assertion error if it did not return within ``seconds``
    (a hang fails the test instead of hanging it)."""
    import threading

    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert out, f"still waiting after {seconds} s"
    return out[0]


@pytest.mark.parametrize("fork", [False, True])
def test_a_stopped_helper_is_killed_and_its_jobs_run_here(jobs_module, monkeypatch, capfd, fork):
    """SIGSTOP: the helper stops beating; after ICL_HELPER_SILENCE_S it is killed (one line)
    and its job and the queued ones run here."""
    monkeypatch.setenv("ICL_HELPER_SILENCE_S", "1.5")
    pool = HelperPool(2 if fork else 1, "helper_jobs:warm", fork=fork, name="test")
    try:
        stopped = pool.submit("helper_jobs:stop_myself", os.getpid())
        queued = [pool.submit("helper_jobs:add", i, 1) for i in range(3)]
        assert _within(30, stopped.result) == "ran in the parent"
        assert _within(30, lambda: [j.result() for j in queued]) == [1, 2, 3]
    finally:
        _within(10, pool.close)
    err = capfd.readouterr().err
    assert err.count("sent no heartbeat for 1.5 s") == 1 and "killed it" in err, err


def test_corrupt_framing_kills_the_helper_and_its_job_runs_here(jobs_module, monkeypatch, capfd):
    pool = HelperPool(1, name="test")
    try:
        assert _within(30, pool.submit("helper_jobs:garble", os.getpid()).result) == "ran in the parent"
        assert not pool.submit("helper_jobs:pid").remote  # no helper left: here
    finally:
        _within(10, pool.close)
    err = capfd.readouterr().err
    assert "corrupt framing" in err and "killed it" in err, err


def test_a_busy_helper_beats_and_is_not_taken_for_stuck(jobs_module, monkeypatch, tmp_path):
    """A job longer than the silence limit: the heartbeats keep it alive."""
    import threading

    monkeypatch.setenv("ICL_HELPER_SILENCE_S", "1")
    pool = HelperPool(1)
    try:
        release = tmp_path / "release"
        threading.Timer(3.0, release.touch).start()
        pid, *_ = _within(30, pool.submit("helper_jobs:hold", str(release)).result)
        assert pid != os.getpid()
    finally:
        pool.close()


def test_a_job_past_its_deadline_is_killed_and_runs_here(jobs_module, monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("ICL_HELPER_DEADLINE_S", "1")
    pool = HelperPool(1)
    try:
        release = tmp_path / "release"
        job = pool.submit("helper_jobs:hold", str(release))
        import threading

        threading.Timer(4.0, release.touch).start()  # here, it returns once the file is there
        assert _within(30, job.result)[0] == os.getpid()
    finally:
        pool.close()
    assert "past its deadline of 1 s" in capfd.readouterr().err


def test_a_forked_helper_that_dies_loses_no_job(jobs_module, tmp_path):
    pool = HelperPool(2, "helper_jobs:warm", fork=True)
    try:
        release = tmp_path / "release"
        held = pool.submit("helper_jobs:hold", str(release))
        dies = pool.submit("helper_jobs:die", os.getpid())  # the other helper takes it and dies
        assert dies.result() == "ran in the parent"
        release.touch()
        assert held.result()[0] != os.getpid()
        assert [pool.submit("helper_jobs:add", i, 1).result() for i in range(3)] == [1, 2, 3]
    finally:
        pool.close()


def test_unpicklable_work_and_local_functions_run_here(pool):
    local = pool.submit(lambda: os.getpid())
    assert not local.remote and local.result() == os.getpid()
    with_lock = pool.submit("helper_jobs:add", [1], [__import__("threading").Lock()])
    assert not with_lock.remote


def test_helpers_off_runs_everything_here(jobs_module, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS", "0")
    job = helpers.submit("figures", "helper_jobs:pid")
    assert not job.remote and job.result() == os.getpid()
    assert helpers.pool_size("figures") == 0
    monkeypatch.setenv("ICL_HELPERS", "maybe")
    with pytest.raises(ValueError, match="ICL_HELPERS"):
        helpers.pool_size("figures")


def test_pool_sizes_follow_the_cpus(monkeypatch):
    monkeypatch.delenv("ICL_HELPERS", raising=False)
    monkeypatch.setattr(pools, "_cpus", lambda: 1)
    assert helpers.pool_size("figures") == 0 and helpers.pool_size("lpips") == 0  # they would only compete
    monkeypatch.setattr(pools, "_cpus", lambda: 2)
    assert helpers.pool_size("figures") == 2 and helpers.pool_size("lpips") == 1
    monkeypatch.setattr(pools, "_cpus", lambda: 64)
    assert helpers.pool_size("figures") == 2


def test_a_figure_drawn_by_a_helper_is_the_same_bytes(tmp_path, monkeypatch):
    from icl.report.plots import shot_curve_panels

    panels = {"task a": {"m1": [dict(shots=1, mean=3.0, ci_low=2.5, ci_high=3.5),
                                dict(shots=4, mean=5.0, ci_low=4.0, ci_high=6.0)],
                         "m2": [dict(shots=1, mean=2.0), dict(shots=4, mean=2.5)]}}
    pool = HelperPool(1, "icl.report.plots:warm_up")
    try:
        job = pool.submit(shot_curve_panels, panels, tmp_path / "helper" / "f.png", "mean", ylabel="score")
        assert job.remote
        (tmp_path / "helper").mkdir()
        remote = job.result()
    finally:
        pool.close()
    (tmp_path / "here").mkdir()
    here = shot_curve_panels(panels, tmp_path / "here" / "f.png", "mean", ylabel="score")
    assert [p.name for p in remote] == [p.name for p in here] == ["f.png", "f.svg"]
    for a, b in zip(remote, here):
        assert Path(a).read_bytes() == Path(b).read_bytes()


@pytest.mark.slow  # a helper process importing torch
def test_lpips_in_its_helper_equals_lpips_here(monkeypatch):
    """The vibe scorer's LPIPS of host images, computed by the LPIPS helper, against the same
    function in this process (float32 trunks: equal to rounding; exactly so when both run with
    the same thread count)."""
    from icl.ops import lpips_weights

    if lpips_weights("alex") is None:
        pytest.skip("no LPIPS weights installed")
    import importlib

    lp = importlib.import_module("icl.ops.lpips")
    rng = np.random.default_rng(0)
    a = [rng.integers(0, 256, (40, 52, 3), dtype=np.uint8) for _ in range(3)]
    b = [np.clip(x.astype(int) + rng.integers(-30, 30, x.shape), 0, 255).astype(np.uint8) for x in a]
    pool = HelperPool(1, "icl.ops.lpips:warm_up")
    try:
        job = pool.submit("icl.ops.lpips:lpips_each", a, b, net="alex")
        assert job.remote
        remote = job.result()
    finally:
        pool.close()
    np.testing.assert_allclose(remote, lp.lpips_each(a, b, net="alex"), rtol=1e-5, atol=1e-7)


def _screen_lines(text: str) -> list[str]:
    """``text`` as a terminal shows it: each line after its carriage returns overwrote it."""
    shown = []
    for raw in text.split("\n"):
        line: list[str] = []
        for part in raw.split("\r"):  # each part is written from the line's first column
            line[:len(part)] = part
        shown.append("".join(line).rstrip())
    return shown


def test_the_killed_helper_line_is_not_glued_to_the_progress_bar(jobs_module, monkeypatch, capfd):
    """The run's progress bar (tqdm on standard error) is cleared before the line and drawn
    again after it: the line is a line of its own on the screen, the bar not at its start."""
    from tqdm import tqdm

    monkeypatch.setenv("ICL_HELPER_SILENCE_S", "1.5")
    pool = HelperPool(1, name="test")
    try:
        with tqdm(total=10, unit="item", file=sys.stderr, desc="vibe identity", mininterval=0) as bar:
            bar.update(3)
            stopped = pool.submit("helper_jobs:stop_myself", os.getpid())
            assert _within(30, stopped.result) == "ran in the parent"
            bar.update(7)
    finally:
        _within(10, pool.close)
    err = capfd.readouterr().err
    told = [line for line in _screen_lines(err) if "killed it" in line]
    assert len(told) == 1 and told[0].startswith("icl: ") and "sent no heartbeat for 1.5 s" in told[0], err
    assert "vibe identity: 100%" in _screen_lines(err)[-2], err  # the bar drawn again, below the line
