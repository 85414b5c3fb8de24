"""Pixel geometry shared by the dataset converters and the visual benchmark's tasks: the nearest
and bilinear resizes of PROTOCOL §1.3, and boxes as drawn pixel rectangles packed into R, G, B
(the detection encoding, which the LLVIP converter's filter applies too)."""

from __future__ import annotations

import cv2
import numpy as np


def resize_nearest(labels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of a 2-D map to ``size`` (h, w), pixel centres aligned:
    source index ``floor((i + 0.5) * src / dst)``. Any dtype."""
    h, w = size
    sh, sw = labels.shape[:2]
    if (sh, sw) == (h, w):
        return labels
    rows = np.minimum(((np.arange(h) + 0.5) * sh / h).astype(np.int64), sh - 1)
    cols = np.minimum(((np.arange(w) + 0.5) * sw / w).astype(np.int64), sw - 1)
    return labels[rows[:, None], cols[None, :]]


def resize_image(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Bilinear resize of a uint8 [h, w, 3] image to ``size`` (h, w) without antialias
    (OpenCV ``INTER_LINEAR``)."""
    h, w = size
    if image.shape[:2] == (h, w):
        return image
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)


def pixel_rects(boxes: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Drawn pixel extent (x0, y0, x1, y1), x1/y1 exclusive, int64 [N, 4]: edges rounded half
    up, at least one pixel, inside the image."""
    h, w = size
    r = np.floor(np.asarray(boxes, np.float64).reshape(-1, 4) + 0.5).astype(np.int64)
    r[:, 0] = np.clip(r[:, 0], 0, w - 1)
    r[:, 1] = np.clip(r[:, 1], 0, h - 1)
    r[:, 2] = np.clip(np.maximum(r[:, 2], r[:, 0] + 1), 1, w)
    r[:, 3] = np.clip(np.maximum(r[:, 3], r[:, 1] + 1), 1, h)
    return r


def pack_channels(rects: np.ndarray) -> list[int] | str:
    """Channel (0 R, 1 G, 2 B) per box in annotation order: the first channel where the box
    neither overlaps nor touches (8-neighbour) a box already drawn there, since touching
    boxes would merge into one component. A reason string when a box fits no channel."""
    placed: list[list[np.ndarray]] = [[], [], []]
    out: list[int] = []
    for i, r in enumerate(rects):
        for c in range(3):
            # touching = the rectangles grown by one pixel overlap
            if all(r[0] > q[2] or q[0] > r[2] or r[1] > q[3] or q[1] > r[3] for q in placed[c]):
                placed[c].append(r)
                out.append(c)
                break
        else:
            return f"box {i} {r.tolist()} overlaps or touches a box in each of R, G and B"
    return out
