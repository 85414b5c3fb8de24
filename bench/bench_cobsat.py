"""CoBSAT: judge questions per second on a tiny chat model, batched against one at a time; the plan
and request building of the full CoBSAT-lite grid; the ``--fast`` run through the runner.

- Judge: 16 of the benchmark's own judge requests (a CoBSAT-lite image and the object or attribute
  question, cut to 10 new tokens: the benchmark asks 512, the reference's budget, which a random
  model would spend in full) through ``hf-vlm`` on a tiny random LLaVA (built here, nothing
  downloaded), one batched ``predict`` beside a batch-1 loop; the answers are identical. Floor:
  batched >= 1.5x the loop.
- Plan: the 40,000 items of the full lite plan (8 drawable tasks x 5 shot counts x 1,000 paired
  prompts) and ``prompts.csv``; then 2,000 requests built (images drawn). Floors: >= 5,000 items/s,
  >= 1,000 requests/s.
- ``python -m icl.run cobsat --fast`` (copy-last and cobsat-judge, plots included): under 30 s.

Not here yet: generation images/s batched against a loop on a tiny text-to-image pipeline: the
generator adapters (tiny Janus) belong to the generators issue and are not merged.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from bench._peer import compare, fast_run_seconds, report
from icl.benchmarks.cobsat.benchmark import CoBSAT
from icl.models.vlm.hf import HFVisionLanguage
from icl.models.vlm.tiny import build_llava

N = 16
FLOOR = 1.5


@pytest.fixture(scope="module")
def tiny_llava(tmp_path_factory):
    model = HFVisionLanguage(weights=str(build_llava(tmp_path_factory.mktemp("bench-cobsat") / "llava",
                                                     max_positions=1024)), max_batch=N)
    model.load("cpu")
    return model


def judge_requests(n: int) -> list:
    bench = CoBSAT({"fast": True, "prompts": 4, "shots": "2"})
    reqs = []
    for item in bench.items():
        image = bench.request(item).images[-1]
        reqs += [replace(r, max_new_tokens=10) for r in bench.judge_requests(item, np.ascontiguousarray(image))]
    return reqs[:n]


def test_bench_judge_batched_vs_loop(benchmark, tiny_llava):
    reqs = judge_requests(N)
    assert len(reqs) == N
    assert tiny_llava.predict(reqs) == [tiny_llava.predict([r])[0] for r in reqs]
    ratio = compare(benchmark, lambda: tiny_llava.predict(reqs), lambda: [tiny_llava.predict([r]) for r in reqs],
                    peer_name="judge questions one at a time", items=N, rounds=3, peer_rounds=2)
    assert ratio >= FLOOR, f"judge questions batched: {ratio:.2f}x one at a time, floor {FLOOR}x"


def test_plan_and_requests_per_second():
    t0 = time.perf_counter()
    bench = CoBSAT({"lite": True})
    items = bench.items()
    text = bench.prompts_csv()
    plan_s = time.perf_counter() - t0
    assert len(items) == 8 * 5 * 1000 and text.count("\n") == len(items) + 1
    t1 = time.perf_counter()
    for item in items[::20]:
        bench.request(item)
    req_s = time.perf_counter() - t1
    report(f"cobsat plan: {len(items) / plan_s:,.0f} items/s (prompts.csv included); "
           f"{len(items[::20]) / req_s:,.0f} requests/s")
    assert len(items) / plan_s >= 5000 and len(items[::20]) / req_s >= 1000


def test_fast_run_seconds(tmp_path):
    fast_run_seconds("cobsat", tmp_path / "out")
