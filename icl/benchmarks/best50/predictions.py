"""Predictions JSONL (one line per sample) -> scored records.

Each line needs ``class``, ``k`` and ``query_gt_boxes_pixel``, and the prediction as either
``pred_boxes_pixel`` (a list of ``[x0, y0, x1, y1]``; taken first when present) or the raw model
text under ``response`` (or ``text``), which also needs ``query_image_size`` ``[width, height]``
to turn grid coordinates into pixels. Text that holds no well-formed box (or is not a string)
gives no boxes. ``sample_id`` is optional; when a package is given, a line with a
``sample_id`` must name a sample of that package at its K with the same class and boxes.

:func:`load_predictions` keeps the first line of each ``(k, sample_id)`` and reports repeats
and, against a package, the samples without a prediction (:class:`Coverage`) as data, so a
report can warn; :func:`read_predictions` is the strict form that refuses repeats.
:class:`PredictionsLog` is the writer side: resume by appending only (earlier lines are never
rewritten; a line torn by a kill is cut off, and its sample asked again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from icl.benchmarks.best50._fields import FieldError, get_boxes, get_int, get_size, get_str, json_lines, show
from icl.benchmarks.best50.package import Package, format_problems
from icl.benchmarks.best50.parse import parse_boxes


class PredictionsError(ValueError):
    """A predictions file holds malformed lines; lists each with its line number."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        super().__init__(format_problems(f"{path}: {len(problems)} malformed line(s)", problems))
        self.problems = problems


@dataclass(frozen=True)
class Record:
    """One scored sample: ground truth ``gt`` and predictions ``pred``, float64 ``[N, 4]`` xyxy pixels."""

    k: int
    cls: str
    gt: np.ndarray = field(repr=False)
    pred: np.ndarray = field(repr=False)
    sample_id: Optional[str] = None
    line: int = 0


def record_from_line(obj: dict, line: int = 0, package: Optional[Package] = None) -> Record:
    """Validate one predictions line; raises :class:`FieldError` naming the field."""
    cls = get_str(obj, "class")
    k = get_int(obj, "k")
    gt = get_boxes(obj, "query_gt_boxes_pixel", positive=False)
    if "pred_boxes_pixel" in obj:
        pred = get_boxes(obj, "pred_boxes_pixel", positive=False)
    elif "response" in obj or "text" in obj:
        text = obj["response"] if "response" in obj else obj["text"]
        pred = parse_boxes(text, get_size(obj, "query_image_size"))
    else:
        raise FieldError("pred_boxes_pixel", "missing (give 'pred_boxes_pixel', or the model text under "
                                             "'response' or 'text')")
    sample_id = None
    if "sample_id" in obj:
        sample_id = get_str(obj, "sample_id")
        if package is not None:
            sample = package.find(k, sample_id)
            if sample is None:
                raise FieldError("sample_id", f"{sample_id!r} is not in the package at k={k}")
            if sample.cls != cls:
                raise FieldError("class", f"{cls!r}, but the package has {sample.cls!r} for {sample_id!r}")
            ref = sample.query_gt_boxes_pixel
            if ref.shape != gt.shape or not np.allclose(ref, gt, rtol=0.0, atol=1e-6):
                raise FieldError("query_gt_boxes_pixel", f"differs from the package's boxes for {sample_id!r}")
    return Record(k=k, cls=cls, gt=gt, pred=pred, sample_id=sample_id, line=line)


@dataclass
class Predictions:
    """A predictions file read leniently about repeats: ``records`` (the first line of each
    ``(k, sample_id)``, and every line without a ``sample_id``), ``repeats`` mapping a key to the
    line numbers of all its lines (first included) when there are several."""

    path: Path
    records: list[Record]
    repeats: dict[tuple[int, str], list[int]] = field(default_factory=dict)

    def coverage(self, package: Package, ks: Optional[Iterable[int]] = None) -> "Coverage":
        """Which samples of ``package`` (at ``ks``, default all) have a prediction."""
        return coverage(self, package, ks)


