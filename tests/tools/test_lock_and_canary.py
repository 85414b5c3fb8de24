"""tools/lock.py (the lock's format and the drift check) and tools/canary.py's bisection, as pure
functions over "versions -> pass/fail": no package index, no installer, no network."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"icl_tools_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = _load("lock")
canary = _load("canary")


# --- the lock ------------------------------------------------------------------------------

def test_committed_locks_pin_every_package_exactly():
    for name in ("lock.txt", "lock-gpu.txt"):
        pins = lock.parse_lock((ROOT / "requirements" / name).read_text())
        assert pins["torch"] == "2.13.0"  # the release, not the local build label (+cpu)
        assert {"transformers", "diffusers", "numpy", "pytest", "ray", "kernels"} <= set(pins)
        assert all("+" not in v for v in pins.values())
    gpu = lock.parse_lock((ROOT / "requirements" / "lock-gpu.txt").read_text())
    cpu = lock.parse_lock((ROOT / "requirements" / "lock.txt").read_text())
    assert "numba-cuda" in gpu and "numba-cuda" not in cpu
    assert all(gpu[name] == version for name, version in cpu.items())  # the GPU lock extends the CPU one


def test_every_open_input_is_in_the_lock():
    """Each package named in requirements/dev.in (the input) is pinned in the lock (the output)."""
    pins = lock.parse_lock((ROOT / "requirements" / "lock.txt").read_text())
    for raw in (ROOT / "requirements" / "dev.in").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name = lock.canonical(line.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip())
        assert name in pins, f"{name} (requirements/dev.in) is not in requirements/lock.txt: run make lock"


def test_parse_lock_rejects_a_range():
    with pytest.raises(ValueError, match="line 2"):
        lock.parse_lock("a==1.0\nb>=2\n")


def test_parse_lock_normalises_names_and_ignores_comments():
    assert lock.parse_lock("# header\nPyYAML==6.0.2  # why\nzope.interface==7.0\n") == {
        "pyyaml": "6.0.2", "zope-interface": "7.0"}


def test_drift_names_each_difference():
    pins = {"torch": "2.13.0", "numpy": "2.4.6", "gone": "1.0"}
    have = {"torch": "2.13.0+cpu", "numpy": "2.5.0", "extra": "0.1", "pip": "26.0"}
    assert lock.drift(pins, have) == [
        "gone==1.0 is locked but not installed",
        "numpy is 2.5.0, the lock says 2.4.6",
        "extra 0.1 is installed but not in the lock",
    ]
    assert lock.drift({"torch": "2.13.0"}, {"torch": "2.13.0+cpu", "pip": "26"}) == []


# --- the canary's bisection ------------------------------------------------------------------

def _world(breaks):
    """``passes(reverted)`` for a world where the checks fail while any set in ``breaks`` is
    wholly upgraded (a set of two: the pair breaks only together); records every call."""
    calls = []

    def passes(reverted: frozenset[str]) -> bool:
        calls.append(reverted)
        return not any(not (group & reverted) for group in breaks)

    return passes, calls


SUSPECTS = ["accelerate", "diffusers", "huggingface-hub", "numpy", "safetensors", "transformers"]


def test_one_breaking_upgrade_is_named():
    passes, calls = _world([{"huggingface-hub"}])
    assert canary.find_breakers(SUSPECTS, passes) == ["huggingface-hub"]
    # put back one at a time until it passes, then confirm it alone suffices
    assert calls == [frozenset(SUSPECTS[:1]), frozenset(SUSPECTS[:2]), frozenset(SUSPECTS[:3]),
                     frozenset({"huggingface-hub"})]


def test_first_suspect_breaking_needs_one_run():
    passes, calls = _world([{"accelerate"}])
    assert canary.find_breakers(SUSPECTS, passes) == ["accelerate"]
    assert calls == [frozenset({"accelerate"})]


def test_two_independent_breakers_are_both_named():
    passes, _ = _world([{"diffusers"}, {"transformers"}])
    assert canary.find_breakers(SUSPECTS, passes) == ["transformers", "diffusers"]


def test_a_pair_that_breaks_only_together_names_one_whose_revert_fixes_it():
    passes, _ = _world([{"numpy", "safetensors"}])
    breakers = canary.find_breakers(SUSPECTS, passes)
    assert breakers == ["numpy"]  # putting back either fixes it; the first in order is named
    assert passes(frozenset(breakers))


def test_failure_that_no_revert_fixes_is_not_blamed_on_an_upgrade():
    with pytest.raises(canary.LockFails):
        canary.find_breakers(SUSPECTS, lambda reverted: False)
    with pytest.raises(canary.LockFails):
        canary.find_breakers([], lambda reverted: False)


def test_pyproject_ranges_become_the_canarys_constraints():
    lines = canary.pyproject_constraints()
    assert any(line.startswith("transformers>=") for line in lines)
    assert any(line.startswith("torch>=") for line in lines)
    assert not any(line.startswith("icl-eval") for line in lines)
