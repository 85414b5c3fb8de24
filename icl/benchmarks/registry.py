"""Lazy benchmark registry.

Entries map a name to ``"module:attr"`` (imported only when the benchmark is asked for).
Third-party packages add benchmarks through the entry-point group ``icl.benchmarks``::

    [project.entry-points."icl.benchmarks"]
    my-bench = "my_package.bench:MyBenchmark"

The attribute is a :class:`~icl.benchmarks.base.Benchmark` subclass.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from typing import Any

from icl.benchmarks.base import Benchmark

log = logging.getLogger("icl.benchmarks")

ENTRY_POINT_GROUP = "icl.benchmarks"

_BUILTIN: dict[str, str] = {
    "vibe": "icl.benchmarks.vibe.benchmark:Vibe",
    "best50": "icl.benchmarks.best50.benchmark:Best50",
    "vlicl": "icl.benchmarks.vlicl.benchmark:VLICL",
}
_registered: dict[str, Any] = {}


class UnknownBenchmarkError(LookupError):
    """No benchmark of that name is built in, registered or declared by an entry point."""


def register_benchmark(name: str, target: Any, *, replace: bool = False) -> None:
    """Register ``name`` -> ``"module:attr"`` (lazy) or a Benchmark subclass."""
    if not replace and (name in _BUILTIN or name in _registered):
        raise ValueError(f"benchmark {name!r} is already registered (pass replace=True to override)")
    _registered[name] = target


def _entry_points() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _BUILTIN:
            log.warning("entry point %s = %s ignored: %r is a built-in benchmark", ep.name, ep.value, ep.name)
            continue
        found.setdefault(ep.name, ep)
    return found


def list_benchmarks() -> list[str]:
    """Built-ins first (in their order), then registered and entry-point benchmarks, sorted."""
    extra = sorted((set(_registered) | set(_entry_points())) - set(_BUILTIN))
    return [*_BUILTIN, *extra]


def get_benchmark(name: str) -> type[Benchmark]:
    """The Benchmark class registered as ``name``."""
    target: Any = _registered.get(name) or _BUILTIN.get(name)
    if target is None:
        ep = _entry_points().get(name)
        if ep is None:
            raise UnknownBenchmarkError(name)
        target = ep.value
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"benchmark {name!r}: cannot import {target!r} ({type(exc).__name__}: {exc})") from exc
        target = obj
    if not (isinstance(target, type) and issubclass(target, Benchmark)):
        raise TypeError(f"benchmark {name!r}: {target!r} is not an icl.benchmarks.base.Benchmark subclass")
    return target
