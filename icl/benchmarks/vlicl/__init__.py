"""VL-ICL Bench (PROTOCOL §3): the ``vlicl`` benchmark plugin, its built-in data and its
deterministic judge (registered as model ``vlicl-judge`` on import).

- :class:`~icl.benchmarks.vlicl.benchmark.VLICL`: the plugin.
- :func:`~icl.benchmarks.vlicl.summary.shot_summary`: zero-shot, peak, ICL efficiency of a curve.
- :func:`~icl.benchmarks.vlicl.records.load_published`: the release layout loader.
"""

from __future__ import annotations

from icl.benchmarks.vlicl.benchmark import VLICL
from icl.models.registry import register_model

try:
    register_model("vlicl-judge", "icl.benchmarks.vlicl.judge:VLICLJudge")
except ValueError:  # already registered (the package was imported before, or the user replaced it)
    pass

__all__ = ["VLICL"]
