"""A slow weight-free generator for the monitored-kill test of per-batch commits: a grey image of
the request's size, ``$ICL_TEST_SLEEP`` s per batch of one, each request logged as
``start <id>`` before and ``end <id>`` after its wait (appended to ``$ICL_TEST_COUNT_LOG``)."""

from __future__ import annotations

import os
import time

import numpy as np

from icl.models import Adapter, GenerationRequest


def _log(line: str) -> None:
    fd = os.open(os.environ["ICL_TEST_COUNT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class SlowGenerator(Adapter):
    name = "slow-generator"
    version = "1"
    serves = (GenerationRequest,)
    batch_size = 1

    def predict(self, requests):
        out = []
        for r in requests:
            _log(f"start {r.id}")
            time.sleep(float(os.environ.get("ICL_TEST_SLEEP", "0")))
            _log(f"end {r.id}")
            out.append(np.full((*(r.size or (32, 32)), 3), 128, np.uint8))
        return out
