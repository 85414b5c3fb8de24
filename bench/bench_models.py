"""Visual in-context model families at small configurations on the CPU (random weights):
a batch of 8 beside a loop of 8 single calls, and bf16 beside fp32 (images/s, peak RSS, ratios).
The full-size GPU table is ``bench/gpu_models.py``."""

from __future__ import annotations

import pytest
import torch

from bench.gpu_models import make_model, measure, requests

FAMILIES = ["image-analogies", "painter", "mae-vqgan", "lvm"]


@pytest.mark.parametrize("family", FAMILIES)
def test_batch8_vs_loop_and_bf16_vs_fp32(benchmark, family):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny layers: a thread team only adds wake-ups on a shared CPU
    try:
        model = make_model(family, "small", "cpu")
        model.load("cpu")
        reqs = requests(8, size=(64, 64))
        batch = measure(model, reqs, "cpu", rounds=1)
        loop = measure(model, reqs, "cpu", rounds=1, call=lambda: [model.predict([r]) for r in reqs])
        benchmark.pedantic(lambda: model.predict(reqs), rounds=1, iterations=1, warmup_rounds=0)
        bf16 = None
        if family != "image-analogies":  # weight-free: no precision to change
            model.net = model.net.to(torch.bfloat16)
            model.precision = "bf16"
            bf16 = measure(model, reqs, "cpu", rounds=1)
    finally:
        torch.set_num_threads(threads)
    line = (f"\n[{family}] batch 8: {batch['images_per_s']:.1f} img/s (peak {batch['peak_mb']:.0f} MB), "
            f"loop of 8: {loop['images_per_s']:.1f} img/s, batch/loop {batch['images_per_s'] / loop['images_per_s']:.2f}x")
    if bf16 is not None:
        line += (f"; bf16 batch 8: {bf16['images_per_s']:.1f} img/s (peak {bf16['peak_mb']:.0f} MB), "
                 f"bf16/fp32 {bf16['images_per_s'] / batch['images_per_s']:.2f}x")
    print(line)
    benchmark.extra_info.update(batch8=batch, loop8=loop, bf16_batch8=bf16)
    assert batch["images_per_s"] > 0 and loop["images_per_s"] > 0
