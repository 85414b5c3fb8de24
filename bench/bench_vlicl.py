"""VL-ICL episode building: support sets per second (records only) and whole requests per second
(support sets, prompts and the built-in images drawn), over all ten tasks of the full built-in
data at its full shot grids.

Peer: the reference code's way of drawing supports, one global ``random.Random`` consumed in
query order with deep copies of the sampled records (order-dependent, so not what we do), written
here from its description. Ours derives one generator per (seed, task, shots, query) instead: the
ratio is the price of order-free episodes. Floors: >= 2,000 support sets/s, >= 150 requests/s,
and at least a third of the peer's speed. Also the whole ``--fast`` run (ten tasks, built-in data)
through the runner with ``copy-last`` and ``vlicl-judge``, summaries and plots included: under 30 s.

The vision-language adapters on a tiny random LLaVA (built here, nothing downloaded):
``hf-vlm`` batched generation (8 requests, one image each, 6 new tokens, one ``generate``
call) beside a batch-1 loop over the same requests (the answers are identical), and the
``openai`` client against a real local chat-completions server serving that model, at
concurrency 16 beside concurrency 1 (16 requests; the server batches concurrent requests, as
vLLM does). Floors: batched >= 1.5x the loop; concurrency 16 >= 1.5x concurrency 1.

Transport alone: the ``openai`` client against a scripted loopback server answering each request
after 50 ms (``tests/models/vlm/raw_http_server.py``), 128 requests handed over in the engine's way
(``predict`` per ``batch_size`` = 64), on the adapter's one loop and connection pool: concurrency 16
beside concurrency 1. Floor: 12x.
"""

from __future__ import annotations

import copy
import random
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from bench._peer import compare
from icl.benchmarks.vlicl import VLICL
from icl.models.registry import get_model
from icl.benchmarks.vlicl.episodes import build_episode
from icl.benchmarks.vlicl.tasks import PER_CLASS
from icl.data.seeds import derive_seed
from icl.models import ChatRequest
from icl.models.vlm.hf import HFVisionLanguage
from icl.models.vlm.openai import OpenAIChat
from icl.models.vlm.tiny import build_llava
from tests.models.vlm import raw_http_server
from tests.models.vlm.vlm_chat_server import ChatServer

QUERIES = 40  # per task


@pytest.fixture(scope="module")
def bench_items() -> tuple[VLICL, list]:
    b = VLICL({"queries": QUERIES, "seeds": (0,)})
    items = list(b.items())
    for task in b.task_ids():
        b.data(task)
    return b, items


def _reference_way(b: VLICL, items: list) -> int:
    """Support sets drawn from one shared generator in plan order (the peer)."""
    g = random.Random(derive_seed(0, "vlicl-bench", "*", "*", "reference-way"))
    n = 0
    for item in items:
        task, _, shots, qid = item.payload
        data = b.data(task)
        q = data.by_id[qid]
        if task in PER_CLASS:
            label = q.get("task_label", q["answer"])
            other = g.choice([c for c in q["classes"] if c != label])
            order = [label, other] if g.choice([True, False]) else [other, label]
            sup = [q["support"][c]["images"][i] for i in range(shots) for c in order]
        elif task == "cobsat":
            lat = q["latent"]
            pool = [r for r in data.support if r["task"] == q["task"] and r["latent"] == lat and r[lat] == q[lat]]
            sup = copy.deepcopy(g.sample(pool, shots))
        else:
            sup = copy.deepcopy(g.sample(data.support, shots))
        n += len(sup)
    return n


def test_support_sets_per_second(benchmark, bench_items) -> None:
    b, items = bench_items

    def ours() -> int:
        return sum(len(build_episode(b.data(i.payload[0]), i.payload[3], i.payload[2], i.payload[1]).support)
                   for i in items)

    ratio = compare(benchmark, ours, lambda: _reference_way(b, items),
                    peer_name="one global random.Random + deepcopy (reference way)", items=len(items), rounds=3)
    per_s = len(items) / benchmark.stats.stats.median
    assert per_s >= 2000, f"{per_s:.0f} support sets/s, floor 2000"
    assert ratio >= 1 / 3, f"{ratio:.2f}x the reference way, floor 0.33x"


def test_requests_per_second(bench_items) -> None:
    b, items = bench_items
    fresh = VLICL({"queries": QUERIES, "seeds": (1,)})  # images not yet drawn: the cold cost
    cold_items = list(fresh.items())
    start = time.perf_counter()
    for item in cold_items:
        fresh.request(item)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    for item in items:
        b.request(item)
    warm = time.perf_counter() - start
    print(f"\n[vlicl requests] {len(items)} episodes: cold {len(cold_items) / cold:.0f}/s "
          f"(images drawn), {len(items) / warm:.0f}/s")
    assert len(cold_items) / cold >= 150, f"{len(cold_items) / cold:.0f} requests/s, floor 150"


