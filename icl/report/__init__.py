"""Statistics, rank aggregation (PROTOCOL §1.4), tables and plots for benchmark reports.

Benchmarks build their summaries from these pieces; ``icl.run`` writes the common files.
"""

from __future__ import annotations

from icl.report.aggregate import (PSNR_CAP, Aggregate, RankTable, Scored, TaskSpec, aggregate, rank_models,
                                  rank_values)
from icl.report.tables import csv_text, jsonable, markdown_section, rank_rows, summary_text

__all__ = [
    "PSNR_CAP", "Aggregate", "RankTable", "Scored", "TaskSpec", "aggregate", "csv_text", "jsonable",
    "markdown_section", "rank_models", "rank_rows", "rank_values", "summary_text",
]
