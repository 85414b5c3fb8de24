"""Typed access to the fields of one JSON line, with errors that name the field."""

from __future__ import annotations

import json
import math
import reprlib
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from icl._text import unicode_problem

_MESSAGE_LIMIT = 800
# values quoted in messages: bounded in depth and length, so a hostile value cannot blow up a message
_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxtuple, _SHOW.maxdict = 3, 6, 6, 6
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlong = 60, 60, 40


def show(value: Any) -> str:
    """A short, bounded ``repr`` of ``value`` for error messages."""
    try:
        return _SHOW.repr(value)
    except (ValueError, RecursionError):  # e.g. an int beyond Python's str-conversion limit
        return f"<{type(value).__name__}>"


class FieldError(ValueError):
    """A field of a JSON line is missing or has the wrong type or value."""

    def __init__(self, field: str, message: str) -> None:
        # "missing ..." reads "missing field 'name' ..."; anything else "field 'name': ..."
        if message.startswith("missing"):
            text = f"missing field {field!r}{message[len('missing'):]}"
        else:
            text = f"field {field!r}: {message}"
        if len(text) > _MESSAGE_LIMIT:
            text = text[:_MESSAGE_LIMIT] + " ..."
        super().__init__(text)
        self.field = field


def json_lines(path: Path) -> Iterator[tuple[int, Any, str]]:
    """``(line_number, object or None, error)`` for each non-blank line (numbered from 1).

    Never raises for the file's content: bytes that are not UTF-8, invalid JSON, JSON nested
    too deeply for the parser, integers beyond Python's digit limit and non-objects each give
    an error string for their line. ``OSError`` when the file cannot be read at all.
    """
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
                continue
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                # json's messages may end in " at" ("Invalid control character at"): say it once
                yield number, None, f"not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"
                continue
            except RecursionError:
                yield number, None, "not valid JSON here (nested too deeply)"
                continue
            except ValueError as exc:  # an integer literal beyond Python's digit limit
                yield number, None, f"not valid JSON here ({show(str(exc))})"
                continue
            if not isinstance(obj, dict):
                yield number, None, f"expected a JSON object, got {type(obj).__name__}"
                continue
            yield number, obj, ""


def _finite(v: Any) -> bool:
    """A JSON number (not a bool) that is finite as a float64."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


def _get(obj: dict, name: str) -> Any:
    if name not in obj:
        raise FieldError(name, "missing")
    return obj[name]


def get_str(obj: dict, name: str) -> str:
    """A non-empty string that is valid Unicode (JSON's ``\\ud800`` escapes can make lone surrogates)."""
    value = _get(obj, name)
    if not isinstance(value, str) or not value:
        raise FieldError(name, f"expected a non-empty string, got {show(value)}")
    bad = unicode_problem(value)
    if bad:
        raise FieldError(name, bad)
    return value


def get_int(obj: dict, name: str, minimum: int = 1) -> int:
    value = _get(obj, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FieldError(name, f"expected an integer >= {minimum}, got {show(value)}")
    return value


def get_size(obj: dict, name: str) -> tuple[int, int]:
    """``[width, height]``, two positive integers."""
    value = _get(obj, name)
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)):
        raise FieldError(name, f"expected [width, height] as two positive integers, got {show(value)}")
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
                or not all(_finite(v) for v in box)):
            raise FieldError(name, f"box {i}: expected four finite numbers [x0, y0, x1, y1], got {show(box)}")
        x0, y0, x1, y1 = box
        if (x1 <= x0 or y1 <= y0) if positive else (x1 < x0 or y1 < y0):
            rule = "x1 > x0 and y1 > y0" if positive else "x1 >= x0 and y1 >= y0"
            raise FieldError(name, f"box {i}: expected {rule}, got {show(box)}")
    return np.asarray(value, dtype=np.float64).reshape(-1, 4)
