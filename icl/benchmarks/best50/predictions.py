"""Predictions JSONL (one line per sample) -> scored records.

Each line needs ``class``, ``k`` and ``query_gt_boxes_pixel``, and the prediction as either
``pred_boxes_pixel`` (a list of ``[x0, y0, x1, y1]``; taken first when present) or the raw model
text under ``response`` (or ``text``), which also needs ``query_image_size`` ``[width, height]``
to turn grid coordinates into pixels. Text that holds no well-formed box (or is not a string)
gives no boxes. ``sample_id`` is optional; when a package is given, a line with a
``sample_id`` must name a sample of that package at its K with the same class and boxes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from icl.benchmarks.best50._fields import FieldError, get_boxes, get_int, get_size, get_str, json_lines
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


def read_predictions(path: str | Path, package: Optional[Package] = None) -> list[Record]:
    """Every record of a predictions file; raises :class:`PredictionsError` listing each bad line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"predictions file {path} does not exist")
    records: list[Record] = []
    problems: list[str] = []
    seen: dict[tuple[int, str], int] = {}
    for line, obj, error in json_lines(path):
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
            if key in seen:
                problems.append(f"line {line}: sample {rec.sample_id!r} at k={rec.k} repeats line {seen[key]}")
                continue
            seen[key] = line
        records.append(rec)
    if problems:
        raise PredictionsError(path, problems)
    if not records:
        raise PredictionsError(path, ["no predictions (the file is empty)"])
    return records
