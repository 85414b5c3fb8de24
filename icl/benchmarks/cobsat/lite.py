"""CoBSAT-lite: built-in procedural images for ``--fast`` and tests, and how to read them back.

Each image shows one object of a theme in one attribute, drawn as a symbolic code a judge can
decode exactly (these are not pictures of hats or tigers, and no score on them says anything about
the real benchmark):

- the object (or animal): one of ten 5 x 5 glyphs, each cell a ``CELL`` x ``CELL`` block, at a
  fixed place in a ``SIZE`` x ``SIZE`` canvas;
- colour: the glyph's fill colour, on grey; background: the canvas colour, the glyph magenta;
- texture and style: the glyph filled with one of ten ink-on-paper patterns (laid on the canvas'
  own coordinates), on white; the two themes share the patterns (a question names the theme).

Actions cannot be drawn this way: the action tasks are not part of CoBSAT-lite.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

import numpy as np

from icl.benchmarks.cobsat.vocab import THEMES, VOCAB, Theme, display, undisplay

SIZE = 48
CELL = 6
ORIGIN = (SIZE - 5 * CELL) // 2
MAX_COLOUR_DISTANCE = 40.0
MIN_PATTERN_AGREEMENT = 0.95

_GLYPHS = (
    (".###.", "#####", "#####", ".###.", "..#.."),
    ("..#..", ".###.", "#####", "..#..", "..#.."),
    ("#...#", "#...#", "#####", "#...#", "#...#"),
    ("#####", "#....", "###..", "#....", "#####"),
    ("#...#", ".#.#.", "..#..", ".#.#.", "#...#"),
    ("#####", "#...#", "#...#", "#...#", "#####"),
    ("#....", "#....", "#....", "#....", "#####"),
    ("..#..", "..#..", "#####", "..#..", "..#.."),
    ("####.", "#...#", "####.", "#...#", "####."),
    ("#.#.#", ".#.#.", "#.#.#", ".#.#.", "#.#.#"),
)
GLYPHS = np.array([[[c == "#" for c in row] for row in g] for g in _GLYPHS], dtype=bool)  # [10, 5, 5]

COLOURS = np.array([(240, 210, 30), (250, 250, 250), (210, 30, 30), (120, 40, 160), (245, 150, 190),
                    (245, 140, 20), (40, 160, 60), (120, 70, 30), (40, 80, 220), (15, 15, 15)], np.uint8)
BACKGROUNDS = np.array([(240, 225, 180), (220, 170, 90), (190, 230, 245), (150, 30, 20), (90, 180, 70),
                        (170, 120, 70), (70, 140, 220), (10, 10, 40), (90, 80, 70), (20, 70, 110)], np.uint8)
GREY, MAGENTA, WHITE = (128, 128, 128), (255, 0, 255), (250, 250, 250)
INK, PAPER = (30, 30, 30), (245, 215, 140)


def _patterns() -> np.ndarray:
    y, x = np.mgrid[:SIZE, :SIZE]
    return np.stack([y % 4 < 2, x % 4 < 2, (y // 2 + x // 2) % 2 == 0, (x + y) % 4 < 2, (x - y) % 4 < 2,
                     (y % 3 == 0) | (x % 3 == 0), (y % 3 == 1) & (x % 3 == 1), np.zeros_like(y, bool),
                     np.ones_like(y, bool), y % 6 < 3])


PATTERNS = _patterns()  # [10, SIZE, SIZE] bool: where the ink goes


def glyph_mask(index: int) -> np.ndarray:
    """bool ``[SIZE, SIZE]``: where glyph ``index`` lies."""
    mask = np.zeros((SIZE, SIZE), bool)
    mask[ORIGIN:ORIGIN + 5 * CELL, ORIGIN:ORIGIN + 5 * CELL] = np.kron(GLYPHS[index], np.ones((CELL, CELL), bool))
    return mask


@lru_cache(maxsize=512)
def _draw(theme: str, attribute: int, obj: int) -> np.ndarray:
    mask = glyph_mask(obj)
    img = np.empty((SIZE, SIZE, 3), np.uint8)
    if theme == "color_object":
        img[:] = GREY
        img[mask] = COLOURS[attribute]
    elif theme == "background_animal":
        img[:] = BACKGROUNDS[attribute]
        img[mask] = MAGENTA
    elif theme in ("texture_object", "style_object"):
        img[:] = WHITE
        ink = PATTERNS[attribute]
        img[mask & ink] = INK
        img[mask & ~ink] = PAPER
    else:
        raise ValueError(f"cobsat-lite cannot draw theme {theme!r} (drawable: "
                         f"{', '.join(t.name for t in THEMES.values() if t.drawable)})")
    img.flags.writeable = False
    return img


def draw(theme: Theme | str, attribute: str, obj: str) -> np.ndarray:
    """The lite image (uint8 ``[SIZE, SIZE, 3]``, read-only) of ``obj`` in ``attribute``."""
    t = THEMES[theme] if isinstance(theme, str) else theme
    return _draw(t.name, VOCAB[t.attribute].index(attribute), VOCAB[t.object].index(obj))


def caption(theme: Theme | str, attribute: str, obj: str) -> str:
    """The lite caption of an image (the caption variant's text-only demonstrations)."""
    t = THEMES[theme] if isinstance(theme, str) else theme
    a = display(attribute)
    if t.attribute == "background":
        return f"a {obj} in the {a}"
    if t.attribute == "style":
        return f"a {obj} in {a} style"
    return f"a {a} {obj}"


def _nearest(colour: np.ndarray, palette: np.ndarray) -> Optional[int]:
    d = np.linalg.norm(palette.astype(np.float64) - colour.astype(np.float64), axis=1)
    k = int(d.argmin())
    return k if d[k] <= MAX_COLOUR_DISTANCE else None


def _background(img: np.ndarray) -> np.ndarray:
    border = np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]])
    colours, counts = np.unique(border, axis=0, return_counts=True)
    return colours[counts.argmax()]


