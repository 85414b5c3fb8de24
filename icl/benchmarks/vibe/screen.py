"""Plan-time screening of samples: which can serve a task (PROTOCOL: "the dataset filter
removes such samples"), which cannot be read at all.

Every candidate sample is loaded with the annotation parts of the tasks that still need it
and passed to each task's ``check_sample``. A sample a task rejects is *filtered* (reason
kept for results.json); a sample that cannot be loaded is a data *issue*: recorded as a run
failure naming the file and sample, and left out of that task's queries and contexts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence


@dataclass(frozen=True)
class DataIssue:
    """A sample that could not be loaded for ``tasks``."""

    dataset: str
    sample_id: str
    tasks: tuple[str, ...]
    path: Optional[str]
    message: str


@dataclass
class Screened:
    """Per task: usable ids (input order) and filtered ids with the task's reason."""

    usable: dict[str, list[str]] = field(default_factory=dict)
    filtered: dict[str, dict[str, str]] = field(default_factory=dict)
    issues: list[DataIssue] = field(default_factory=list)


def _load_error(ds: Any, sample_id: str, parts: Sequence[str]) -> Optional[Exception]:
    from icl.data import DataError

    try:
        ds.load(sample_id, parts=parts)
    except DataError as exc:
        return exc
    return None


def screen(ds: Any, tasks: Sequence[Any], ids: Sequence[str], need: Optional[int] = None) -> Screened:
    """Screen ``ids`` (in order) for every task in ``tasks``; stop early once each task has
    ``need`` usable ids (None: screen all)."""
    from icl.data import DataError

    out = Screened({t.name: [] for t in tasks}, {t.name: {} for t in tasks})
    for sid in ids:
        wanted = [t for t in tasks if need is None or len(out.usable[t.name]) < need]
        if not wanted:
            break
        parts = tuple(dict.fromkeys(p for t in wanted for p in t.parts))
        try:
            sample = ds.load(sid, parts=parts)
        except DataError as exc:
            _split_failure(ds, sid, wanted, exc, out)
            continue
        for t in wanted:
            reason = t.check_sample(sample, ds.meta)
            if reason is None:
                out.usable[t.name].append(sid)
            else:
                out.filtered[t.name][sid] = reason
    return out


def _split_failure(ds: Any, sid: str, wanted: Sequence[Any], exc: Exception, out: Screened) -> None:
    """A load of several tasks' parts failed: find which tasks the sample still serves."""
    by_message: dict[str, tuple[list[str], Optional[str]]] = {}
    for t in wanted:
        err = exc if len(wanted) == 1 else _load_error(ds, sid, t.parts)
        if err is None:
            sample = ds.load(sid, parts=t.parts)
            reason = t.check_sample(sample, ds.meta)
            if reason is None:
                out.usable[t.name].append(sid)
            else:
                out.filtered[t.name][sid] = reason
            continue
        names, _ = by_message.setdefault(str(err), ([], getattr(err, "path", None)))
        names.append(t.name)
    for message, (names, path) in by_message.items():
        out.issues.append(DataIssue(ds.meta.name, sid, tuple(names), path, message))
