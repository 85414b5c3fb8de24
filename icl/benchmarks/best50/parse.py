"""Boxes in model text (PROTOCOL §2): ``<bbox_start><xA><yB><xC><yD><bbox_end>`` on a 0-1024 grid.

A box is kept when ``0 <= A <= 1024``, ``0 <= B <= 1024``, ``C > A`` and ``D > B`` (the package's
rule: the upper bounds of C and D are not checked). Whitespace between the tokens of one box is
allowed; anything else (a missing, negative, fractional or extra token) makes that box malformed
and it is skipped. Grid to pixels: ``grid / 1024 * size`` (x with the width, y with the height),
in float64, not clipped to the image. Parsing never raises: text that is not a string, or holds
no well-formed box, gives no boxes.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Sequence

import numpy as np

GRID = 1024
_BOX = re.compile(r"<bbox_start>\s*<x([0-9]+)>\s*<y([0-9]+)>\s*<x([0-9]+)>\s*<y([0-9]+)>\s*<bbox_end>")


def parse_grid_boxes(text: Any) -> list[tuple[int, int, int, int]]:
    """Grid boxes ``(A, B, C, D)`` kept by the package's rule, in text order."""
    if not isinstance(text, str):
        return []
    boxes = []
    for match in _BOX.finditer(text):
        try:
            a, b, c, d = (int(g) for g in match.groups())
        except ValueError:  # a number longer than Python's int parsing limit: malformed
            continue
        if 0 <= a <= GRID and 0 <= b <= GRID and c > a and d > b:
            boxes.append((a, b, c, d))
    return boxes


def grid_to_pixels(boxes: Iterable[Sequence[int]], size: Sequence[int]) -> np.ndarray:
    """Grid boxes -> float64 ``[N, 4]`` pixel xyxy for an image of ``size = (width, height)``.

    Boxes whose pixel coordinates are not finite in float64 (grid numbers beyond ~1e305) are
    dropped, since no IoU can be computed for them.
    """
    w, h = float(size[0]), float(size[1])
    out = []
    for a, b, c, d in boxes:
        try:
            px = (a / GRID * w, b / GRID * h, c / GRID * w, d / GRID * h)
        except OverflowError:
            continue
        if all(math.isfinite(v) for v in px):
            out.append(px)
    return np.asarray(out, dtype=np.float64).reshape(-1, 4)


def parse_boxes(text: Any, size: Sequence[int]) -> np.ndarray:
    """Model text -> float64 ``[N, 4]`` pixel boxes for an image of ``size = (width, height)``."""
    return grid_to_pixels(parse_grid_boxes(text), size)


def pixels_to_grid(boxes: Iterable[Sequence[float]], size: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Pixel xyxy -> grid boxes, ``round(pixel / size * 1024)`` clipped to [0, 1024]."""
    w, h = float(size[0]), float(size[1])
    out = []
    for x0, y0, x1, y1 in boxes:
        g = [min(GRID, max(0, int(round(v / s * GRID)))) for v, s in ((x0, w), (y0, h), (x1, w), (y1, h))]
        out.append((g[0], g[1], g[2], g[3]))
    return out


def format_box(box: Sequence[int]) -> str:
    """One grid box as the package's token string."""
    a, b, c, d = (int(v) for v in box)
    return f"<bbox_start><x{a}><y{b}><x{c}><y{d}><bbox_end>"


def format_boxes(boxes: Iterable[Sequence[int]]) -> str:
    """Grid boxes as one answer string (tokens back to back)."""
    return "".join(format_box(b) for b in boxes)
