"""Lazy benchmark registry.

Entries map a name to ``"module:attr"`` (imported only when the benchmark is asked for).
Third-party packages add benchmarks through the entry-point group ``icl.benchmarks``::

    [project.entry-points."icl.benchmarks"]
    my-bench = "my_package.bench:MyBenchmark"

The attribute is a :class:`~icl.benchmarks.base.Benchmark` subclass. Its published data
(``Benchmark.releases``) is found here by name for ``python -m icl.data fetch NAME``
(:func:`find_release`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from icl._lazy import import_target, plugin_entry_points

if TYPE_CHECKING:  # imported when a benchmark is asked for: the command line reads this module first
    from icl.benchmarks.base import Benchmark
    from icl.data.release import Release

log = logging.getLogger("icl.benchmarks")

ENTRY_POINT_GROUP = "icl.benchmarks"

_BUILTIN: dict[str, str] = {
    "vibe": "icl.benchmarks.vibe.benchmark:Vibe",
    "best50": "icl.benchmarks.best50.benchmark:Best50",
    "vlicl": "icl.benchmarks.vlicl.benchmark:VLICL",
    "cobsat": "icl.benchmarks.cobsat.benchmark:CoBSAT",
    "vif": "icl.benchmarks.vif.benchmark:VIF",
}
_registered: dict[str, Any] = {}

#: what ``python -m icl.run`` runs when no benchmark is named
DEFAULT_BENCHMARK = "vibe"

#: helper pools (:data:`icl.helpers.POOLS`) a benchmark's host runs start
#: (``Benchmark.helper_pools``), named here so that the command line can start them before it
#: imports the benchmark: the LPIPS helper's torch import then overlaps the run's own imports
#: (the benchmark still decides: a pool it does not ask for is stopped when the run begins)
_HELPERS: dict[str, tuple[str, ...]] = {"vibe": ("lpips",)}
_registered_helpers: dict[str, tuple[str, ...]] = {}


class UnknownBenchmarkError(LookupError):
    """No benchmark of that name is built in, registered or declared by an entry point."""


def register_benchmark(name: str, target: Any, *, replace: bool = False, helpers: Sequence[str] = ()) -> None:
    """Register ``name`` -> ``"module:attr"`` (lazy) or a Benchmark subclass; ``helpers``: the
    helper pools its runs usually start (:func:`declared_helpers`)."""
    if not replace and (name in _BUILTIN or name in _registered):
        raise ValueError(f"benchmark {name!r} is already registered (pass replace=True to override)")
    _registered[name] = target
    _registered_helpers[name] = tuple(helpers)


def declared_helpers(name: str) -> tuple[str, ...]:
    """The helper pools benchmark ``name`` declares (none for an entry point's, which would
    have to be imported to say)."""
    if name in _registered:
        return _registered_helpers.get(name, ())
    return _HELPERS.get(name, ())


def _entry_points() -> dict[str, Any]:
    return plugin_entry_points(ENTRY_POINT_GROUP, _BUILTIN, "benchmark", log)


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
    from icl.benchmarks.base import Benchmark

    if isinstance(target, str):
        try:
            target = import_target(target)
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"benchmark {name!r}: cannot import {target!r} ({type(exc).__name__}: {exc})") from exc
    if not (isinstance(target, type) and issubclass(target, Benchmark)):
        raise TypeError(f"benchmark {name!r}: {target!r} is not an icl.benchmarks.base.Benchmark subclass")
    return target


@dataclass(frozen=True)
class FoundRelease:
    """A release as the benchmark that declares it says: ``name`` (an alias resolved), the
    description (:mod:`icl.data.release`), the benchmark class (its ``check_release``) and the
    name it is registered under (``python -m icl.run NAME``)."""

    name: str
    release: Release
    benchmark: type[Benchmark]
    benchmark_name: str


def find_release(name: str, benchmark: Optional[str] = None) -> Optional[FoundRelease]:
    """The release called ``name`` (or one of its aliases; case-insensitive) among the
    ``releases`` of ``benchmark`` alone when given (None when that benchmark is unknown or
    declares no such release), else of the benchmark named ``name`` first, then of every other
    in :func:`list_benchmarks` order (each imported only when the ones before it lack the name;
    one that cannot be imported is passed over). None when no benchmark declares it; a
    benchmark named ``name`` (or ``benchmark``) that cannot be imported raises its ImportError
    or TypeError."""
    key = name.lower()
    if benchmark is not None:
        order = [benchmark]
    else:
        known = list_benchmarks()
        order = [b for b in known if b.lower() == key] + [b for b in known if b.lower() != key]
    for bench in order:
        try:
            cls = get_benchmark(bench)
        except UnknownBenchmarkError:
            continue
        except (ImportError, TypeError):
            if bench.lower() == key or benchmark is not None:
                raise
            log.debug("benchmark %r passed over while looking for release %r", bench, name)
            continue
        own = {k.lower(): k for k in cls.releases}
        aliases = {a.lower(): target for a, target in cls.release_aliases.items()}
        found = own.get(aliases.get(key, key).lower())
        if found is not None:
            return FoundRelease(found, cls.releases[found], cls, bench)
    return None


def release_names() -> list[str]:
    """Every release name fetch takes (aliases aside): those on the Hub, then those published
    elsewhere, then those it does not fetch, each sorted; benchmarks that cannot be imported
    are passed over."""
    from icl.data.release import Elsewhere, HubRelease

    kinds: dict[str, list[str]] = {"hub": [], "elsewhere": [], "not": []}
    for bench in list_benchmarks():
        try:
            cls = get_benchmark(bench)
        except (LookupError, ImportError, TypeError):
            continue
        for name, release in cls.releases.items():
            kind = "hub" if isinstance(release, HubRelease) else "elsewhere" if isinstance(release, Elsewhere) else "not"
            kinds[kind].append(name)
    return [n for kind in kinds.values() for n in sorted(dict.fromkeys(kind))]
