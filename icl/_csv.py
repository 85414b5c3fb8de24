"""The one table writer: CSV cells and tables for every file icl writes (results, frozen lists,
prompts). Text that a spreadsheet would run as a formula is guarded. A leaf module (numpy
alone), so the data and store layers write CSV the way the report does without importing it;
``icl.report.tables`` re-exports these names."""

from __future__ import annotations

import csv
import io
import math
from pathlib import PurePath
from typing import Any, Mapping, Optional, Sequence

import numpy as np


#: first characters that make a spreadsheet read a text cell as a formula ("CSV injection")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def plain(v: Any) -> Any:
    """``v`` with numpy scalars and 0-d arrays as Python numbers (``np.float64(0.5)`` -> ``0.5``),
    other arrays as lists, paths as text; anything else unchanged."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.item() if v.ndim == 0 else v.tolist()
    if isinstance(v, PurePath):
        return str(v)
    return v


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def csv_cell(v: Any) -> str:
    """One table cell: empty for None, floats in ``repr`` form (every bit kept, so equal results
    give byte-identical files; NaN as ``nan``), numpy scalars as Python numbers, lists joined by
    spaces. Text that a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return) gets a leading ``'``; numbers never do (``-0.5`` stays)."""
    v = plain(v)
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        parts = [plain(x) for x in v]
        text = " ".join(_text(x) for x in parts)
        return text if parts and _is_number(parts[0]) else _guard(text)
    return _text(v) if _is_number(v) else _guard(_text(v))


def _text(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return str(v)


def _guard(text: str) -> str:
    return "'" + text if text.startswith(FORMULA_START) else text


def csv_text(rows: Sequence[Any], columns: Optional[Sequence[str]] = None) -> str:
    """The one table writer: CSV of ``rows``, every cell through :func:`csv_cell`.

    Rows are mappings (columns: ``columns``, else every key in order of first appearance; the
    header is always written) or sequences (``columns`` is the header row, none when None)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if rows and not isinstance(rows[0], Mapping):
        if columns is not None:
            w.writerow([csv_cell(c) for c in columns])
        w.writerows([csv_cell(v) for v in r] for r in rows)
        return buf.getvalue()
    cols = list(columns) if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
    w.writerow([csv_cell(c) for c in cols])
    for r in rows:
        w.writerow([csv_cell(r.get(c)) for c in cols])
    return buf.getvalue()
