"""The one runner for every benchmark: plan -> cache -> batch -> model -> store -> score ->
summarise -> report.

``python -m icl.run BENCHMARK [options]`` or the ``icl`` console script; in Python,
``run(RunConfig(...))``, ``rescore(run_dir)`` or ``icl.evaluate(...)``.
"""

from __future__ import annotations

from icl._lazy import lazy_getattr

__all__ = ["ConfigError", "ModelSpec", "Outcome", "RunConfig", "rescore", "run"]
# resolved on first use: ``python -m icl.run`` reads this package before its command line, which
# starts the run's helper processes before the heavy imports (icl.run.__main__)
__getattr__ = lazy_getattr(__name__, {"ConfigError": "errors", "ModelSpec": "planning.config", "RunConfig": "planning.config",
                                      "Outcome": "runner", "rescore": "runner", "run": "runner"}, globals())
