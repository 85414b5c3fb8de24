"""Models for ``bench/bench_scale.py``: the oracle, answering at once or after sleeping 50 ms per
batch (a model whose time is spent off this machine's CPUs, as on a GPU). Registered by name in
the driver; Ray workers import this module to unpickle them (the repository root is on their path)."""

from __future__ import annotations

import time

from icl.models import AnalogyRequest, ChatRequest
from icl.models.builtin import Oracle

SLEEP_S = 0.05


class Instant(Oracle):
    name = "scale-instant"
    version = "1"
    serves = (AnalogyRequest, ChatRequest)
    batch_size = 1
    accepts_tensors = False  # the oracle's privilege (a subclass of icl's reference baseline)

    def predict(self, requests):
        return [r.oracle_answer if isinstance(r, ChatRequest) else r.oracle_target for r in requests]


class Sleeping(Instant):
    name = "scale-sleep50"

    def predict(self, requests):
        time.sleep(SLEEP_S)
        return super().predict(requests)
