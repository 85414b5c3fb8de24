"""What the check, its parts (cost, context) and the run's set-up share: a problem with its fix, the
text of a duration and of a table, the scope in which Hub references resolve from the cache only,
and the line and fix of a package a model's files need."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence


UNKNOWN_COST = "unknown (no stored compute; run once or --calibrate N)"


@dataclass
class Problem:
    """One thing that stops the run: which check found it, where, what, and the fix."""

    check: str
    where: str
    message: str
    fix: str


@contextmanager
def hub_offline() -> Iterator[None]:
    """Hub references resolve from the Hugging Face cache only: a check never downloads."""
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
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
