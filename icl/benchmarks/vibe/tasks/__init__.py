"""Tasks of the visual in-context benchmark: inputs, target encodings, decoding and scores.

``from icl.benchmarks.vibe.tasks import get_task, list_tasks, PredictionError``.
"""

from icl.benchmarks.vibe.tasks.base import EncodingError, Episode, PredictionError, Task
from icl.benchmarks.vibe.tasks.registry import get_task, list_tasks, paper_tasks

__all__ = ["EncodingError", "Episode", "PredictionError", "Task", "get_task", "list_tasks", "paper_tasks"]
