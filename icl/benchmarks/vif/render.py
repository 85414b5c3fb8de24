"""Deterministic VI images from a task record (OpenCV drawing, no anti-aliasing).

- layout: one white canvas, an outlined box per layout entry in the colour of its reference
  (``BOX_COLOURS[ref]``), the reference index written inside its top-left corner;
- orientation: one canvas per entry, a square pyramid whose apex points along the target facing
  (yaw about the vertical axis, pitch about the horizontal one), projected orthographically;
- wind / light: one canvas per kind, an arrow per entry from its tail (start: the source) to its
  head (end), each arrow of the task in a distinct colour;
- pose: the record's pose image, as given.

Pixels are exact (``LINE_8``), so a box's colour identifies its reference and its outer edge
gives its corners back (:func:`icl.benchmarks.vif.spatial.decode_layout`).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import cv2
import numpy as np

from icl.benchmarks.vif.schema import Arrow, Orientation, Task

WHITE = (255, 255, 255)
# one colour per reference index (RGB); none is grey, white or black
BOX_COLOURS = ((230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (240, 50, 230),
               (128, 128, 0))
ARROW_COLOURS = ((255, 200, 0), (0, 210, 210), (170, 110, 40), (0, 0, 128), (255, 100, 180), (100, 255, 100))
PYRAMID_EDGE = (40, 40, 40)


def thickness(size: int) -> int:
    return max(2, size // 128)


def pixel_box(box: tuple[float, float, float, float], w: int, h: int) -> tuple[int, int, int, int]:
    """The drawn outer edge of a normalised box: inclusive pixel corners ``(x0, y0, x1, y1)``."""
    x0, y0 = int(round(box[0] * w)), int(round(box[1] * h))
    x1, y1 = max(x0, int(round(box[2] * w)) - 1), max(y0, int(round(box[3] * h)) - 1)
    return x0, y0, x1, y1


def canvas(size: int) -> np.ndarray:
    return np.full((size, size, 3), 255, np.uint8)


def render_layout(task: Task, size: int) -> np.ndarray:
    img = canvas(size)
    t = thickness(size)
    scale = size / 640
    for b in task.layout:
        colour = BOX_COLOURS[b.ref]
        x0, y0, x1, y1 = pixel_box(b.box, size, size)
        for k in range(min(t, (x1 - x0 + 1) // 2, (y1 - y0 + 1) // 2)):  # inward, so the outer edge is the box
            cv2.rectangle(img, (x0 + k, y0 + k), (x1 - k, y1 - k), colour, 1, cv2.LINE_8)
        label = str(b.ref)
        (tw, th), _ = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        if x1 - x0 > tw + 3 * t and y1 - y0 > th + 3 * t:  # the label stays inside the outline
            cv2.putText(img, label, (x0 + t + 1, y0 + t + th + 1), cv2.FONT_HERSHEY_SIMPLEX, scale, colour, 1, cv2.LINE_8)
    return img


def facing(yaw: float, pitch: float) -> np.ndarray:
    """Unit facing vector ``(right, up, toward the viewer)`` of ``yaw``/``pitch`` in degrees."""
    y, p = math.radians(yaw), math.radians(pitch)
    return np.array([math.sin(y) * math.cos(p), math.sin(p), math.cos(y) * math.cos(p)])


def pyramid_points(o: Orientation, size: int) -> tuple[tuple[float, float], list[tuple[float, float]]]:
    """Projected apex and the four base corners (image pixels, y down) of ``o``'s pyramid:
    base centred on the canvas, perpendicular to the facing, apex ``0.3 * size`` along it."""
    d = facing(o.yaw, o.pitch)
    c = np.array([size / 2, size / 2])
    height, half = 0.3 * size, 0.15 * size
    up = np.array([0.0, 1.0, 0.0])
    u = np.cross(up, d)
    if np.linalg.norm(u) < 1e-9:  # facing straight up or down
        u = np.array([1.0, 0.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(d, u)

    def project(p: np.ndarray) -> tuple[float, float]:
        return float(c[0] + p[0]), float(c[1] - p[1])

    apex = project(height * d)
    corners = [project(half * (su * u + sv * v)) for su, sv in ((1, 1), (1, -1), (-1, -1), (-1, 1))]
    return apex, corners


def render_orientation(o: Orientation, size: int) -> np.ndarray:
    img = canvas(size)
    t = thickness(size)
    apex, corners = pyramid_points(o, size)
    pts = np.round(np.array(corners)).astype(np.int32)
    cv2.fillPoly(img, [pts], (220, 220, 220), cv2.LINE_8)
    cv2.polylines(img, [pts], True, PYRAMID_EDGE, t, cv2.LINE_8)
    a = (int(round(apex[0])), int(round(apex[1])))
    for p in pts:
        cv2.line(img, tuple(int(x) for x in p), a, PYRAMID_EDGE, t, cv2.LINE_8)
    cv2.circle(img, a, 2 * t, BOX_COLOURS[o.ref], -1, cv2.LINE_8)  # the apex: the subject's front
    cv2.putText(img, str(o.ref), (t, size // 12), cv2.FONT_HERSHEY_SIMPLEX, size / 640, BOX_COLOURS[o.ref], 1, cv2.LINE_8)
    return img


def arrow_pixels(a: Arrow, size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Tail and head of ``a`` in pixels (``x * (size - 1)``, rounded)."""
    def px(p: tuple[float, float]) -> tuple[int, int]:
        return int(round(p[0] * (size - 1))), int(round(p[1] * (size - 1)))

    return px(a.start), px(a.end)


def render_arrows(task: Task, kind: str, size: int) -> np.ndarray:
    img = canvas(size)
    t = thickness(size)
    for i, a in enumerate(task.arrows):
        if a.kind != kind:
            continue
        tail, head = arrow_pixels(a, size)
        length = math.hypot(head[0] - tail[0], head[1] - tail[1])
        tip = min(0.3, 0.06 * size / max(length, 1.0))
        cv2.arrowedLine(img, tail, head, ARROW_COLOURS[i % len(ARROW_COLOURS)], t, cv2.LINE_8, 0, tip)
    cv2.putText(img, kind, (t, size // 12), cv2.FONT_HERSHEY_SIMPLEX, size / 640, (0, 0, 0), 1, cv2.LINE_8)
    return img


def vi_images(task: Task, size: int, read_pose: Optional[Callable[[int], np.ndarray]] = None
              ) -> list[tuple[str, np.ndarray]]:
    """``(vi type, image)`` of every VI of ``task`` in order: layout, orientations, arrow kinds, poses.
    ``read_pose(i)`` returns the image of ``task.poses[i]``."""
    out = [("layout", render_layout(task, size))]
    out += [("orientation", render_orientation(o, size)) for o in task.orientations]
    out += [(k, render_arrows(task, k, size)) for k in task.arrow_kinds]
    if task.poses:
        if read_pose is None:
            raise ValueError(f"vif: task {task.id} has pose instructions but no pose images to read")
        out += [("pose", read_pose(i)) for i in range(len(task.poses))]
    return out
