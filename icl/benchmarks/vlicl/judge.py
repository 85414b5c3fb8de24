"""``vlicl-judge``: a deterministic judge for the built-in text-to-image tasks.

It serves the judge's :class:`~icl.models.requests.ChatRequest` (an image and "Decide whether the
image contains the following concept: {concept}. ...", or the reference code's open_t2i_mi
question "Decide whether the image contains {concept}. ...") by reading the picture back the way the
built-in generators draw it: every pixel to its nearest palette colour (``icl.ops.nearest_palette``),
the background as the commonest border colour, objects as the 8-connected components of the rest
(``icl.ops.connected_components``), each object's shape by matching the generator's templates in
its box (intersection over union >= ``MIN_IOU``) and its colour by majority. Concepts it checks:
``"star"``, ``"red"``, ``"red star"``, ``"two stars"`` (exactly two stars), ``"sand background"``.
The ``cobsat`` task's images are CoBSAT-lite drawings (:mod:`icl.benchmarks.cobsat.lite`), read
by :func:`icl.benchmarks.cobsat.lite.shows` (concepts: a value of the CoBSAT vocabulary as printed,
``"beach background"``).
Anything else, or an image it cannot read, is answered "no". It knows nothing of real photographs:
judge the release's images with a vision-language model (``--judge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from icl.benchmarks.cobsat import lite as cobsat_lite
from icl.benchmarks.vlicl.builtin.draw import (BACKGROUNDS, COLOURS, NUMBER_WORDS, PALETTE, PALETTE_NAMES, PLURALS,
                                               SHAPES, shape_mask)
from icl.models.base import Adapter
from icl.models.requests import ChatRequest
from icl.ops import connected_components, nearest_palette

MIN_IOU = 0.9
MIN_AREA = 12
# the appendix's question ("... contains the following concept: X. Answer with ...") and the
# reference code's open_t2i_mi question ("... contains X. Answer with ...")
_CONCEPT = re.compile(r"image contains (?:the following concept:\s*)?(.+?)\.\s*Answer with", re.S)
_SINGULAR = {p: s for s, p in PLURALS.items()}


@dataclass(frozen=True)
class Thing:
    shape: Optional[str]
    colour: Optional[str]
    box: tuple[int, int, int, int]


@dataclass(frozen=True)
class Reading:
    background: Optional[str]
    things: tuple[Thing, ...]


def _shape_of(mask: np.ndarray) -> Optional[str]:
    h, w = mask.shape
    if h != w or h < 5 or h % 2 == 0:
        return None
    best, best_iou = None, 0.0
    for shape in SHAPES:
        t = shape_mask(shape, h)
        iou = float((t & mask).sum()) / float((t | mask).sum())
        if iou > best_iou:
            best, best_iou = shape, iou
    return best if best_iou >= MIN_IOU else None


def read_scene(image: np.ndarray) -> Reading:
    """What a built-in image shows: its background and its objects (uint8 ``[H, W, 3]``)."""
    if not (isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8):
        raise ValueError(f"judge: expected a uint8 [H, W, 3] image, got "
                         f"{getattr(image, 'dtype', type(image).__name__)} {getattr(image, 'shape', '')}")
    labels = nearest_palette(image if image.flags.writeable else image.copy(), PALETTE)
    border = np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]])
    bg = int(np.bincount(border, minlength=len(PALETTE)).argmax())
    bg_name = PALETTE_NAMES[bg]
    background = bg_name[:-len(" background")] if bg_name.endswith(" background") else None
    cc = connected_components(labels != bg, 8)
    things = []
    for k in range(int(cc.num[0])):
        if int(cc.area[k]) < MIN_AREA:
            continue
        x0, y0, x1, y1 = (int(v) for v in cc.box[k])
        inside = cc.labels[0, y0:y1, x0:x1] == k + 1
        colour_idx = int(np.bincount(labels[y0:y1, x0:x1][inside], minlength=len(PALETTE)).argmax())
        colour = PALETTE_NAMES[colour_idx] if PALETTE_NAMES[colour_idx] in COLOURS else None
        things.append(Thing(_shape_of(inside), colour, (x0, y0, x1, y1)))
    return Reading(background, tuple(things))


def _shape_word(word: str) -> Optional[str]:
    return word if word in SHAPES else _SINGULAR.get(word)


def holds(reading: Reading, concept: str) -> bool:
    """Whether ``reading`` shows ``concept`` (see the module docstring for what is understood)."""
    words = concept.lower().replace("'", " ").split()
    if len(words) == 2 and words[1] == "background":
        return words[0] in BACKGROUNDS and reading.background == words[0]
    if len(words) == 2 and (words[0] in NUMBER_WORDS or words[0].isdigit()):
        n = NUMBER_WORDS.index(words[0]) if words[0] in NUMBER_WORDS else int(words[0])
        shape = _shape_word(words[1])
        return shape is not None and sum(t.shape == shape for t in reading.things) == n
    if len(words) == 2 and words[0] in COLOURS:
        shape = _shape_word(words[1])
        return shape is not None and any(t.shape == shape and t.colour == words[0] for t in reading.things)
    if len(words) == 1:
        if words[0] in COLOURS:
            return any(t.colour == words[0] for t in reading.things)
        shape = _shape_word(words[0])
        return shape is not None and any(t.shape == shape for t in reading.things)
    return False


class VLICLJudge(Adapter):
    """Answers the VL-ICL judge question about built-in images (see the module docstring)."""

    name = "vlicl-judge"
    version = "2"  # 2: reads the cobsat task's CoBSAT-lite drawings
    serves = (ChatRequest,)
    batch_size = 64

    def predict(self, requests: Sequence[ChatRequest]) -> list[str]:
        out = []
        for req in requests:
            text = " ".join(p for m in req.messages if m.role == "user" for p in m.content if isinstance(p, str))
            found = _CONCEPT.search(text)
            images = req.images
            if found is None or not images:
                out.append("no")
                continue
            lite = cobsat_lite.shows(images[-1], found.group(1))  # the cobsat task draws CoBSAT-lite images
            if lite is not None:
                out.append("yes" if lite else "no")
                continue
            try:
                reading = read_scene(images[-1])
            except ValueError:
                out.append("no")
                continue
            out.append("yes" if holds(reading, found.group(1)) else "no")
        return out
