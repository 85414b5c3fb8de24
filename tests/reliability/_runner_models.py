"""Misbehaving models for the runner-level reliability tests (loaded through an entry point
in subprocesses, registered directly in-process)."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from icl.models import Adapter


class Sleepy(Adapter):
    """Copy-target that sleeps ``seconds`` on the query ids listed in ``slow`` (comma list)."""

    name = "sleepy"
    version = "1"
    batch_size = 1

    def __init__(self, seconds: float = 5.0, slow: str = ""):
        self.seconds, self.slow = seconds, set(slow.split(",")) - {""}

    def predict(self, requests):
        for r in requests:
            if r.query_id in self.slow:
                time.sleep(self.seconds)
        time.sleep(float(os.environ.get("ICL_TEST_SLEEP", "0")))
        return [r.context_outputs[0] for r in requests]


class Vandal(Adapter):
    """Answers the query after painting every input array black (in place when it can)."""

    name = "vandal"
    version = "1"
    batch_size = 4

    def predict(self, requests):
        out = []
        for r in requests:
            answer = r.query.copy()
            for a in (r.query, *r.context_inputs, *r.context_outputs):
                try:
                    a[...] = 0
                except ValueError:  # read-only: the runner protected it
                    pass
            out.append(answer)
        return out


class Quitter(Adapter):
    """Calls sys.exit on one query id, answers the others with the query."""

    name = "quitter"
    version = "1"
    batch_size = 4

    def __init__(self, quit_on: str = ""):
        self.quit_on = quit_on

    def predict(self, requests):
        if any(r.query_id == self.quit_on for r in requests):
            sys.exit(3)
        return [r.query for r in requests]


class Configured(Adapter):
    """Answers the query brightened by the ``shift`` that the JSON file named by ``config``
    holds, read at load as a model reads its configuration file."""

    name = "configured"
    version = "1"
    batch_size = 4

    def __init__(self, config: str = ""):
        self.config = config

    def load(self, device):
        super().load(device)
        with open(self.config, encoding="utf-8") as f:
            self.shift = int(json.load(f)["shift"])

    def predict(self, requests):
        return [np.clip(r.query.astype(np.int16) + self.shift, 0, 255).astype(np.uint8) for r in requests]
