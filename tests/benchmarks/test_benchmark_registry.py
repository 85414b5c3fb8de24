"""The benchmark registry finds a release by name or alias among the releases each benchmark
declares (``Benchmark.releases``), importing the benchmarks only as far as it must."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from icl.benchmarks.registry import DEFAULT_BENCHMARK, find_release, list_benchmarks, release_names
from icl.data.release import Elsewhere, HubRelease, NotPublished

ROOT = Path(__file__).resolve().parents[2]


def test_names_and_aliases_find_the_declaring_benchmark():
    vlicl = find_release("vlicl")
    assert vlicl.name == "vlicl" and vlicl.benchmark_name == "vlicl" and isinstance(vlicl.release, HubRelease)
    for alias in ("VL-ICL", "vlicl-text", "VLICL"):
        assert find_release(alias) == vlicl
    duke = find_release("duke")
    assert duke.benchmark_name == "vibe" and isinstance(duke.release, Elsewhere)
    assert isinstance(find_release("best50").release, NotPublished)
    assert find_release("nope") is None
    assert find_release("duke", benchmark="cobsat") is None and find_release("x", benchmark="no-such") is None


def test_release_names_are_grouped_as_fetch_lists_them():
    names = release_names()
    assert names[:2] == ["cobsat", "vlicl"] and names[-2:] == ["best50", "vif"]
    assert len(names) == len(set(names)) == 2 + 14 + 2
    assert DEFAULT_BENCHMARK in list_benchmarks()


def test_a_release_is_found_without_importing_every_benchmark():
    """``fetch vlicl`` imports VL-ICL (and CoBSAT, whose drawing it shares), not the others."""
    code = ("import sys, json; from icl.benchmarks.registry import find_release; find_release('vlicl'); "
            "print(json.dumps(sorted(m for m in sys.modules if m.count('.') == 3 and m.startswith('icl.benchmarks.') "
            "and m.endswith('.benchmark'))))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["icl.benchmarks.cobsat.benchmark",
                                                                "icl.benchmarks.vlicl.benchmark"]
