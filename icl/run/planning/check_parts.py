"""What the check, its parts (cost, context) and the run's set-up share: a problem with its fix, the
text of a duration and of a table, the scope in which Hub references resolve from the cache only,
and the line and fix of a package a model's files need."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence


UNKNOWN_COST = "unknown (no stored compute; run once or --calibrate N)"


@dataclass
class Problem:
    """One thing that stops the run: which check found it, where, what, the fix, and what it is
    when its fix depends on that (``kind``: one of :data:`KINDS`, "" otherwise)."""

    check: str
    where: str
    message: str
    fix: str
    kind: str = ""


#: a problem a planning step found: where, the one line, and the error that said it (None: the
#: step said it itself)
Found = tuple[str, str, Optional[BaseException]]

# What a problem is, where its fix depends on it: decided where the problem is caught, from the
# type of the error that said it (kind_of), never read back from the message (a model whose path
# contains "not in the Hugging Face cache" is not a download).
NEEDS_DOWNLOAD = "needs download"  # icl.models.hub.HubNotCached
CACHE_DAMAGED = "damaged in the cache"  # icl.models.hub.HubCacheDamaged
CHECKPOINT_DAMAGED = "damaged checkpoint"  # icl.models.errors.CheckpointDamaged
CHECKPOINT_REFUSED = "refused checkpoint"  # icl.models.errors.CheckpointRefused
MISSING_PACKAGE = "missing package"  # an ImportError naming a package (missing_package)
CANNOT_SERVE = "cannot serve"  # icl.run.errors.CannotServe
KINDS = (NEEDS_DOWNLOAD, CACHE_DAMAGED, CHECKPOINT_DAMAGED, CHECKPOINT_REFUSED, MISSING_PACKAGE, CANNOT_SERVE)


def kind_of(cause: Optional[BaseException]) -> str:
    """What the error ``cause`` says the problem is (:data:`KINDS`; "" for none of them),
    following the errors it wraps (:attr:`icl.run.errors.ConfigError.cause`)."""
    from icl.models.errors import CheckpointDamaged, CheckpointRefused
    from icl.models.hub import HubCacheDamaged, HubNotCached
    from icl.run.errors import CannotServe

    types = ((HubNotCached, NEEDS_DOWNLOAD), (HubCacheDamaged, CACHE_DAMAGED), (CheckpointDamaged, CHECKPOINT_DAMAGED),
             (CheckpointRefused, CHECKPOINT_REFUSED), (CannotServe, CANNOT_SERVE))
    while cause is not None:
        for error, kind in types:
            if isinstance(cause, error):
                return kind
        if isinstance(cause, ImportError) and missing_package(cause):
            return MISSING_PACKAGE
        cause = getattr(cause, "cause", None)
    return ""


def package_of(cause: Optional[BaseException]) -> Optional[str]:
    """The package a missing-package problem needs (the ImportError ``cause`` is or wraps)."""
    while cause is not None:
        if isinstance(cause, ImportError):
            return missing_package(cause)
        cause = getattr(cause, "cause", None)
    return None


@contextmanager
def hub_offline() -> Iterator[None]:
    """Hub references resolve from the Hugging Face cache only: a check never downloads (a
    reference not cached says so; under the user's own HF_HUB_OFFLINE it names that)."""
    from icl.models import hub

    before = os.environ.get("HF_HUB_OFFLINE")
    scope = hub.cache_only("--check never downloads") if not hub.offline() else nullcontext()
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        with scope:
            yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before


def duration_text(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def text_table(rows: Sequence[tuple[str, ...]], right: tuple[int, ...]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
            .rstrip() for r in rows]


def missing_package(exc: BaseException) -> Optional[str]:
    """The package whose absence ``exc`` (an ImportError) reports: its module's top name, or the
    library transformers names (``X requires the Torchvision library but it was not found``)."""
    name = getattr(exc, "name", None)
    if name:
        return str(name).split(".")[0]
    found = re.search(r"requires the ([\w.-]+) library", str(exc))
    return found.group(1).lower() if found else None


def missing_package_message(exc: BaseException) -> str:
    """One line for an ImportError met while reading a model's files: the package it needs."""
    package = missing_package(exc)
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    if package is None:
        return f"cannot be read: {first}"
    return f"needs the package {package}, which is not installed ({first})"


def package_fix(package: str) -> str:
    """How to install ``package``: the extra that carries it (:data:`icl._lazy.EXTRAS`, in both
    locks), else the package itself, saying no lock carries it."""
    from icl._lazy import EXTRAS

    extra = EXTRAS.get(package)
    if extra:
        return (f'install the package {package}: pip install "icl-eval[{extra}]" (requirements/lock.txt and, on a GPU '
                f"node, requirements/lock-gpu.txt carry it; docs/install.md)")
    if package == "torchvision":
        from importlib.metadata import PackageNotFoundError, version

        try:
            torch = f"torch {version('torch')}"
        except PackageNotFoundError:
            torch = "the installed torch"
        return (f"install the package torchvision, the release built for {torch}, from the index that torch came from "
                f"(neither requirements/lock.txt nor requirements/lock-gpu.txt carries it: docs/install.md), or use a "
                f"model whose processor needs no torchvision (an hf-vlm LLaVA, Idefics3 or Gemma 3)")
    return (f"install the package {package} (pip install {package}); neither requirements/lock.txt nor "
            f"requirements/lock-gpu.txt carries it (docs/install.md)")
