"""Image generators on the CPU: a batch of 4 requests beside a batch-1 loop (images/s, ratio).

Tiny randomly initialised folders built with the real diffusers / transformers classes
(``tests/models/t2i/tiny_t2i.py``) and loaded through the adapters' real ``from_pretrained``
path, fp32, one thread (tiny models gain nothing from more, and a shared CI machine stalls
multi-threaded OpenMP on them): Stable Diffusion 1.5 layout at 16 x 16 px (2 steps), Janus-Pro
layout at 64 x 64 px (16 image tokens), requests at two output sizes.
"""

from __future__ import annotations

import pytest
import torch

from bench._peer import compare
from icl.models import GenerationRequest, get_model
from tests.models.t2i.tiny_t2i import build_janus, build_sd

BATCH = 4
FAMILIES = {
    "diffusers-t2i": (build_sd, dict(steps=2, batch_size=BATCH)),
    "janus": (build_janus, dict(max_batch=BATCH)),
}


def requests() -> list[GenerationRequest]:
    prompts = ["a red star", "two blue circles", "a green square on sand", "a star"]
    sizes = [(24, 30), (40, 22)] * 2
    return [GenerationRequest(f"b{i}", (p,), size=s, seed=i) for i, (p, s) in enumerate(zip(prompts, sizes))]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_generator_batch_vs_loop(benchmark, tmp_path_factory, name):
    build, args = FAMILIES[name]
    folder = build(tmp_path_factory.mktemp(f"bench-{name}") / name)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = get_model(name, weights=str(folder), **args)
        model.load("cpu")
        reqs = requests()
        benchmark.extra_info.update(model=name, batch=BATCH, dtype="float32", threads=1, **args)
        ratio = compare(benchmark, lambda: model.predict(reqs), lambda: [model.predict([r]) for r in reqs],
                        peer_name="batch-1 loop", items=BATCH, rounds=3)
        assert ratio > 0
    finally:
        torch.set_num_threads(threads)
