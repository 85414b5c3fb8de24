"""Tasks of the visual in-context benchmark: inputs, target encodings, decoding and scores.

``from icl.tasks import get_task, list_tasks, PredictionError``.
"""

from icl.tasks.base import EncodingError, Episode, PredictionError, Task
from icl.tasks.registry import get_task, list_tasks, paper_tasks

__all__ = ["EncodingError", "Episode", "PredictionError", "Task", "get_task", "list_tasks", "paper_tasks"]
