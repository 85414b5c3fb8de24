"""TI Dense / Medium / Sparse: the VIs of a record as text (PROTOCOL §5; our wording, docs/vif.md).

- dense: exact normalised coordinates (2 decimals) and angles (whole degrees);
- medium: the 3 x 3 grid cell of a box's centre and its size class; directions among 8;
- sparse: left / centre / right of a box's centre; a coarse direction (left, right, up, down,
  toward the viewer); no size, no vertical position, no fine angle.

Coordinates are normalised to the image (origin top-left, x right, y down). A pose is given by
its record's ``description`` at every level (the source describes poses with a VLM; we do not).
"""

from __future__ import annotations

import math

from icl.benchmarks.vif.schema import Arrow, Orientation, Task

LEVELS = ("dense", "medium", "sparse")
_COLS = ("left", "centre", "right")
_ROWS = ("top", "middle", "bottom")
# 8 directions counter-clockwise from image right, with y pointing up
_DIRS8 = ("right", "upper right", "up", "upper left", "left", "lower left", "down", "lower right")


def third(v: float) -> int:
    """0, 1 or 2: the third of [0, 1] that ``v`` falls in (1/3 and 2/3 belong to the middle)."""
    return 0 if v < 1 / 3 else (2 if v > 2 / 3 else 1)


def cell(x: float, y: float) -> str:
    r, c = _ROWS[third(y)], _COLS[third(x)]
    return "centre" if (r, c) == ("middle", "centre") else f"{r} {c}"


def direction8(dx: float, dy_up: float) -> str:
    """The nearest of 8 directions of the vector (``dy_up`` positive up)."""
    angle = math.degrees(math.atan2(dy_up, dx)) % 360
    return _DIRS8[int((angle + 22.5) // 45) % 8]


def size_class(box: tuple[float, float, float, float]) -> str:
    area = (box[2] - box[0]) * (box[3] - box[1])
    return "small" if area < 0.06 else ("large" if area > 0.25 else "medium-sized")


def _facing_vector(o: Orientation) -> tuple[float, float, float]:
    y, p = math.radians(o.yaw), math.radians(o.pitch)
    return math.sin(y) * math.cos(p), math.sin(p), math.cos(y) * math.cos(p)


def _layout(task: Task, level: str) -> list[str]:
    out = []
    for b in task.layout:
        x0, y0, x1, y1 = b.box
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if level == "dense":
            out.append(f"Place the subject of Image {b.ref} inside the box from ({x0:.2f}, {y0:.2f}) to "
                       f"({x1:.2f}, {y1:.2f}).")
        elif level == "medium":
            out.append(f"Place the subject of Image {b.ref}, {size_class(b.box)}, in the {cell(cx, cy)} of the image.")
        else:
            side = _COLS[third(cx)]
            out.append(f"Place the subject of Image {b.ref} {'in the centre' if side == 'centre' else 'on the ' + side}.")
    return out


def _orientation(o: Orientation, level: str) -> str:
    if level == "dense":
        return (f"The subject of Image {o.ref} faces yaw {o.yaw:.0f} degrees and pitch {o.pitch:.0f} degrees "
                "(0/0 faces the viewer; positive yaw turns to the image's right, positive pitch tilts up).")
    x, y, z = _facing_vector(o)
    if level == "medium":
        if math.hypot(x, y) < math.sin(math.radians(22.5)):
            where = "the viewer" if z >= 0 else "away from the viewer"
            return f"The subject of Image {o.ref} faces {where}."
        away = "" if z >= 0 else ", turned away from the viewer"
        return f"The subject of Image {o.ref} faces {direction8(x, y)}{away}."
    if abs(x) < math.sin(math.radians(22.5)):
        return f"The subject of Image {o.ref} faces {'the viewer' if z >= 0 else 'away from the viewer'}."
    return f"The subject of Image {o.ref} faces {'right' if x > 0 else 'left'}."


def _arrow(a: Arrow, level: str) -> str:
    (sx, sy), (ex, ey) = a.start, a.end
    what = "The wind blows" if a.kind == "wind" else "The light shines"
    if level == "dense":
        return f"{what} from ({sx:.2f}, {sy:.2f}) toward ({ex:.2f}, {ey:.2f})."
    dx, dy_up = ex - sx, sy - ey
    if level == "medium":
        return f"{what} from the {cell(sx, sy)} toward the {direction8(dx, dy_up)}."
    coarse = ("right" if dx > 0 else "left") if abs(dx) >= abs(dy_up) else ("up" if dy_up > 0 else "down")
    return f"{what} toward the {coarse}."


def ti_text(task: Task, level: str) -> str:
    """The constraints of ``task`` as one text at ``level`` (dense, medium or sparse)."""
    if level not in LEVELS:
        raise ValueError(f"vif: unknown text level {level!r}; levels: {', '.join(LEVELS)}")
    parts = _layout(task, level)
    parts += [_orientation(o, level) for o in task.orientations]
    parts += [_arrow(a, level) for a in task.arrows]
    parts += [f"The person of Image {p.ref}: {p.description.strip()}" for p in task.poses]
    return " ".join(parts)
