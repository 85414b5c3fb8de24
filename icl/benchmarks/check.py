"""``check_benchmark(cls)``: what the runner relies on, checked on a plugin author's benchmark.

The runner caches, resumes, shards and rescores on the strength of a few promises (see
:mod:`icl.benchmarks.base`): unique, stable item keys; items and requests that do not depend on
the order they are built in or on what else was built; requests that pickle and hash the same
after a round trip; the declared request type of each item; a pure, deterministic scorer; and
``python -m icl.data fetch`` on its declared releases (descriptions it knows, a Hub release
pinned to a commit, aliases naming a declared release). This helper builds two independent
instances and compares them; every broken promise is listed.
"""

from __future__ import annotations

import math
import pickle
import re
from typing import Any, Callable, Mapping, Optional

import numpy as np

from icl.benchmarks.base import Benchmark, Item
from icl.data.release import Elsewhere, HubRelease, NotPublished
from icl.models.requests import AnalogyRequest, ChatRequest, GenerationRequest, content_hash


class BenchmarkCheckError(AssertionError):
    """The benchmark breaks one or more promises; ``problems`` lists them."""

    def __init__(self, name: str, problems: list[str]) -> None:
        super().__init__(f"benchmark {name!r} breaks {len(problems)} promise(s):\n- " + "\n- ".join(problems))
        self.problems = problems


def default_answer(request: Any) -> Any:
    """A fixed answer of the right kind: text for a chat request, a mid-grey image otherwise."""
    if isinstance(request, ChatRequest):
        return "yes"
    if isinstance(request, AnalogyRequest):
        h, w = request.target_size
    elif isinstance(request, GenerationRequest) and request.size is not None:
        h, w = request.size
    else:
        h, w = 64, 64
    return np.full((h, w, 3), 128, np.uint8)


def _same(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    if set(a) != set(b):
        return False
    return all((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)


def check_benchmark(cls: type[Benchmark], config: Optional[Mapping[str, Any]] = None, *,
                    answer: Callable[[Any], Any] = default_answer, limit: int = 64) -> dict[str, int]:
    """Check ``cls`` (with ``config``, default ``cls.fast_config()``) on its first ``limit`` items.

    Raises :class:`BenchmarkCheckError` listing every problem: duplicate or non-string keys,
    items that differ between two instances or two calls, requests that depend on build order,
    that do not pickle or whose content hash changes through pickle, a ``request_type`` that is
    not the type built, scores that change with order or between calls or are not floats.
    ``answer(request)`` is the response scored (default: :func:`default_answer`). Returns counts.
    """
    settings = dict(cls.fast_config() if config is None else config)
    first, second = cls(dict(settings)), cls(dict(settings))
    problems: list[str] = release_problems(cls)
    items_a, items_b = list(first.items()), list(second.items())
    keys = [it.key for it in items_a]
    if not items_a:
        problems.append("items() yields nothing")
    if any(not isinstance(k, str) or not k for k in keys):
        problems.append("an item key is not a non-empty string")
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        problems.append(f"item keys are not unique: {dup[:3]}")
    if [(it.key, dict(it.group)) for it in items_a] != [(it.key, dict(it.group)) for it in items_b]:
        problems.append("two instances with the same settings plan different items (keys, groups or order)")
    if [it.key for it in first.items()] != keys:
        problems.append("a second items() call on one instance plans different keys")
    picked = items_a[:limit]
    by_key_b = {it.key: it for it in items_b}
    # build requests forward on one instance and backward on the other: no order dependence
    forward = {it.key: _request(first, it, problems) for it in picked}
    backward = {it.key: _request(second, by_key_b.get(it.key, it), problems) for it in reversed(picked)}
    for it in picked:
        ra, rb = forward[it.key], backward[it.key]
        if ra is None or rb is None:
            continue
        if content_hash(ra) != content_hash(rb):
            problems.append(f"item {it.key!r}: its request depends on the order requests are built in")
        try:
            rt = pickle.loads(pickle.dumps(ra))
            if content_hash(rt) != content_hash(ra):
                problems.append(f"item {it.key!r}: the request's content hash changes through pickle")
        except Exception as exc:
            problems.append(f"item {it.key!r}: the request does not pickle ({type(exc).__name__}: {exc})")
        declared = first.request_type(it)
        if not isinstance(ra, declared):
            problems.append(f"item {it.key!r}: request_type says {declared.__name__}, request() built "
                            f"{type(ra).__name__}")
    scored = [it for it in picked if forward[it.key] is not None]
    scores_a = {it.key: _score(first, it, answer(forward[it.key]), problems) for it in scored}
    scores_b = {it.key: _score(second, by_key_b.get(it.key, it), answer(forward[it.key]), problems)
                for it in reversed(scored)}
    again = {it.key: _score(first, it, answer(forward[it.key]), problems) for it in scored[:8]}
    for key, a in scores_a.items():
        if a is None:
            continue
        b = scores_b.get(key)
        if b is not None and not _same(a, b):
            problems.append(f"item {key!r}: score() depends on order or instance ({a} vs {b})")
        c = again.get(key)
        if c is not None and not _same(a, c):
            problems.append(f"item {key!r}: score() is not deterministic ({a} vs {c})")
    if problems:
        raise BenchmarkCheckError(cls.name, list(dict.fromkeys(problems)))
    return {"items": len(items_a), "requests_checked": len(picked), "scores_checked": len(scores_a)}


def release_problems(cls: type[Benchmark]) -> list[str]:
    """What ``python -m icl.data fetch`` could not use in ``cls.releases`` and
    ``cls.release_aliases`` (each one line)."""
    problems: list[str] = []
    lowered = [name.lower() for name in cls.releases]
    if len(set(lowered)) != len(lowered):
        problems.append("releases declares names that differ only in case (fetch takes names in any case)")
    for name, release in cls.releases.items():
        if not isinstance(release, (HubRelease, Elsewhere, NotPublished)):
            problems.append(f"release {name!r} is a {type(release).__name__}, not one of icl.data.release's "
                            f"HubRelease, Elsewhere or NotPublished")
        elif isinstance(release, HubRelease):
            if not re.fullmatch(r"[0-9a-f]{40}", release.commit):
                problems.append(f"release {name!r}: commit {release.commit!r} is not 40 hex digits (pin a commit, "
                                f"never a branch)")
            if not release.folders:
                problems.append(f"release {name!r}: no folders (what fetch copies)")
    for alias, target in cls.release_aliases.items():
        if target not in cls.releases:
            problems.append(f"release alias {alias!r} names {target!r}, which releases does not declare")
    return problems


def _request(bench: Benchmark, item: Item, problems: list[str]) -> Any:
    try:
        return bench.request(item)
    except Exception as exc:
        problems.append(f"item {item.key!r}: request() raised {type(exc).__name__}: {exc}")
        return None


def _score(bench: Benchmark, item: Item, response: Any, problems: list[str]) -> Optional[dict[str, float]]:
    try:
        out = bench.score(item, response, ())
    except Exception as exc:
        problems.append(f"item {item.key!r}: score() raised {type(exc).__name__}: {exc}")
        return None
    if not isinstance(out, Mapping) or not all(isinstance(k, str) for k in out):
        problems.append(f"item {item.key!r}: score() must return {{metric: float}}, got {type(out).__name__}")
        return None
    try:
        return {k: float(v) for k, v in out.items()}
    except (TypeError, ValueError):
        problems.append(f"item {item.key!r}: score() returned a value that is not a number: {out}")
        return None
