"""best50: cross-image in-context detection (PROTOCOL §2).

A vision-language model sees a support image whose objects of one category carry red boxes
(K = 1, 2, 4, 8 marked examples) and a query image, and answers every object of that category in
the query as ``<bbox_start><xA><yB><xC><yD><bbox_end>`` on a 0-1024 grid. Modules:
``package`` (load/validate a package), ``parse`` (text -> boxes), ``predictions`` (predictions
JSONL), ``score`` (metrics), ``report`` (tables and plots), ``benchmark`` (the runner plugin),
``replay`` (the ``best50-predictions`` model), ``synthetic`` (a small package in the same format).
Names resolve lazily, so importing this package loads neither torch nor matplotlib.
"""

from __future__ import annotations

from icl._lazy import lazy_getattr

PROTOCOL_VERSION = "best50-1"

# public name -> module (relative to this package) that defines it
_EXPORTS = {
    "Package": "package", "Sample": "package", "PackageError": "package", "load_package": "package",
    "load_image": "package",
    "parse_boxes": "parse", "parse_grid_boxes": "parse",
    "Record": "predictions", "PredictionsError": "predictions", "read_predictions": "predictions",
    "Scores": "score", "score_records": "score", "THRESHOLDS": "score", "METRICS": "score",
    "Best50": "benchmark", "write_package": "synthetic",
}

__all__ = ["PROTOCOL_VERSION", *_EXPORTS]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
