"""A stored image score does not depend on which other samples share its batch (PROTOCOL §1.4:
identical results whatever the batching or sharding): bit for bit, host and tensor paths."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from icl.benchmarks.vibe.tasks.image import image_scores, image_scores_device
from icl.benchmarks.vibe.tasks._device import validate_tensors
from icl.ops import _lpips_weights as lw
from icl.ops.lpips import LPIPSWeightsNotFound


@pytest.fixture(scope="module", autouse=True)
def _weights():
    try:
        lw.find("alex")
    except LPIPSWeightsNotFound as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"LPIPS alex weights not installed (run `make lpips-weights`): {exc}")


def _pairs(n, seed=3):
    gen = np.random.default_rng(seed)
    targets = [gen.integers(0, 256, (33, 41, 3), dtype=np.uint8) for _ in range(n)]
    preds = [np.clip(t.astype(int) + gen.integers(-60, 61, t.shape), 0, 255).astype(np.uint8) for t in targets]
    return preds, targets


def test_host_scores_independent_of_batch():
    preds, targets = _pairs(5)
    together = image_scores(preds, targets)
    alone = [image_scores([p], [t])[0] for p, t in zip(preds, targets)]
    reordered = image_scores(preds[::-1], targets[::-1])[::-1]
    subset = image_scores(preds[1:3], targets[1:3])
    assert together == alone == reordered  # exact float equality, every metric
    assert subset == alone[1:3]
    assert all(0 < s["lpips"] < 1 for s in alone)


def test_device_scores_independent_of_batch():
    preds, targets = _pairs(4, seed=4)
    tensors = [torch.from_numpy(p) for p in preds]
    together = image_scores_device(validate_tensors(tensors), targets)
    alone = [image_scores_device(validate_tensors([t]), [g])[0] for t, g in zip(tensors, targets)]
    assert together == alone
    assert [s["lpips"] for s in alone] == [s["lpips"] for s in image_scores(preds, targets)]
