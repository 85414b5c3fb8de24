"""LPIPS pairs/s on the CPU (float32), batched, beside a one-pair-at-a-time loop.

No independent CPU peer exists without torchvision/lpips (not allowed here), so the "peer" is
our own function called once per pair: the ratio shows what batching buys.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench._peer import compare
from icl.ops.lpips import LPIPSWeightsNotFound, lpips


@pytest.mark.parametrize("net,size,pairs", [("alex", 256, 8), ("alex", 512, 4), ("vgg", 256, 2)])
def test_lpips_pairs_per_s(benchmark, net, size, pairs):
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.integers(0, 256, (pairs, size, size, 3), dtype=np.uint8))
    b = torch.from_numpy(rng.integers(0, 256, (pairs, size, size, 3), dtype=np.uint8))
    try:
        lpips(a[:1], b[:1], net)
    except LPIPSWeightsNotFound as exc:
        pytest.skip(f"LPIPS {net} weights not installed (run `make lpips-weights`): {exc}")
    benchmark.extra_info.update(net=net, size=size, dtype="float32", threads=torch.get_num_threads())
    compare(benchmark, lambda: lpips(a, b, net), lambda: [lpips(a[i], b[i], net) for i in range(pairs)],
            peer_name="one pair per call", items=pairs, rounds=3)