def read_object(img: np.ndarray) -> Optional[int]:
    """The glyph index of a lite image, None when it shows none."""
    if not _readable(img):
        return None
    bg = _background(img).astype(np.float64)
    centres = ORIGIN + CELL * np.arange(5) + CELL // 2
    cells = img[np.ix_(centres, centres)].astype(np.float64)
    on = np.linalg.norm(cells - bg, axis=-1) > MAX_COLOUR_DISTANCE
    hits = np.flatnonzero((GLYPHS == on).all(axis=(1, 2)))
    return int(hits[0]) if len(hits) else None


def read_attribute(img: np.ndarray, space: str) -> Optional[int]:
    """The attribute index (in ``space``: color, background, texture or style) of a lite image."""
    obj = read_object(img)
    if obj is None:
        return None
    mask = glyph_mask(obj)
    if space == "background":
        return _nearest(_background(img), BACKGROUNDS)
    if space == "color":
        colours, counts = np.unique(img[mask], axis=0, return_counts=True)
        return _nearest(colours[counts.argmax()], COLOURS)
    if space in ("texture", "style"):
        px = img[mask].astype(np.float64)
        ink = np.linalg.norm(px - INK, axis=1) < np.linalg.norm(px - PAPER, axis=1)
        agreement = (PATTERNS[:, mask] == ink).mean(axis=1)
        k = int(agreement.argmax())
        return k if agreement[k] >= MIN_PATTERN_AGREEMENT else None
    return None


def _readable(img: object) -> bool:
    return (isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.ndim == 3 and img.shape == (SIZE, SIZE, 3))


def _spaces(img: np.ndarray) -> tuple[str, ...]:
    """The vocabulary spaces a lite drawing can answer, told by its canvas (grey: colour; white:
    texture and style, which share their patterns; else a background with an animal)."""
    canvas = tuple(int(v) for v in _background(img))
    if canvas == GREY:
        return ("object", "color")
    if canvas == WHITE:
        return ("object", "texture", "style")
    return ("animal", "background")


def shows(img: object, concept: str) -> Optional[bool]:
    """Whether the lite drawing ``img`` shows ``concept`` — a value as printed (``red``, ``leaf``,
    ``wireframe``) or ``"{background} background"`` — or None when ``img`` is no lite drawing."""
    obj = read_object(img)  # type: ignore[arg-type]
    if obj is None:
        return None
    assert isinstance(img, np.ndarray)
    text = concept.strip().lower()
    spaces = _spaces(img)
    asked: tuple[str, ...]
    if text.endswith(" background"):
        value, asked = undisplay(text[:-len(" background")]), ("background",)
    else:
        value, asked = undisplay(text), tuple(s for s in VOCAB if s != "background")
    for space in asked:
        if space in spaces and value in VOCAB[space]:
            index = VOCAB[space].index(value)
            return (obj if space in ("object", "animal") else read_attribute(img, space)) == index
    return False
