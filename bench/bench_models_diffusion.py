"""Diffusion adapters on the CPU: a batch of 4 analogies beside a batch-1 loop (images/s, ratio).

Tiny randomly initialised configurations (``icl.models.vicl._diffusion_random``) loaded through
the adapters' real path, 128 x 128 (16 x 16 latents), fp32, one thread (tiny models gain nothing
from more, and a shared CI machine stalls multi-threaded OpenMP on them). Full-size throughput
on a GPU is ``bench/gpu_diffusion.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench._peer import compare
from icl.models import AnalogyRequest, get_model
from icl.models.vicl._diffusion_random import write_random_sd_folder

BATCH = 4
CONFIGS = {
    "prompt-diffusion": dict(steps=4, resolution=128),
    "sd-vicl": dict(steps=6, skip_steps=2, resolution=128, rewire_full_start=0, rewire_half_start=0, adain_start=0),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_random_sd_folder(tmp_path_factory.mktemp("bench-diffusion") / "sd", "tiny", controlnet=True)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_diffusion_batch_vs_loop(benchmark, folder, name):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = get_model(name, weights=str(folder), **CONFIGS[name])
        model.load("cpu")
        rng = np.random.default_rng(0)
        reqs = [AnalogyRequest("bench", "random", f"q{i}", [rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)],
                               [rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)],
                               rng.integers(0, 256, (96, 96, 3), dtype=np.uint8), (96, 96), seed=i)
                for i in range(BATCH)]
        benchmark.extra_info.update(model=name, batch=BATCH, dtype="float32", threads=1, **CONFIGS[name])
        ratio = compare(benchmark, lambda: model.predict(reqs), lambda: [model.predict([r]) for r in reqs],
                        peer_name="batch-1 loop", items=BATCH, rounds=3)
        assert ratio > 0
    finally:
        torch.set_num_threads(threads)
