"""Errors the runner raises or records, each naming what failed and where."""

from __future__ import annotations


from typing import Optional


class ConfigError(ValueError):
    """Bad run settings (unknown task, dataset or model names; impossible options). ``cause``:
    the typed error it reports, when it wraps one (``--check`` chooses the fix by its type)."""

    def __init__(self, message: str = "", cause: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.cause = cause


class CannotServe(ConfigError):
    """A model the benchmark, as configured, cannot run (it serves none of the requests sent,
    or the benchmark refuses it)."""
