"""greedy_match_counts (cpu backend) on 1,600 ragged samples x 10 thresholds, beside the
pure-torch reference backend and beside greedy_match on one large IoU matrix."""

from __future__ import annotations

import numpy as np
import pytest

from bench._peer import compare
from bench.bench_best50 import make_records
from icl.ops import greedy_match, greedy_match_counts
from icl.ops._dispatch import backend_status
from icl.ops.greedy_match import pairwise_iou

THRESHOLDS = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]


@pytest.fixture(autouse=True)
def _need_cpu():
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)


def test_bench_greedy_match_counts(benchmark):
    records = make_records()
    pred = np.concatenate([r.pred for r in records])
    gt = np.concatenate([r.gt for r in records])
    p_off = np.r_[0, np.cumsum([len(r.pred) for r in records])]
    g_off = np.r_[0, np.cumsum([len(r.gt) for r in records])]
    args = (pred, p_off, gt, g_off, THRESHOLDS)
    compare(benchmark, lambda: greedy_match_counts(*args, backend="cpu"),
            lambda: greedy_match_counts(*args, backend="reference"),
            peer_name="reference backend (torch + Python greedy)", items=len(records), rounds=20, peer_rounds=3)


def test_bench_greedy_match_large_matrix(benchmark):
    import torch

    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 2000, size=(700, 2))
    boxes = torch.from_numpy(np.c_[xy, xy + rng.uniform(10, 200, size=(700, 2))])
    iou = pairwise_iou(boxes[:400], boxes[300:]).numpy()
    compare(benchmark, lambda: greedy_match(iou, 0.1, backend="cpu"), lambda: greedy_match(iou, 0.1, backend="reference"),
            peer_name="reference backend", items=1, rounds=10, peer_rounds=3)
