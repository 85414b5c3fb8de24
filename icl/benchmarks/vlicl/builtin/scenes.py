"""Scene descriptions of the built-in data: plain data, rendered on demand (an episode only
draws the images it shows) and captioned for the text-only variants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from icl.benchmarks.vlicl.builtin.draw import INK, Obj, blank, describe, draw_objects, put_text, text_size

RED_BOX = (255, 0, 0)


@dataclass(frozen=True)
class ObjectScene:
    """Objects on a flat background; ``clevr`` captions enumerate every attribute."""

    size: tuple[int, int]
    background: str
    objects: tuple[Obj, ...]
    clevr: bool = False

    def render(self) -> np.ndarray:
        return draw_objects(blank(self.size, self.background), self.objects)

    def caption(self) -> str:
        if self.clevr:
            return "Objects: " + ", ".join(clevr_words(o) for o in self.objects) + "."
        things = ", ".join(describe(o) for o in self.objects)
        return f"An image of {things} on a {self.background} background."


def clevr_words(o: Obj) -> str:
    """``"large red metal cube"``: a CLEVR-like object in CLEVR's attribute words."""
    return f"{clevr_size(o)} {o.colour} {'metal' if o.metal else 'rubber'} {CLEVR_SHAPES[o.shape]}"


CLEVR_SHAPES = {"square": "cube", "disc": "sphere", "triangle": "cylinder"}
SMALL, LARGE = 11, 21


def clevr_size(o: Obj) -> str:
    return "small" if o.s == SMALL else "large"


@dataclass(frozen=True)
class TextScene:
    """Text on a white canvas: an expression (``"3 ? 7"``) or one digit."""

    size: tuple[int, int]
    text: str
    scale: float = 1.2

    def render(self) -> np.ndarray:
        img = blank(self.size, "white")
        tw, th = text_size(self.text, self.scale, 2)
        put_text(img, self.text, ((self.size[1] - tw) // 2, (self.size[0] + th) // 2 - 2), self.scale, INK, 2)
        return img

    def caption(self) -> str:
        return self.text


@dataclass(frozen=True)
class WordsScene:
    """Words at given baseline positions; the ``boxed`` one framed by a 2 px red rectangle."""

    size: tuple[int, int]
    words: tuple[str, ...]
    origins: tuple[tuple[int, int], ...]
    boxed: int
    scale: float = 0.5

    def render(self) -> np.ndarray:
        img = blank(self.size, "white")
        for i, (word, origin) in enumerate(zip(self.words, self.origins)):
            x0, y0, x1, y1 = put_text(img, word, origin, self.scale, INK)
            if i == self.boxed:
                cv2.rectangle(img, (x0 - 3, y0 - 3), (x1 + 2, y1 + 2), RED_BOX, 2, lineType=cv2.LINE_8)
        return img

    def caption(self) -> str:
        return " ".join(f"[{w}]" if i == self.boxed else w for i, w in enumerate(self.words))



def words_layout(rng: np.random.Generator, size: tuple[int, int], words: Sequence[str],
                 scale: float) -> tuple[tuple[int, int], ...]:
    """One word per text row (rows 4 px apart, shuffled), each at a random x that fits."""
    h, w = size
    row_h = text_size("Hg", scale)[1] + 8
    rows = rng.permutation(max((h - 6) // row_h, len(words)))[:len(words)]
    out = []
    for word, row in zip(words, rows):
        tw = text_size(word, scale)[0]
        x = int(rng.integers(4, max(w - tw - 4, 5)))
        out.append((x, int(6 + row * row_h + row_h - 6)))
    return tuple(out)
