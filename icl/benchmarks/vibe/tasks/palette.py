"""Segmentation colours (PROTOCOL §1.2): the ADE20K palette in "spread" order.

Pool: the 150 ADE20K colours (mmseg order) with repeated colours kept only at their first
position ([140, 140, 140] is the one repeat). Order: the darkest colour by CIE L* first, then
repeatedly the pool colour whose minimum Euclidean RGB distance to the chosen ones is
largest, ties to the lower pool index. Class ``c`` gets colour ``c`` of that order.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import numpy as np

PALETTE_FILE = "ade20k_palette.json"


def ade20k_palette() -> np.ndarray:
    """The 150 ADE20K colours, uint8 [150, 3], from the copy shipped in ``icl/data``."""
    raw = json.loads(resources.files("icl.data").joinpath(PALETTE_FILE).read_text(encoding="utf-8"))
    pal = np.asarray(raw["palette"], dtype=np.int64)
    if pal.shape != (150, 3) or pal.min() < 0 or pal.max() > 255:
        raise ValueError(f"{PALETTE_FILE}: expected 150 RGB colours, got shape {pal.shape}")
    return pal.astype(np.uint8)


def lightness(rgb: np.ndarray) -> np.ndarray:
    """CIE L* (D65) of sRGB uint8 colours [..., 3]."""
    c = rgb.astype(np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    y = lin @ np.array([0.2126, 0.7152, 0.0722])
    return np.where(y > (6 / 29) ** 3, 116.0 * np.cbrt(y) - 16.0, y * (29 / 3) ** 3)


def spread_order(palette: np.ndarray) -> np.ndarray:
    """Farthest-point order of the de-duplicated pool, uint8 [P, 3] (see module docstring)."""
    seen: set[tuple[int, ...]] = set()
    pool = []
    for colour in palette.astype(np.int64):
        key = tuple(int(v) for v in colour)
        if key not in seen:
            seen.add(key)
            pool.append(colour)
    pts = np.stack(pool)
    first = int(np.argmin(lightness(pts)))  # argmin/argmax return the lowest index on ties
    order = [first]
    mind = ((pts - pts[first]) ** 2).sum(axis=1)  # exact integer squared distances
    mind[first] = -1
    for _ in range(len(pts) - 1):
        nxt = int(np.argmax(mind))
        order.append(nxt)
        mind = np.minimum(mind, ((pts - pts[nxt]) ** 2).sum(axis=1))
        mind[order] = -1
    return pts[order].astype(np.uint8)


@lru_cache(maxsize=1)
def _spread() -> np.ndarray:
    out = spread_order(ade20k_palette())
    out.setflags(write=False)
    return out


def max_classes() -> int:
    """How many classes the spread palette can colour (149)."""
    return len(_spread())


def class_colours(num_classes: int) -> np.ndarray:
    """uint8 [num_classes, 3]: the colour of each class id."""
    spread = _spread()
    if not 1 <= num_classes <= len(spread):
        raise ValueError(f"num_classes: expected 1..{len(spread)} (the spread ADE20K palette), got {num_classes}")
    return spread[:num_classes].copy()
