"""Lazy package exports (``name -> submodule`` resolved on first attribute access) and the
plugin look-ups the model and benchmark registries share."""

from __future__ import annotations

import importlib
import logging
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


def entry_points(group: str) -> Any:
    """``importlib.metadata.entry_points(group=group)``, imported when a plugin is first looked for
    (20 ms: not before the command line has started the run's helpers)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


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


# Optional packages and the extra of the icl-eval distribution that installs each
EXTRAS = {"transformers": "models", "diffusers": "models", "safetensors": "models", "accelerate": "models",
          "tokenizers": "models", "huggingface_hub": "models", "httpx": "vlm", "ray": "ray", "h5py": "data", "nibabel": "data",
          "tifffile": "data", "scipy": "data", "triton": "gpu", "numba": "gpu", "pandas": "dev"}


def extra_hint(exc: BaseException) -> str:
    """`` (pip install "icl-eval[models]")`` when ``exc`` is a missing optional package, else ''."""
    name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    extra = EXTRAS.get((name or "").split(".")[0])
    return f' (an optional package: pip install "icl-eval[{extra}]")' if extra else ""


def import_target(target: str) -> Any:
    """The object named by ``"module:attr.sub"`` (ImportError/AttributeError propagate; a
    missing optional package names the extra that installs it)."""
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        hint = extra_hint(exc)
        if not hint:
            raise
        raise ModuleNotFoundError(f"{exc}{hint}", name=exc.name) from exc
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def plugin_distributions(groups: Iterable[str] = ("icl.models", "icl.benchmarks")) -> dict[str, str]:
    """Installed distributions that add models or benchmarks through entry points: name -> version
    (recorded in results.json, so a run says which plugin code produced it)."""
    from importlib.metadata import distributions

    wanted, found = set(groups), {}
    for dist in distributions():
        try:
            if any(ep.group in wanted for ep in dist.entry_points):
                found[dist.metadata["Name"]] = dist.version
        except Exception:  # a broken dist-info must not break a run's provenance
            continue
    return dict(sorted(found.items()))
