"""Test-local adapters (they receive :class:`icl.models.AnalogyRequest` s), loaded in the
runner's subprocess through a temporary entry point or registered in-process."""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np

from icl.benchmarks.cobsat.judge import CoBSATJudge
from icl.models import Adapter
from icl.models.builtin import Oracle
from icl.models.icl_baselines import CopyLast
from icl.models.requests import ChatRequest
from tests.run._kill_adapter import SlowOracle

SLOW_JUDGE_S = 0.2  # per question of SlowCoBSATJudge


class Counting(Oracle):
    """The oracle, logging every request it answers (one JSON line ``[dataset, task, query,
    shots]``, appended and flushed before returning) to ``$ICL_TEST_COUNT_LOG``; sleeps
    ``$ICL_TEST_SLEEP`` s per batch."""

    name = "counting"
    version = "1"
    batch_size = 2
    accepts_tensors = False  # the oracle's privilege (a subclass of icl's reference baseline)

    def predict(self, requests):
        time.sleep(float(os.environ.get("ICL_TEST_SLEEP", "0")))
        lines = "".join(json.dumps([r.dataset, r.task, r.query_id, r.shots]) + "\n" for r in requests)
        fd = os.open(os.environ["ICL_TEST_COUNT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, lines.encode())
        finally:
            os.close(fd)
        return [r.oracle_target for r in requests]


class BadShape(Adapter):
    """Returns a 2-D array for the second request of each batch (a wrong shape)."""

    name = "bad-shape"
    batch_size = 4

    def predict(self, requests):
        out = [r.query for r in requests]
        if len(out) > 1:
            out[1] = np.zeros(out[1].shape[:2], np.uint8)
        return out


class Crashing(Adapter):
    """Raises inside predict."""

    name = "crashing"

    def predict(self, requests):
        raise RuntimeError("weights exploded")


class Constant(Adapter):
    """Answers every request with a uniform image of ``level`` at the target size (a model
    argument, part of the model's identity)."""

    name = "constant"
    version = "1"
    batch_size = 3

    def __init__(self, level: int = 0):
        self.level = level

    def predict(self, requests):
        return [np.full((*r.target_size, 3), self.level, np.uint8) for r in requests]


class LoggingJudge(Adapter):
    """A chat judge answering every question with one JSON object giving ``score`` on each of
    VIF-Bench's six criteria (``icl.benchmarks.vif.rubric``), logging each request id it answers
    (one line, appended) to ``$ICL_TEST_JUDGE_LOG``: which questions a run really sent."""

    name = "logging-judge"
    version = "1"
    batch_size = 4

    def __init__(self, score: int = 5):
        self.score = score

    serves = (ChatRequest,)

    def predict(self, requests):
        from icl.benchmarks.vif.rubric import CRITERIA

        with open(os.environ["ICL_TEST_JUDGE_LOG"], "a", encoding="utf-8") as f:
            f.write("".join(r.id + "\n" for r in requests))
        return [json.dumps({c: self.score for c in CRITERIA}) for r in requests]


class DiesOnce(SlowOracle):
    """The slow oracle (analogies and chat requests; ``$ICL_TEST_SLEEP`` s per batch, answers
    logged to ``$ICL_TEST_COUNT_LOG``) as a Ray worker's model (tests/run/execution/test_run_ray.py,
    bench/bench_scale.py). At its second batch, the first worker process that finds the file
    ``$ICL_TEST_KILL_MARKER`` takes it (renames it) and kills itself with SIGKILL: a worker lost
    in the middle of a run."""

    name = "dies-once"
    _batches = 0

    def predict(self, requests):
        self._batches += 1
        marker = os.environ.get("ICL_TEST_KILL_MARKER")
        if marker and self._batches == 2:
            try:
                os.rename(marker, marker + ".taken")
            except FileNotFoundError:  # another worker took it, or no kill asked for
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().predict(requests)


class StopsOnce(SlowOracle):
    """The slow oracle as a Ray worker's model: at its second batch, the first worker process
    that finds the file ``$ICL_TEST_STOP_MARKER`` takes it (renames it) and stops itself with
    SIGSTOP: a worker alive but frozen in the middle of a run."""

    name = "stops-once"
    _batches = 0

    def predict(self, requests):
        self._batches += 1
        marker = os.environ.get("ICL_TEST_STOP_MARKER")
        if marker and self._batches == 2:
            try:
                os.rename(marker, marker + ".taken")
            except FileNotFoundError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGSTOP)
        return super().predict(requests)


class SlowCoBSATJudge(CoBSATJudge):
    """cobsat's built-in judge taking ``SLOW_JUDGE_S`` per question: a judge whose time is most of
    the run's, as a large VLM judge's is (``--check``'s judge time estimate)."""

    name = "slow-cobsat-judge"
    version = "1"

    def answer(self, request: ChatRequest) -> str:
        time.sleep(SLOW_JUDGE_S)
        return super().answer(request)


SLOW_LOAD_S, SLOW_MODEL_S = 2.0, 0.05


class SlowCopyLast(CopyLast):
    """cobsat's baseline taking ``SLOW_LOAD_S`` to load and ``SLOW_MODEL_S`` per request: a model
    whose load is much of a run (``--check``'s estimate of a run that reuses its answers)."""

    name = "slow-copy-last"
    version = "1"

    def load(self, device: str) -> None:
        time.sleep(SLOW_LOAD_S)
        super().load(device)

    def predict(self, requests):
        time.sleep(SLOW_MODEL_S * len(requests))
        return super().predict(requests)
