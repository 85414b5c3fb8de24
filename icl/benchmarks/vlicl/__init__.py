"""VL-ICL Bench (PROTOCOL §3): the ``vlicl`` benchmark plugin, its built-in data and its
deterministic judge (registered as model ``vlicl-judge`` on import).

- :class:`~icl.benchmarks.vlicl.benchmark.VLICL`: the plugin.
- :func:`~icl.benchmarks.vlicl.summary.shot_summary`: zero-shot, peak, ICL efficiency of a curve.
- :func:`~icl.benchmarks.vlicl.records.load_published`: the release layout loader.

Options (``--name value``): ``tasks`` (default: all; on the release, those present), ``seeds``
(0,1,2), ``shots`` (default: each task's grid), ``many_shot`` (adds 16, 32, 64), ``description``
(detailed | concise | none), ``variant`` (image | text | real_names), ``cot`` (two-pass chain of
thought), ``parse`` (legacy | lenient | both), ``queries`` (a cap per task), ``prompt_style``
(chat | reference) with ``reference_family``, ``repeat`` (appendix B.4), ``efficiency`` (all |
fitting), ``textocr`` (reference | keep_dots). Without ``data_root`` (and always with ``--fast``)
the built-in procedural data is used and judged by ``vlicl-judge``; on the release the
text-to-image tasks need a vision-language judge (``--judge``, e.g. ``hf-vlm``). See docs/vlicl.md.
"""

from __future__ import annotations

from icl.benchmarks.vlicl.benchmark import VLICL
from icl.models.registry import register_model

try:
    register_model("vlicl-judge", "icl.benchmarks.vlicl.judge:VLICLJudge")
except ValueError:  # already registered (the package was imported before, or the user replaced it)
    pass

__all__ = ["VLICL"]
