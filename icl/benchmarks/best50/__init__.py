"""best50: cross-image in-context detection (PROTOCOL §2).

A vision-language model sees a support image whose objects of one category carry red boxes
(K = 1, 2, 4, 8 marked examples) and a query image, and answers every object of that category in
the query as ``<bbox_start><xA><yB><xC><yD><bbox_end>`` on a 0-1024 grid. Modules:
``package`` (load/validate a package, requests), ``parse`` (text -> boxes), ``predictions``
(predictions JSONL), ``score`` (metrics), ``report`` (files and plots), ``run`` (adapters and
baselines), ``synthetic`` (a small package in the same format), ``cli`` (``main(argv)``).
"""

PROTOCOL_VERSION = "best50-1"

__all__ = ["PROTOCOL_VERSION"]
