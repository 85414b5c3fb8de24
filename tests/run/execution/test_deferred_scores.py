"""Scores a helper process still computes (icl.helpers.Deferred, host LPIPS in vibe): the runner
scores the next batches meanwhile, commits each batch in order once its values are there, and a
deferred value that fails fails its own score only."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from icl.helpers import Deferred, pending, resolved
from icl.benchmarks import registry as bench_registry
from icl.benchmarks.base import Benchmark, Item
from icl.models.requests import ChatRequest
from icl.run import RunConfig, run
from icl.run.planning.config import ModelSpec
from icl.run.execution.device import ScorePipeline
from icl.store import Store


def test_deferred_values_wait_only_when_read():
    gate = threading.Event()
    d = Deferred(lambda: (gate.wait(5), [1.5, 2.5])[1], 1, gate.is_set)
    assert not d.ready() and pending([0.0, d])
    gate.set()
    assert d.ready() and not pending([0.0, d]) and float(d) == 2.5
    assert resolved([{"a": d, "b": 3}]) == [{"a": 2.5, "b": 3}]


def test_the_pipeline_holds_batches_whose_values_are_not_there_yet():
    gates = [threading.Event() for _ in range(4)]
    committed = []

    def job(i):
        return lambda: (i, Deferred(lambda: [float(i)], 0, gates[i].is_set))

    def waits(result):
        return pending([result[1]])

    pipe = ScorePipeline(None, overlap=True)
    for i in range(4):
        pipe.submit(job(i), lambda r: committed.append((r[0], float(r[1]))), waits=waits)
    assert committed == []  # all four scored, none ready: none committed, the main thread went on
    gates[1].set()
    gates[0].set()
    pipe.submit(lambda: (9, 9.0), lambda r: committed.append(r), waits=waits)
    assert committed == [(0, 0.0), (1, 1.0)]  # in order, as soon as they are there
    for g in gates:
        g.set()
    pipe.close()
    assert committed == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0), (9, 9.0)]


def test_a_full_queue_waits_for_the_oldest(monkeypatch):
    monkeypatch.setattr(ScorePipeline, "MAX_WAITING", 2)
    gate = threading.Event()
    committed = []
    pipe = ScorePipeline(None, overlap=True)
    timer = threading.Timer(0.3, gate.set)
    timer.start()
    for i in range(3):  # the third submission must wait for the first batch's values
        pipe.submit(lambda i=i: (i, Deferred(lambda: (gate.wait(5), [float(i)])[1], 0, gate.is_set)),
                    lambda r: committed.append((r[0], float(r[1]))), waits=lambda r: pending([r[1]]))
    # committing the oldest waited for its value; the next, ready by then, followed (the newest stays)
    assert gate.is_set() and committed == [(0, 0.0), (1, 1.0)]
    pipe.close()
    assert committed == [(0, 0.0), (1, 1.0), (2, 2.0)]


class _Later(Benchmark):
    """Scores that arrive later (a gate opened once every batch was scored), one that fails."""

    name = "later"
    thread_safe_scoring = True  # scored beside the next batches' requests
    gate = threading.Event()
    scored: list[str] = []

    def items(self):
        return [Item(f"q{i}", {"task": "t"}, i) for i in range(6)]

    def request(self, item, privileged=False):
        r = ChatRequest.user(item.key, f"question {item.payload}")
        return replace(r, oracle_answer=str(item.payload)) if privileged else r

    def score(self, item, response, judgements=()):
        raise AssertionError("score_batch serves this benchmark")

    def score_batch(self, items, responses, judgements, device=None):
        self.scored += [it.key for it in items]
        if len(self.scored) == len(self.items()):
            self.gate.set()  # every batch was scored before any value had to be there

        def values(batch=tuple(it.payload for it in items)):
            assert self.gate.wait(5)
            if 4 in batch:
                raise ValueError("the helper could not score this batch")
            return [float(p) for p in batch]

        return [{"value": Deferred(values, j, self.gate.is_set), "now": 1.0} for j in range(len(items))]

    def summarise(self, rows):
        return {}


def test_a_run_scores_ahead_and_stores_the_values_once_there(tmp_path, monkeypatch):
    monkeypatch.setitem(bench_registry._registered, "later", _Later)
    _Later.gate.clear()
    _Later.scored = []
    config = RunConfig("later", models=[ModelSpec("oracle", {"batch_size": 2})], out=tmp_path / "out", plots=False, progress=False)
    outcome = run(config)
    assert _Later.scored == [f"q{i}" for i in range(6)]
    by_key = {r["key"]: r for r in outcome.rows}
    assert {k: by_key[k]["value"] for k in ("q0", "q1", "q2", "q3")} == {"q0": 0.0, "q1": 1.0, "q2": 2.0, "q3": 3.0}
    # the batch whose deferred values failed: its scores failed, named, the others stored
    assert by_key["q4"]["status"] == by_key["q5"]["status"] == "failed"
    assert outcome.failed_items == 2 and outcome.exit_code == 1
    told = [f for f in outcome.failures if "could not score this batch" in f.message]
    assert len(told) == 2 and {f.item for f in told} == {"q4", "q5"} and told[0].model == "oracle[batch_size=2]"
    with Store(config.store_path) as store:  # stored: a rerun keeps the four and asks the two again
        assert len(store.failures(outcome.run_id)) >= 2
