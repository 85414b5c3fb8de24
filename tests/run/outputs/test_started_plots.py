"""Figures handed to helper processes (``Benchmark.plots`` returning jobs, icl.run.outputs.files.Plots): the
runner writes its other files meanwhile, publishes the figures in the benchmark's order, and a
figure that fails fails the run without leaving a staging folder or half a figure behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from icl import helpers
from icl.benchmarks import registry as bench_registry
from icl.benchmarks.base import Benchmark, Item
from icl.models.requests import ChatRequest
from icl.run import RunConfig, run
from icl.run.planning.config import ModelSpec


def write_figure(path: Path, text: str) -> list[Path]:
    """A stand-in figure (a helper job: module-level, picklable arguments)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return [path]


def broken_figure(path: Path) -> list[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("half")
    raise ValueError("this figure cannot be drawn")


class _Drawn(Benchmark):
    name = "drawn"
    broken = False

    def items(self):
        return [Item("q0", {"task": "t"}, 0)]

    def request(self, item, privileged=False):
        return ChatRequest.user(item.key, "question", oracle_answer="a") if privileged else \
            ChatRequest.user(item.key, "question")

    def score(self, item, response, judgements=()):
        return {"accuracy": 1.0}

    def summarise(self, rows):
        return {}

    def plots(self, tables, out, answers=None):
        jobs = [helpers.submit("figures", write_figure, out / "b.txt", "second"), out / "local.txt",
                helpers.submit("figures", write_figure, out / "a.txt", "first")]
        (out / "local.txt").parent.mkdir(parents=True, exist_ok=True)
        (out / "local.txt").write_text("drawn here")
        if self.broken:
            jobs.append(helpers.submit("figures", broken_figure, out / "z.txt"))
        return jobs


@pytest.fixture
def drawn(monkeypatch):
    monkeypatch.setitem(bench_registry._registered, "drawn", _Drawn)
    monkeypatch.setattr(_Drawn, "broken", False)
    return _Drawn


def _config(tmp_path: Path) -> RunConfig:
    return RunConfig("drawn", models=[ModelSpec("oracle")], out=tmp_path / "out", progress=False)


def test_jobs_are_published_in_the_benchmarks_order(drawn, tmp_path):
    run(_config(tmp_path))
    out = tmp_path / "out"
    assert [(out / "plots" / n).read_text() for n in ("b.txt", "local.txt", "a.txt")] == \
           ["second", "drawn here", "first"]
    assert not list(out.glob(".icl-staging*"))
    assert "plots/b.txt" in (out / "report.md").read_text() or (out / "report.html").is_file()


def test_a_figure_that_fails_leaves_nothing_half_written(drawn, tmp_path, monkeypatch):
    monkeypatch.setattr(_Drawn, "broken", True)
    with pytest.raises(ValueError, match="this figure cannot be drawn"):
        run(_config(tmp_path))
    out = tmp_path / "out"
    assert not list(out.glob(".icl-staging*")) and not (out / "plots" / "z.txt").exists()
    assert not (out / "plots").exists()  # the staging folder went, nothing of it was published
