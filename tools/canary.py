"""The canary: does icl still work with the newest releases its pyproject allows, and if not, which
upgrade broke it?  ``make canary`` (docs/install.md, "Before a release").

1. A scratch venv (``build/canary/venv``) gets the newest release of every package the open
   input (``requirements/dev.in``) names, within pyproject's ranges (they are passed as
   constraints), except the held packages (default: torch, whose newer releases are multi-GB
   CUDA builds here: ``--hold ''`` releases it).
2. Checks: ``python -m icl.run --fast`` (all five benchmarks) and the test suite's quick subset
   (``QUICK_TESTS``), from the repository root, with that venv.
3. If they fail, every package whose version differs from the lock is an upgrade suspect.
   The lock's version of each suspect is put back one at a time (``pip install --no-deps``),
   the checks rerun after each, until they pass: the last one put back broke it
   (``find_breakers``; repeated if putting it back alone is not enough). It prints the
   package(s), the lock's version and the newest, and exits 1.

Exit status: 0 the newest releases pass; 1 they fail (breakers printed); 2 the lock itself
fails the checks in the canary venv (not an upgrade: fix main first).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import venv
from pathlib import Path
from typing import Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]


def _load_lock_tool():  # tools/ is no package, and never goes on sys.path (docs/install.md)
    spec = importlib.util.spec_from_file_location("icl_tools_lock", ROOT / "tools" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_lock = _load_lock_tool()
canonical, drift, parse_lock, release = _lock.canonical, _lock.drift, _lock.parse_lock, _lock.release
# What a dependency upgrade breaks first: the registry and every model family (transformers,
# diffusers, safetensors, httpx), the kernels (numpy, torch, triton), this repository's hygiene.
QUICK_TESTS = ["tests/test_repository.py", "tests/models", "tests/ops/test_dispatch.py",
               "-m", "not slow", "-x", "-q", "-p", "no:cacheprovider"]


class LockFails(RuntimeError):
    """The checks fail even with every suspect back at the lock's version."""


def find_breakers(suspects: Sequence[str], passes: Callable[[frozenset[str]], bool]) -> list[str]:
    """The upgrades that break the checks.

    ``passes(reverted)`` runs the checks with the packages in ``reverted`` at the lock's version
    and every other suspect at its newest; ``passes(frozenset())`` is assumed to have failed
    (the canary's first run). Suspects are put back one at a time, in the given order, until
    the checks pass; the last one put back is a breaker. If putting back the breakers found so
    far does not suffice on its own, the search repeats over the remaining suspects. Raises
    ``LockFails`` when putting back every suspect still fails.
    """
    breakers: list[str] = []
    while True:
        reverted = list(breakers)
        culprit = None
        for name in suspects:
            if name in breakers:
                continue
            reverted.append(name)
            if passes(frozenset(reverted)):
                culprit = name
                break
        if culprit is None:
            raise LockFails(f"the checks fail with all of {list(suspects)} back at the lock's versions")
        breakers.append(culprit)
        if len(breakers) == len(reverted) or passes(frozenset(breakers)):
            return breakers


def pyproject_constraints() -> list[str]:
    """pyproject's requirement ranges (dependencies and every extra but the self-referencing
    ``icl-eval[...]``), as constraints: the canary takes the newest release they allow."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines += [req for req in extra if not req.startswith("icl-eval")]
    return lines


class Canary:
    def __init__(self, where: Path, hold: Iterable[str], lock: Path, log: Callable[[str], None] = print):
        self.where = where
        self.python = str(where / "venv" / "bin" / "python")
        self.hold = {canonical(h) for h in hold if h}
        self.lock = parse_lock(lock.read_text())
        self.log = log

    def pip(self, *args: str) -> None:
        subprocess.run([self.python, "-m", "pip", "-q", *args], check=True)

    def create(self) -> None:
        shutil.rmtree(self.where / "venv", ignore_errors=True)
        venv.create(self.where / "venv", with_pip=True)
        self.pip("install", "--upgrade", "pip")
        self.where.mkdir(parents=True, exist_ok=True)
        constraints = self.where / "constraints.txt"
        held = [f"{name}=={self.lock[name]}" for name in sorted(self.hold) if name in self.lock]
        constraints.write_text("\n".join(pyproject_constraints() + held) + "\n")
        # --upgrade-strategy eager: the newest allowed release of every dependency, not only
        # of the packages named in dev.in
        self.pip("install", "--upgrade", "--upgrade-strategy", "eager", "-c", str(constraints),
                 "-r", str(ROOT / "requirements" / "dev.in"))

    def installed(self) -> dict[str, str]:
        out = subprocess.run([self.python, "-m", "pip", "list", "--format=freeze"], check=True,
                             capture_output=True, text=True).stdout
        return {canonical(n): v for n, _, v in (line.partition("==") for line in out.splitlines()) if v}

    def upgrades(self) -> dict[str, tuple[str, str]]:
        """``{name: (lock version, installed version)}`` for every package that differs."""
        have = self.installed()
        return {name: (self.lock[name], have[name]) for name in sorted(have)
                if name in self.lock and release(have[name]) != self.lock[name]}

    def checks_pass(self) -> bool:
        with tempfile.TemporaryDirectory() as out:
            steps = [[self.python, "-m", "icl.run", "--fast", "--out", out],
                     [self.python, "-m", "pytest", *QUICK_TESTS]]
            for step in steps:
                start = time.monotonic()
                proc = subprocess.run(step, cwd=ROOT, capture_output=True, text=True)
                took = time.monotonic() - start
                if proc.returncode != 0:
                    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                    self.log(f"  FAIL {' '.join(step[1:4])} ({took:.0f} s, rc {proc.returncode}):\n{tail}")
                    return False
                self.log(f"  ok   {' '.join(step[1:4])} ({took:.0f} s)")
        return True

    def set_versions(self, upgrades: dict[str, tuple[str, str]], reverted: frozenset[str]) -> None:
        pins = [f"{name}=={old if name in reverted else new}" for name, (old, new) in upgrades.items()]
        self.pip("install", "--no-deps", *pins)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--where", type=Path, default=ROOT / "build" / "canary")
    parser.add_argument("--hold", default="torch",
                        help="comma-separated packages kept at the lock's version (default: torch)")
    parser.add_argument("--lock", type=Path, default=ROOT / "requirements" / "lock.txt")
    args = parser.parse_args(argv)
    canary = Canary(args.where, args.hold.split(","), args.lock)
    print(f"canary: newest releases into {canary.where / 'venv'} (held at the lock: {sorted(canary.hold) or 'none'})")
    canary.create()
    upgrades = canary.upgrades()
    for name, (old, new) in upgrades.items():
        print(f"  {name}: {old} (lock) -> {new}")
    for line in drift(canary.lock, canary.installed()):
        if "not in the lock" in line:
            print(f"  new dependency: {line}")
    print("canary: checks with the newest releases")
    if canary.checks_pass():
        print(f"canary: PASS with {len(upgrades)} upgrade(s) over the lock; `make lock` takes them")
        return 0

    def passes(reverted: frozenset[str]) -> bool:
        print(f"canary: checks with {', '.join(sorted(reverted))} back at the lock's version")
        canary.set_versions(upgrades, reverted)
        return canary.checks_pass()

    try:
        breakers = find_breakers(list(upgrades), passes)
    except LockFails as exc:
        print(f"canary: {exc}: the failure is not an upgrade (run `make test` on the lock)")
        return 2
    for name in breakers:
        old, new = upgrades[name]
        print(f"canary: BROKEN BY {name} {new} (the lock has {old}; icl passes with {name}=={old})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
