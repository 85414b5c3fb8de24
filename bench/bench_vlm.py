"""Vision-language adapters on a tiny random LLaVA (built here, nothing downloaded):

- ``hf-vlm`` batched generation (8 requests, one image each, 6 new tokens, one ``generate``
  call) beside a batch-1 loop over the same requests; the answers are identical.
- the ``openai`` client against a real local chat-completions server serving that model, at
  concurrency 16 beside concurrency 1 (16 requests) (the server batches concurrent requests, as vLLM does).

Floors: batched >= 1.5x the loop; concurrency 16 >= 1.5x concurrency 1.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench._peer import compare
from icl.models import ChatRequest
from icl.models.vlm.hf import HFVisionLanguage
from icl.models.vlm.openai import OpenAIChat
from tests.models.vlm.tiny_vlm import build_llava
from tests.models.vlm.vlm_chat_server import ChatServer

N = 8
FLOOR = 1.5


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
