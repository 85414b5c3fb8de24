"""Lazy package exports (``name -> submodule`` resolved on first attribute access) and the
plugin look-ups the model and benchmark registries share."""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from typing import Any, Callable, Iterable


def lazy_getattr(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: imports ``package.<exports[name]>`` on
    first use and caches the attribute in the package ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__


def plugin_entry_points(group: str, builtin: Iterable[str], kind: str, log: logging.Logger) -> dict[str, Any]:
    """The entry points of ``group`` by name (the first of each name), ignoring, with a
    warning, those that would shadow a built-in ``kind`` (model, benchmark)."""
    reserved = set(builtin)
    found: dict[str, Any] = {}
    for ep in entry_points(group=group):
        if ep.name in reserved:
            log.warning("entry point %s = %s ignored: %r is a built-in %s", ep.name, ep.value, ep.name, kind)
            continue
        found.setdefault(ep.name, ep)
    return found


def import_target(target: str) -> Any:
    """The object named by ``"module:attr.sub"`` (ImportError/AttributeError propagate)."""
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
