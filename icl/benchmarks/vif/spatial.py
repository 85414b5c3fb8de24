"""Where each subject landed: the spatial measurements beside the judge (PROTOCOL §5).

A subject is found by its colour: the reference's dominant non-background colour (the synthetic
references are flat shapes on grey), the output's pixels within ``TOLERANCE`` of it, their
largest connected component (:func:`icl.ops.connected_components`). Its box against the layout
box gives the IoU (:func:`icl.ops.box_iou`) and whether its centre lies in the region. This is
exact for the built-in synthetic tasks only; release data needs a detector (not built: NaN).

:func:`decode_layout` reads the boxes back from a rendered layout image (exact colours), which is
how the collage baseline and the spatial judge, who see only images, learn the layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from icl.benchmarks.vif.render import BOX_COLOURS

TOLERANCE = 24
MIN_AREA_FRACTION = 0.0005  # a component smaller than this share of the image is noise


def decode_layout(img: np.ndarray) -> dict[int, tuple[float, float, float, float]]:
    """``{reference index: normalised box}`` of a layout image drawn by
    :func:`~icl.benchmarks.vif.render.render_layout`; empty when ``img`` is not one (under 80%
    white pixels, or no box colour)."""
    h, w = img.shape[:2]
    if np.all(img == 255, axis=2).mean() < 0.8:
        return {}
    out = {}
    for ref, colour in enumerate(BOX_COLOURS):
        ys, xs = np.nonzero(np.all(img == np.array(colour, np.uint8), axis=2))
        if ys.size:
            out[ref] = (float(xs.min() / w), float(ys.min() / h), float((xs.max() + 1) / w), float((ys.max() + 1) / h))
    return out


def subject_colour(ref: np.ndarray) -> Optional[np.ndarray]:
    """The median colour of the pixels that differ from the reference's corner (background) colour."""
    bg = ref[0, 0].astype(np.int32)
    fg = np.abs(ref.astype(np.int32) - bg).max(axis=2) > TOLERANCE
    if fg.mean() < 0.01:
        return None
    return np.median(ref[fg], axis=0).astype(np.int32)


def find_subjects(out: np.ndarray, colours: Sequence[Optional[np.ndarray]]
                  ) -> list[Optional[tuple[float, float, float, float]]]:
    """Normalised box of the largest component of each colour in ``out`` (None: not found)."""
    from icl.ops import connected_components

    h, w = out.shape[:2]
    want = [(i, c) for i, c in enumerate(colours) if c is not None]
    found: list[Optional[tuple[float, float, float, float]]] = [None] * len(colours)
    if not want:
        return found
    px = out.astype(np.int32)
    masks = np.stack([np.abs(px - c).max(axis=2) <= TOLERANCE for _, c in want])
    comp = connected_components(masks, 8)
    for slot, (i, _) in enumerate(want):
        sel = np.nonzero(comp.image == slot)[0]
        if sel.size == 0:
            continue
        best = sel[np.argmax(comp.area[sel])]
        if comp.area[best] < MIN_AREA_FRACTION * h * w:
            continue
        x0, y0, x1, y1 = (int(v) for v in comp.box[best])
        found[i] = (x0 / w, y0 / h, x1 / w, y1 / h)
    return found


@dataclass(frozen=True)
class Placement:
    iou: float  # mean over layout boxes of the found subject's box IoU (0 when not found)
    centre_in: float  # share of layout boxes whose subject's centre lies inside them
    found: float  # share of layout boxes whose subject was found at all


def placement(out: np.ndarray, refs: Sequence[np.ndarray], boxes: dict[int, tuple[float, float, float, float]]
              ) -> Placement:
    """Where the subjects of ``refs`` (by index) landed in ``out`` against ``boxes`` (ref -> box)."""
    from icl.ops import box_iou

    order = sorted(b for b in boxes if b < len(refs))
    if not order:
        return Placement(float("nan"), float("nan"), float("nan"))
    found = find_subjects(out, [subject_colour(refs[i]) for i in order])
    ious, inside, hit = [], [], []
    for i, f in zip(order, found):
        target = np.array([boxes[i]], np.float64)
        if f is None:
            ious.append(0.0)
            inside.append(0.0)
            hit.append(0.0)
            continue
        ious.append(float(box_iou(np.array([f], np.float64), target)[0, 0]))
        cx, cy = (f[0] + f[2]) / 2, (f[1] + f[3]) / 2
        x0, y0, x1, y1 = boxes[i]
        inside.append(float(x0 <= cx <= x1 and y0 <= cy <= y1))
        hit.append(1.0)
    return Placement(float(np.mean(ious)), float(np.mean(inside)), float(np.mean(hit)))


def marks_left(out: np.ndarray) -> int:
    """How many VI box colours appear in ``out`` as a visible trace (at least a box side's worth of
    exactly-coloured pixels): the deterministic judge's cleanliness evidence."""
    h, w = out.shape[:2]
    side = max(8, min(h, w) // 16)
    return sum(int(np.all(out == np.array(c, np.uint8), axis=2).sum() >= side) for c in BOX_COLOURS)