def test_fast_run_seconds(tmp_path) -> None:
    import io

    from icl.run import RunConfig, run

    get_model("copy-last"), get_model(VLICL.default_judge)  # imports (torch) not timed
    start = time.perf_counter()
    outcome = run(RunConfig("vlicl", fast=True, out=tmp_path / "run", data_root=tmp_path / "data", progress=False),
                  stdout=io.StringIO(), stderr=io.StringIO())
    seconds = time.perf_counter() - start
    assert outcome.exit_code == 0
    print(f"\n[vlicl --fast] {outcome.stats.computed} items, summaries and plots in {seconds:.1f} s")
    assert seconds < 30, f"--fast took {seconds:.1f} s, ceiling 30 s"

N = 8  # chat requests per adapter call
FLOOR = 1.5  # batched / concurrent over the batch-1 loop


def _requests(n: int = N, tokens: int = 6) -> list[ChatRequest]:
    rng = np.random.default_rng(0)
    return [ChatRequest.user(f"q{i}", rng.integers(0, 256, (24, 24, 3), dtype=np.uint8),
                             "what is the image ?" + " red" * (i % 4), max_new_tokens=tokens, min_new_tokens=tokens)
            for i in range(n)]


@pytest.fixture(scope="module")
def tiny_llava(tmp_path_factory):
    # One intra-op thread: on a shared CPU a descheduled worker thread stalls every parallel op,
    # which would time the machine's load rather than batching.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = HFVisionLanguage(weights=str(build_llava(tmp_path_factory.mktemp("bench-vlm") / "llava")), max_batch=16)
    model.load("cpu")
    yield model
    torch.set_num_threads(threads)


def test_bench_hf_vlm_batched_vs_loop(benchmark, tiny_llava):
    reqs = _requests()  # tests/models/vlm/test_vlm_hf.py checks that both give the same answers
    ratio = compare(benchmark, lambda: tiny_llava.predict(reqs), lambda: [tiny_llava.predict([r]) for r in reqs],
                    peer_name="hf-vlm batch-1 loop", items=N, rounds=3, peer_rounds=2)
    assert ratio >= FLOOR, f"hf-vlm batched generation: {ratio:.2f}x the batch-1 loop, floor {FLOOR}x"


def test_bench_openai_concurrency(benchmark, tiny_llava):
    reqs = _requests(16)
    with ChatServer(tiny_llava, max_batch=16, lifetime_s=240) as server:
        wide = OpenAIChat(model="tiny-llava", base_url=server.base_url, concurrency=16, batch_size=16)
        narrow = OpenAIChat(model="tiny-llava", base_url=server.base_url, concurrency=1, batch_size=16)
        assert wide.predict(reqs[:4]) == tiny_llava.predict(reqs[:4])
        ratio = compare(benchmark, lambda: wide.predict(reqs), lambda: narrow.predict(reqs),
                        peer_name="openai concurrency 1", items=len(reqs), rounds=3, peer_rounds=1)
    assert ratio >= FLOOR, f"openai client: concurrency 16 is {ratio:.2f}x concurrency 1, floor {FLOOR}x"


LATENCY_S = 0.05
TRANSPORT_FLOOR = 12.0


def test_bench_openai_transport_at_50ms(benchmark):
    reqs = [ChatRequest.user(f"t{i}", f"question {i}", max_new_tokens=2) for i in range(128)]

    def engine_way(model: OpenAIChat) -> list:
        out: list = []
        for start in range(0, len(reqs), model.batch_size):  # one predict call per engine batch
            out += model.predict(reqs[start:start + model.batch_size])
        return out

    # the server in its own interpreter: the client's event loop does not share its GIL
    server = subprocess.Popen([sys.executable, raw_http_server.__file__, str(LATENCY_S)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        wide = OpenAIChat(model="m", base_url=base_url, concurrency=16, api_key_env=None)
        narrow = OpenAIChat(model="m", base_url=base_url, concurrency=1, api_key_env=None)
        assert engine_way(wide) == ["ok"] * len(reqs)
        ratio = compare(benchmark, lambda: engine_way(wide), lambda: engine_way(narrow),
                        peer_name="openai concurrency 1 (50 ms loopback latency)", items=len(reqs), rounds=3,
                        peer_rounds=1)
    finally:
        server.communicate(timeout=10)
    assert ratio >= TRANSPORT_FLOOR, f"concurrency 16 is {ratio:.2f}x concurrency 1, floor {TRANSPORT_FLOOR}x"
