"""Errors the runner raises or records, each naming what failed and where."""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad run settings (unknown task, dataset or model names; impossible options)."""