@dataclass(frozen=True)
class KCoverage:
    """Coverage at one K: ``expected`` package samples, ``covered`` with a prediction,
    ``missing`` ids (package order), ``repeated`` ids with their number of lines."""

    k: int
    expected: int
    covered: int
    missing: tuple[str, ...]
    repeated: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Coverage:
    """Per-K coverage of a package by a predictions file; ``unkeyed``: lines without a
    ``sample_id`` (cannot be matched to samples)."""

    by_k: tuple[KCoverage, ...]
    unkeyed: int = 0

    @property
    def complete(self) -> bool:
        """Every sample covered exactly once (no missing, no repeated)."""
        return all(not c.missing and not c.repeated for c in self.by_k)

    def to_json(self) -> dict[str, Any]:
        """``{"k": {"package", "scored", "missing", "repeated"}, ..., "unkeyed"}`` for results.json."""
        return {**{str(c.k): {"package": c.expected, "scored": c.covered, "missing": list(c.missing),
                              "repeated": dict(c.repeated)} for c in self.by_k},
                "unkeyed": self.unkeyed}

    def warnings(self, shown: int = 5) -> list[str]:
        """One line per K with missing or repeated samples (the first ``shown`` ids named)."""
        out = []
        for c in self.by_k:
            if c.missing:
                names = ", ".join(repr(x) for x in c.missing[:shown]) + (" ..." if len(c.missing) > shown else "")
                out.append(f"k={c.k}: {len(c.missing)} of {c.expected} samples have no prediction ({names})")
            if c.repeated:
                names = ", ".join(f"{x!r} x{n}" for x, n in c.repeated[:shown]) + (" ..." if len(c.repeated) > shown else "")
                out.append(f"k={c.k}: {len(c.repeated)} sample(s) predicted more than once, first line kept ({names})")
        return out


def coverage(predictions: Predictions, package: Package, ks: Optional[Iterable[int]] = None) -> Coverage:
    """Coverage of ``package`` at ``ks`` (default: every K of the package) by ``predictions``."""
    keyed = {(r.k, r.sample_id) for r in predictions.records if r.sample_id is not None}
    by_k = []
    for k in package.ks if ks is None else sorted(set(ks)):
        samples = package.samples.get(k, [])
        missing = tuple(s.sample_id for s in samples if (k, s.sample_id) not in keyed)
        repeated = tuple((sid, len(lines)) for (rk, sid), lines in predictions.repeats.items() if rk == k)
        by_k.append(KCoverage(k, len(samples), len(samples) - len(missing), missing, repeated))
    return Coverage(tuple(by_k), sum(r.sample_id is None for r in predictions.records))


def load_predictions(path: str | Path, package: Optional[Package] = None) -> Predictions:
    """Read a predictions file; raises :class:`PredictionsError` listing each malformed line
    (``FileNotFoundError`` when there is no file). Repeated samples are data, not errors."""
    return _read(Path(path), package, strict=False)


def read_predictions(path: str | Path, package: Optional[Package] = None) -> list[Record]:
    """Every record of a predictions file; raises :class:`PredictionsError` listing each bad
    line, a repeated ``(k, sample_id)`` included."""
    return _read(Path(path), package, strict=True).records


def _read(path: Path, package: Optional[Package], strict: bool) -> Predictions:
    if not path.is_file():
        raise FileNotFoundError(f"predictions file {path} does not exist")
    records: list[Record] = []
    problems: list[str] = []
    seen: dict[tuple[int, str], list[int]] = {}
    try:
        lines = list(json_lines(path))
    except OSError as exc:
        raise PredictionsError(path, [f"cannot be read ({exc.strerror or exc})"]) from None
    for line, obj, error in lines:
        if error:
            problems.append(f"line {line}: {error}")
            continue
        try:
            rec = record_from_line(obj, line, package)
        except FieldError as exc:
            problems.append(f"line {line}: {exc}")
            continue
        if rec.sample_id is not None:
            key = (rec.k, rec.sample_id)
            seen.setdefault(key, []).append(line)
            if len(seen[key]) > 1:
                if strict:
                    problems.append(f"line {line}: sample {show(rec.sample_id)} at k={rec.k} repeats line {seen[key][0]}")
                continue
        records.append(rec)
    if problems:
        raise PredictionsError(path, problems)
    if not records:
        raise PredictionsError(path, ["no predictions (the file is empty)"])
    return Predictions(path, records, {key: at for key, at in seen.items() if len(at) > 1})
