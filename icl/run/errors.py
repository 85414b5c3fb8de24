"""Errors the runner raises or records, each naming what failed and where."""

from __future__ import annotations


class ModelOutputError(ValueError):
    """A model returned something that is not a valid prediction for a sample."""

    def __init__(self, model: str, task: str, dataset: str, query_id: str, message: str):
        self.model, self.task, self.dataset, self.query_id = model, task, dataset, query_id
        super().__init__(f"model {model!r} returned an invalid prediction for task {task!r}, dataset {dataset!r}, "
                         f"sample {query_id!r}: {message}")


class ConfigError(ValueError):
    """Bad run settings (unknown task, dataset or model names; impossible options)."""
