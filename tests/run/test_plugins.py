"""The plugin kit of ``docs/plugins.md``, built from the page itself: its package is written to a
temporary folder, installed with pip (entry points and all) and run through ``python -m
icl.run``; ``check_benchmark`` passes on it and catches a benchmark that breaks its promises."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from icl.benchmarks import BenchmarkCheckError, check_benchmark
from icl.benchmarks.base import Benchmark, Item
from icl.benchmarks.check import release_problems
from icl.benchmarks.registry import get_benchmark
from icl.data.release import HubRelease, ReleaseError
from icl.models.requests import ChatRequest, GenerationRequest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugins.md"


def doc_files() -> dict[str, str]:
    """``# file: PATH`` code blocks of docs/plugins.md -> their text."""
    files = {}
    for block in re.findall(r"```(?:python|toml)\n(.*?)```", DOC.read_text(), flags=re.S):
        first, _, body = block.partition("\n")
        m = re.fullmatch(r"# file: (\S+)", first.strip())
        if m:
            files[m.group(1)] = body
    return files


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    pkg, site = tmp_path_factory.mktemp("pkg"), tmp_path_factory.mktemp("site")
    files = doc_files()
    assert {"pyproject.toml", "icl_parity/bench.py", "icl_parity/model.py"} <= set(files)
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(pkg)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    return env


def _icl(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icl.run", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_installed_plugin_runs_through_the_runner(installed, tmp_path):
    listed = _icl(installed, "parity", "--list")
    assert listed.returncode == 0, listed.stderr
    assert "says-even" in listed.stdout and "parity" in listed.stdout.splitlines()[-1]
    out = tmp_path / "out"
    proc = _icl(installed, "parity", "--models", "says-even,says-even:word=odd", "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    with open(out / "accuracy.csv", newline="") as f:
        rows = {r["model"]: r for r in csv.DictReader(f)}
    assert {m: (float(r["accuracy"]), int(r["n"])) for m, r in rows.items()} == {
        "says-even": (0.5, 6), "says-even[word=odd]": (0.5, 6)}
    meta = json.loads((out / "results.json").read_text())
    assert meta["plugins"].get("icl-parity-plugin") == "0.3.1"
    # the page's check passes on the installed benchmark
    check = subprocess.run([sys.executable, "-c", "from icl.benchmarks import check_benchmark; "
                            "from icl_parity.bench import Parity; print(check_benchmark(Parity))"],
                           capture_output=True, text=True, env=installed, timeout=300)
    assert check.returncode == 0 and "'items': 6" in check.stdout, check.stderr


class OrderDependent(Benchmark):
    """Breaks three promises: a request built from a counter, a duplicate key, a stateful score."""

    name = "order-dependent"
    request_types = (ChatRequest,)

    def __init__(self, config=None):
        super().__init__(config)
        self.built = 0

    def items(self):
        return [Item("a", {}, 0), Item("b", {}, 1), Item("b", {}, 2)]

    def request(self, item, privileged=False):
        self.built += 1
        return ChatRequest.user(item.key, f"question {self.built}")

    def score(self, item, response, judgements=()):
        self.built += 1
        return {"accuracy": float(self.built % 2)}

    def summarise(self, rows):
        return {}


def test_check_benchmark_lists_every_broken_promise():
    with pytest.raises(BenchmarkCheckError) as info:
        check_benchmark(OrderDependent, {})
    text = "\n".join(info.value.problems)
    assert "not unique: ['b']" in text
    assert "depends on the order requests are built in" in text
    assert "score() depends on order or instance" in text or "score() is not deterministic" in text


@pytest.mark.parametrize("name,config", [
    ("vibe", {"fast": True, "tasks": ("segmentation", "depth"), "limit": 1}),
    ("best50", {"fast": True, "limit": 2}),
    ("vlicl", {"fast": True, "tasks": ("clevr", "open_t2i_mi"), "shots": (0, 1)}),
])
def test_builtin_benchmarks_keep_the_promises(name, config):
    counts = check_benchmark(get_benchmark(name), config, limit=8)
    assert counts["requests_checked"] > 0 and counts["scores_checked"] == counts["requests_checked"]


class TwoKinds(Benchmark):
    """Sends chat and generation requests and does not override ``request_type``."""

    name = "two-kinds"
    request_types = (ChatRequest, GenerationRequest)

    def items(self):
        return [Item("chat", {"task": "chat"}, 0), Item("draw", {"task": "draw"}, 1)]

    def request(self, item, privileged=False):
        if item.payload == 0:
            return ChatRequest.user(item.key, "hello")
        return GenerationRequest(item.key, ("a red square",), size=(8, 8))

    def score(self, item, response, judgements=()):
        return {"answered": float(response is not None)}

    def summarise(self, rows):
        return {}


def test_request_type_defaults_to_the_type_built():
    bench = TwoKinds({})
    assert [bench.request_type(it) for it in bench.items()] == [ChatRequest, GenerationRequest]
    assert check_benchmark(TwoKinds, {})["requests_checked"] == 2


class BadReleases(TwoKinds):
    """Declares a release on a moving branch, one of no known kind, and an alias to nothing."""

    name = "bad-releases"
    releases = {"mine": HubRelease("me/mine", "main", ("data",), (), "CC0-1.0", "here"), "other": "a string"}
    release_aliases = {"mine-too": "minee"}


def test_check_benchmark_lists_releases_fetch_cannot_use():
    with pytest.raises(BenchmarkCheckError) as info:
        check_benchmark(BadReleases, {})
    assert info.value.problems == [
        "release 'mine': commit 'main' is not 40 hex digits (pin a commit, never a branch)",
        "release 'other' is a str, not one of icl.data.release's HubRelease, Elsewhere or NotPublished",
        "release alias 'mine-too' names 'minee', which releases does not declare"]
    for name in ("vibe", "best50", "vlicl", "cobsat", "vif"):  # the built-ins' declarations
        assert release_problems(get_benchmark(name)) == [], name


def test_the_default_release_check_counts_the_files_of_the_declared_folders(tmp_path):
    class Plain(TwoKinds):
        releases = {"plain": HubRelease("me/plain", "0" * 40, ("data", "more"), (), "CC0-1.0", "here")}

    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "sub" / "a.txt").write_text("a")
    (tmp_path / "data" / "b.txt").write_text("b")
    (tmp_path / "outside.txt").write_text("not the release's")
    with pytest.raises(ReleaseError, match=r"^plain release at .*: no folder more$"):
        Plain.check_release("plain", tmp_path)
    (tmp_path / "more").mkdir()
    counts = Plain.check_release("plain", tmp_path)
    assert counts == {"files": 2} and Plain.release_summary("plain", counts) == "2 files"
