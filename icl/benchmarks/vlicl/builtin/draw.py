"""The drawing vocabulary of the built-in VL-ICL data: flat shapes in named colours on named
backgrounds, digits and words, drawn with OpenCV without antialiasing (every pixel is exactly one
palette colour, so a judge can read the picture back, see :mod:`icl.benchmarks.vlicl.judge`).

A shape of size ``s`` (odd) fills its ``s x s`` box: it touches all four sides, so the box of its
connected component gives back ``s`` and the template drawn there matches it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import cv2
import numpy as np

# Object colours (CLEVR's eight names) and background colours: disjoint, far apart in RGB.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30), "green": (30, 160, 50), "blue": (40, 70, 220), "yellow": (235, 205, 20),
    "purple": (130, 40, 170), "cyan": (20, 200, 210), "brown": (120, 70, 20), "gray": (90, 90, 90),
}
BACKGROUNDS: dict[str, tuple[int, int, int]] = {
    "white": (250, 250, 250), "sand": (230, 205, 150), "sky": (160, 205, 250),
    "grass": (160, 225, 140), "pink": (250, 190, 215), "lilac": (205, 185, 240),
}
PALETTE_NAMES: tuple[str, ...] = tuple(COLOURS) + tuple(f"{b} background" for b in BACKGROUNDS)
PALETTE = np.array(list(COLOURS.values()) + list(BACKGROUNDS.values()), dtype=np.uint8)
HIGHLIGHT = (255, 255, 255)  # the specular dot of "metal" CLEVR objects (I2T only)
INK = (15, 15, 15)

# Shape polygons in the unit square (they are stretched to touch all four sides).
_STAR = [(0.5 + 0.5 * np.sin(a) * (1.0 if i % 2 == 0 else 0.42), 0.5 - 0.5 * np.cos(a) * (1.0 if i % 2 == 0 else 0.42))
         for i, a in enumerate(np.arange(10) * np.pi / 5)]
_POLYGONS: dict[str, list[tuple[float, float]]] = {
    "triangle": [(0.5, 0.0), (1.0, 1.0), (0.0, 1.0)],
    "diamond": [(0.5, 0.0), (1.0, 0.5), (0.5, 1.0), (0.0, 0.5)],
    "star": _STAR,
    "arrow": [(0.0, 0.3), (0.55, 0.3), (0.55, 0.0), (1.0, 0.5), (0.55, 1.0), (0.55, 0.7), (0.0, 0.7)],
}
SHAPES: tuple[str, ...] = ("square", "disc", "triangle", "diamond", "cross", "ring", "star", "arrow")
PLURALS: dict[str, str] = {s: s + "s" for s in SHAPES} | {"cross": "crosses"}
NUMBER_WORDS: tuple[str, ...] = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _stretched(points: Sequence[tuple[float, float]], s: int) -> np.ndarray:
    p = np.array(points, dtype=np.float64)
    p = (p - p.min(0)) / (p.max(0) - p.min(0))
    return np.rint(p * (s - 1)).astype(np.int32)


@lru_cache(maxsize=1024)
def shape_mask(shape: str, s: int) -> np.ndarray:
    """bool ``[s, s]``: ``shape`` drawn in an ``s x s`` box (``s`` odd, >= 5), touching all four sides."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; shapes: {', '.join(SHAPES)}")
    if s < 5 or s % 2 == 0:
        raise ValueError(f"shape size must be odd and >= 5, got {s}")
    canvas = np.zeros((s, s), np.uint8)
    r = s // 2
    if shape == "square":
        canvas[:] = 1
    elif shape == "disc":
        cv2.circle(canvas, (r, r), r, 1, thickness=-1, lineType=cv2.LINE_8)
    elif shape == "ring":
        cv2.circle(canvas, (r, r), r, 1, thickness=-1, lineType=cv2.LINE_8)
        cv2.circle(canvas, (r, r), max(r // 2, 1), 0, thickness=-1, lineType=cv2.LINE_8)
    elif shape == "cross":
        w = max(s // 3, 1) | 1
        lo = (s - w) // 2
        canvas[lo:lo + w, :] = 1
        canvas[:, lo:lo + w] = 1
    else:
        cv2.fillPoly(canvas, [_stretched(_POLYGONS[shape], s)], 1, lineType=cv2.LINE_8)
    canvas.setflags(write=False)
    return canvas.astype(bool)


@dataclass(frozen=True)
class Obj:
    """One object: ``shape`` of odd size ``s`` with its top-left corner at ``(x, y)``."""

    shape: str
    colour: str
    x: int
    y: int
    s: int
    metal: bool = False


def blank(size: tuple[int, int], background: str) -> np.ndarray:
    """uint8 ``[h, w, 3]`` filled with the named background colour."""
    img = np.empty((size[0], size[1], 3), np.uint8)
    img[:] = BACKGROUNDS[background]
    return img


def draw_objects(img: np.ndarray, objects: Sequence[Obj]) -> np.ndarray:
    """Paint ``objects`` onto ``img`` in place (and return it)."""
    for o in objects:
        m = shape_mask(o.shape, o.s)
        img[o.y:o.y + o.s, o.x:o.x + o.s][m] = COLOURS[o.colour]
        if o.metal:
            c = o.s // 2
            cv2.circle(img, (o.x + c, o.y + c), max(o.s // 6, 1), HIGHLIGHT, thickness=-1, lineType=cv2.LINE_8)
    return img


def place(rng: np.random.Generator, size: tuple[int, int], sizes: Sequence[int], gap: int = 3,
          tries: int = 200) -> list[tuple[int, int]]:
    """Top-left corners for boxes of the given sizes, inside ``size`` and at least ``gap`` px
    apart (so objects never touch and each is one connected component)."""
    h, w = size
    taken: list[tuple[int, int, int]] = []
    for s in sizes:
        for _ in range(tries):
            x = int(rng.integers(1, w - s))
            y = int(rng.integers(1, h - s))
            if all(x + s + gap <= tx or tx + ts + gap <= x or y + s + gap <= ty or ty + ts + gap <= y
                   for tx, ty, ts in taken):
                taken.append((x, y, s))
                break
        else:
            raise ValueError(f"cannot place {len(sizes)} objects of sizes {list(sizes)} in {size}")
    return [(x, y) for x, y, _ in taken]


def put_text(img: np.ndarray, text: str, origin: tuple[int, int], scale: float, colour: tuple[int, int, int],
             thickness: int = 1) -> tuple[int, int, int, int]:
    """Draw ``text`` with its baseline-left at ``origin``; returns its box ``(x0, y0, x1, y1)``."""
    font = cv2.FONT_HERSHEY_SIMPLEX
    (tw, th), base = cv2.getTextSize(text, font, scale, thickness)
    cv2.putText(img, text, origin, font, scale, colour, thickness, lineType=cv2.LINE_8)
    return origin[0], origin[1] - th, origin[0] + tw, origin[1] + base


def text_size(text: str, scale: float, thickness: int = 1) -> tuple[int, int]:
    """``(width, height)`` of ``text`` including its descent."""
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    return tw, th + base


def describe(o: Obj) -> str:
    """``"red star"`` (I2T captions)."""
    return f"{o.colour} {o.shape}"
