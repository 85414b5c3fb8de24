"""The one runner for every benchmark: plan -> cache -> batch -> model -> store -> score ->
summarise -> report.

``python -m icl.run BENCHMARK [options]`` or the ``icl`` console script; in Python,
``run(RunConfig(...))``, ``rescore(run_dir)`` or ``icl.evaluate(...)``.
"""

from __future__ import annotations

from icl.run.config import ModelSpec, RunConfig
from icl.run.errors import ConfigError
from icl.run.runner import Outcome, rescore, run

__all__ = ["ConfigError", "ModelSpec", "Outcome", "RunConfig", "rescore", "run"]
