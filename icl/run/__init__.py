"""The benchmark runner: plan -> execute -> store -> aggregate -> report.

``python -m icl.run [vibe|best50] [options]`` or the ``icl`` console script; in Python,
``run(RunConfig(...))``.
"""

from __future__ import annotations

from icl.run.errors import ConfigError, ModelOutputError
from icl.run.plan import DEFAULT_MODELS, PROTOCOL, RunConfig
from icl.run.runner import Outcome, run

__all__ = ["DEFAULT_MODELS", "PROTOCOL", "ConfigError", "ModelOutputError", "Outcome", "RunConfig", "run"]
