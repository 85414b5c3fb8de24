"""Typed access to the fields of one JSON line, with errors that name the field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from icl.benchmarks.best50.parse import GRID, parse_grid_boxes


class FieldError(ValueError):
    """A field of a JSON line is missing or has the wrong type or value."""

    def __init__(self, field: str, message: str) -> None:
        # "missing ..." reads "missing field 'name' ..."; anything else "field 'name': ..."
        if message.startswith("missing"):
            text = f"missing field {field!r}{message[len('missing'):]}"
        else:
            text = f"field {field!r}: {message}"
        super().__init__(text)
        self.field = field


def json_lines(path: Path) -> Iterator[tuple[int, Any, str]]:
    """``(line_number, object or None, error)`` for each non-blank line (numbered from 1)."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                # json's messages may end in " at" ("Invalid control character at"): say it once
                yield number, None, f"not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"
                continue
            if not isinstance(obj, dict):
                yield number, None, f"expected a JSON object, got {type(obj).__name__}"
                continue
            yield number, obj, ""


def _get(obj: dict, name: str) -> Any:
    if name not in obj:
        raise FieldError(name, "missing")
    return obj[name]


def get_str(obj: dict, name: str) -> str:
    value = _get(obj, name)
    if not isinstance(value, str) or not value:
        raise FieldError(name, f"expected a non-empty string, got {value!r:.80}")
    return value


def get_text(obj: dict, name: str) -> str:
    """A string that may be empty."""
    value = _get(obj, name)
    if not isinstance(value, str):
        raise FieldError(name, f"expected a string, got {type(value).__name__}")
    return value


def get_int(obj: dict, name: str, minimum: int = 1) -> int:
    value = _get(obj, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FieldError(name, f"expected an integer >= {minimum}, got {value!r:.80}")
    return value


def get_size(obj: dict, name: str) -> tuple[int, int]:
    """``[width, height]``, two positive integers."""
    value = _get(obj, name)
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)):
        raise FieldError(name, f"expected [width, height] as two positive integers, got {value!r:.80}")
    return int(value[0]), int(value[1])


def get_boxes(obj: dict, name: str, *, positive: bool) -> np.ndarray:
    """A list of ``[x0, y0, x1, y1]`` finite numbers -> float64 ``[N, 4]``.

    ``positive``: require x1 > x0 and y1 > y0 (else x1 >= x0 and y1 >= y0).
    """
    value = _get(obj, name)
    if not isinstance(value, list):
        raise FieldError(name, f"expected a list of [x0, y0, x1, y1] boxes, got {type(value).__name__}")
    for i, box in enumerate(value):
        if (not isinstance(box, (list, tuple)) or len(box) != 4
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in box)):
            raise FieldError(name, f"box {i}: expected four finite numbers [x0, y0, x1, y1], got {box!r:.80}")
        x0, y0, x1, y1 = box
        if (x1 <= x0 or y1 <= y0) if positive else (x1 < x0 or y1 < y0):
            rule = "x1 > x0 and y1 > y0" if positive else "x1 >= x0 and y1 >= y0"
            raise FieldError(name, f"box {i}: expected {rule}, got {box}")
    return np.asarray(value, dtype=np.float64).reshape(-1, 4)


def get_token_boxes(obj: dict, name: str) -> list[tuple[int, int, int, int]]:
    """Grid boxes, each a ``<bbox_start>...<bbox_end>`` string or a list of four integers.

    Each must satisfy the parsing rule and also ``C, D <= 1024`` (annotations lie on the grid).
    """
    value = _get(obj, name)
    if not isinstance(value, list):
        raise FieldError(name, f"expected a list of token boxes, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            boxes = parse_grid_boxes(item)
            if len(boxes) != 1 or not item.strip().startswith("<bbox_start>") or not item.strip().endswith("<bbox_end>"):
                raise FieldError(name, f"box {i}: expected one <bbox_start><xA><yB><xC><yD><bbox_end>, got {item!r:.80}")
            box = boxes[0]
        elif isinstance(item, list) and len(item) == 4 and all(isinstance(v, int) and not isinstance(v, bool) for v in item):
            box = (item[0], item[1], item[2], item[3])
        else:
            raise FieldError(name, f"box {i}: expected a token string or four integers, got {item!r:.80}")
        a, b, c, d = box
        if not (0 <= a < c <= GRID and 0 <= b < d <= GRID):
            raise FieldError(name, f"box {i}: expected 0 <= A < C <= {GRID} and 0 <= B < D <= {GRID}, got {list(box)}")
        out.append(box)
    return out
