"""A slow privileged model for the SIGKILL tests: answers with the reference (an analogy's
oracle target, a chat request's oracle answer), logging every request it answers."""

from __future__ import annotations

import json
import os
import time

from icl.models import AnalogyRequest, ChatRequest
from icl.models.builtin import Identity, Oracle


class SlowOracle(Oracle):
    name = "slow-oracle"
    version = "1"
    serves = (AnalogyRequest, ChatRequest)
    batch_size = 3
    accepts_tensors = False  # the oracle's privilege (a subclass of icl's reference baseline)

    def predict(self, requests):
        time.sleep(float(os.environ.get("ICL_TEST_SLEEP", "0")))
        keys = [r.id if isinstance(r, ChatRequest) else f"{r.dataset}/{r.task}/{r.query_id}/{r.shots}" for r in requests]
        fd = os.open(os.environ["ICL_TEST_COUNT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, "".join(json.dumps(k) + "\n" for k in keys).encode())
        finally:
            os.close(fd)
        return [r.oracle_answer if isinstance(r, ChatRequest) else r.oracle_target for r in requests]


class SlowIdentity(Identity):
    """The query handed back (an image that differs from the target, so LPIPS is computed),
    ``$ICL_TEST_SLEEP`` s per batch of 2, each answered request logged as in :class:`SlowOracle`."""

    name = "slow-identity"
    version = "1"
    batch_size = 2

    def predict(self, requests):
        time.sleep(float(os.environ.get("ICL_TEST_SLEEP", "0")))
        log = os.environ.get("ICL_TEST_COUNT_LOG")
        if log:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, "".join(json.dumps(f"{r.dataset}/{r.task}/{r.query_id}/{r.shots}") + "\n"
                                     for r in requests).encode())
            finally:
                os.close(fd)
        return super().predict(requests)
