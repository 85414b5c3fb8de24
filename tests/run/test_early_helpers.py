"""The command line starts the helper pools a benchmark declares before it imports anything
heavy (icl.run.__main__._start_declared_helpers, icl.benchmarks.registry.declared_helpers), so
that the LPIPS helper's torch import overlaps the run's own imports; the run then stops a pool
it does not use, and stopping a helper that is still warming up neither waits for it nor leaves
its temporary files behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from icl import helpers
from icl.helpers import pools
from icl.benchmarks import registry
from icl.run import __main__ as cli


@pytest.fixture
def warmed(monkeypatch):
    """The pools the command line asks for (all on a guess), recorded instead of started."""
    asked: list[str] = []
    monkeypatch.setattr(helpers, "warm", lambda name, guess=False: asked.append(name) if guess else None)
    return asked


@pytest.mark.parametrize("argv, pools", [
    (["vibe", "--fast", "--models", "identity"], ["lpips"]),
    (["--fast"], ["lpips"]),  # every benchmark's smoke run: vibe's helper among them
    (["--fast", "vibe"], ["lpips"]),
    (["--models", "identity"], ["lpips"]),  # no benchmark named: vibe, the default
    (["vibe", "--device", "cpu"], ["lpips"]),
    (["vibe", "--device=auto"], ["lpips"]),  # CUDA or not is the run's to find out: it stops what it does not use
    (["vibe", "--device", "cuda:1"], []),  # LPIPS is scored on the device
    (["vibe", "--help"], []),
    (["vibe", "--list"], []),
    (["--version"], []),
    (["best50", "--fast"], []),  # declares none
    (["rescore", "runs/vibe"], []),
    (["export", "runs/vibe"], []),
])
def test_the_command_line_starts_what_the_benchmark_declares(argv, pools, warmed):
    cli._start_declared_helpers(argv)
    assert warmed == pools


def test_the_declaration_covers_what_the_benchmark_asks_for():
    """The registry's guess must not drift from the class: every pool vibe asks for on the host is
    declared (a pool declared but not asked for is only stopped early)."""
    from icl.benchmarks.vibe.benchmark import Vibe
    from icl.ops import lpips_weights

    bench = Vibe({"tasks": None})
    asked = set(bench.helper_pools(True))
    assert asked <= set(registry.declared_helpers("vibe"))
    if lpips_weights("alex") is not None:
        assert asked == {"lpips"}
    assert bench.helper_pools(False) == ()  # scored on a device: no host LPIPS


def test_a_registered_benchmark_declares_its_helpers(monkeypatch):
    monkeypatch.setattr(registry, "_registered", {})
    monkeypatch.setattr(registry, "_registered_helpers", {})
    registry.register_benchmark("mine", "my_package.bench:Mine", helpers=("figures",))
    assert registry.declared_helpers("mine") == ("figures",)
    registry.register_benchmark("vibe", "my_package.bench:Other", replace=True)  # a replaced built-in: its own say
    assert registry.declared_helpers("vibe") == ()


def test_the_command_line_imports_nothing_heavy_before_starting_them():
    """The point of starting them first: ``python -m icl.run`` reads its package and command-line
    module without numpy (let alone torch); ``from icl.run import run`` still works."""
    code = ("import sys; import icl.run.__main__; heavy = [m for m in ('numpy', 'torch', 'cv2', 'icl.run.runner') "
            "if m in sys.modules]; print(heavy); from icl.run import run, RunConfig; print(run.__module__)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "icl.run.runner"]


def test_a_run_stops_a_guessed_pool_it_does_not_use(monkeypatch):
    """best50 scores no LPIPS: a pool started on the command line's guess is stopped when the run
    begins (here the LPIPS pool, with a helper that does nothing but wait); a pool an earlier run
    started itself stays for the next run that needs it."""
    from icl.run.planning.config import RunConfig
    from icl.run.runner import _start_helpers
    from icl.run.planning.setup import open_benchmark

    monkeypatch.delenv(helpers.ENV, raising=False)
    monkeypatch.setattr(pools, "_cpus", lambda: 2)
    for name in ("lpips", "figures"):
        monkeypatch.setitem(helpers.POOLS, name, helpers.PoolSpec(1, "", f"a stand-in {name} pool"))
        helpers.stop(name)
    try:
        helpers.warm("lpips", guess=True)
        helpers.warm("figures")  # an earlier run's
        config = RunConfig(benchmark="best50", fast=True, plots=False)
        _start_helpers(config, open_benchmark(config), "cpu")
        assert "lpips" not in helpers.started() and "figures" in helpers.started()
        helpers.warm("lpips", guess=True)  # a guess the run confirms is kept
        helpers.settle_guesses(["lpips"])
        assert "lpips" in helpers.started()
        helpers.settle_guesses([])  # and is the run's from then on
        assert "lpips" in helpers.started()
    finally:
        for name in ("lpips", "figures"):
            helpers.stop(name)  # the stand-ins: the real pools start again when asked


def test_stopping_a_helper_that_is_warming_up_is_prompt_and_clean(tmp_path, monkeypatch):
    """A run that ends early (a usage error right after the command line started the LPIPS helper)
    does not wait for the helper's warm-up, and the warm-up's temporary folder is removed."""
    (tmp_path / "slow_warm.py").write_text(textwrap.dedent(f"""
        import tempfile, time
        from pathlib import Path

        def warm():
            with tempfile.TemporaryDirectory(dir={str(tmp_path)!r}, prefix="warming-") as d:
                (Path(d) / "started").touch()
                time.sleep(60)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    pool = helpers.HelperPool(1, "slow_warm:warm")
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("warming-*/started")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(tmp_path.glob("warming-*/started")), "the helper never started its warm-up"
    start = time.monotonic()
    pool.close()
    assert time.monotonic() - start < 1.5
    assert not list(tmp_path.glob("warming-*"))
    assert not list(Path(tmp_path).glob("warming-*/started"))
