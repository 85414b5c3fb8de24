"""What the check and its parts (cost, context) share: a problem with its fix, the text of a
duration and of a table, and the scope in which Hub references resolve from the cache only."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence


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
