"""The visual in-context benchmark (``vibe``, PROTOCOL §1): 13 task names over canonical
datasets, context pairs chosen per query, outputs decoded and scored per task.

Importing it registers the built-in datasets (``scenes-a``, ``scenes-b``, ``photos``).
"""

from icl.benchmarks.vibe import builtin as _builtin  # noqa: F401  (registers the built-ins)
