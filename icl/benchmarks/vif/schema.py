"""VIF-Bench task records (schema ``vif-task-1``, documented in ``docs/vif.md``) and the release loader.

A record is the source of truth of a task: its visual-instruction (VI) images and its text
variants are derived from it (:mod:`~icl.benchmarks.vif.render`, :mod:`~icl.benchmarks.vif.texts`).
A release folder holds ``tasks.jsonl`` (one record per line) and the image files the records
name by relative paths, confined to the folder (no absolute path, no ``..``, no symlink leaving it).
Every validation error names the task and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Optional

import numpy as np

from icl._text import bad_text

SCHEMA = "vif-task-1"
ROLES = ("main", "sub", "scene")
VI_TYPES = ("layout", "orientation", "wind", "light", "pose")
CONFLICT_TYPES = ("orientation", "wind", "light", "pose")  # layout is a whole-scene arrangement
ARROW_KINDS = ("wind", "light")
MAX_REFERENCES, MAX_VIS = 7, 6


class TaskError(ValueError):
    """A record that breaks the schema: ``vif: task <id>, field <path>: <why>``."""

    def __init__(self, task: str, where: str, why: str) -> None:
        super().__init__(f"vif: task {task}, field {where}: {why}")


@dataclass(frozen=True)
class Reference:
    file: str
    role: str  # main subject, sub-attribute, scene context
    type: str  # person, animal, object, text, hairstyle, style, background, ...


@dataclass(frozen=True)
class LayoutBox:
    ref: int
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 normalised, origin top-left


@dataclass(frozen=True)
class Orientation:
    ref: int
    yaw: float  # degrees, [-180, 180]; positive turns the subject's front toward image right
    pitch: float  # degrees, [-90, 90]; positive tilts it up


@dataclass(frozen=True)
class Arrow:
    kind: str  # wind or light
    start: tuple[float, float]  # tail: where the wind or light comes from (normalised x, y)
    end: tuple[float, float]  # head: the direction it flows to


@dataclass(frozen=True)
class Pose:
    ref: int
    file: str
    description: str = ""  # text of the pose for the TI variants (required on the text subset)


@dataclass(frozen=True)
class Task:
    id: str
    references: tuple[Reference, ...]
    layout: tuple[LayoutBox, ...]
    instruction: str
    orientations: tuple[Orientation, ...] = ()
    arrows: tuple[Arrow, ...] = ()
    poses: tuple[Pose, ...] = ()
    conflicts: Mapping[str, bool] = field(default_factory=dict)
    text_subset: bool = False

    @property
    def arrow_kinds(self) -> tuple[str, ...]:
        """Arrow kinds present, in ``ARROW_KINDS`` order: one VI image each."""
        return tuple(k for k in ARROW_KINDS if any(a.kind == k for a in self.arrows))

    @property
    def vi_types(self) -> tuple[str, ...]:
        present = {"layout"} | ({"orientation"} if self.orientations else set()) | set(self.arrow_kinds) \
            | ({"pose"} if self.poses else set())
        return tuple(t for t in VI_TYPES if t in present)

    @property
    def n_vis(self) -> int:
        """VI images: the layout, one per orientation, one per arrow kind, one per pose."""
        return 1 + len(self.orientations) + len(self.arrow_kinds) + len(self.poses)

    def conflict(self, vi_type: str) -> bool:
        return bool(self.conflicts.get(vi_type, False))


def _num(task: str, where: str, v: Any, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise TaskError(task, where, f"expected a number, got {v!r}")
    if not lo <= v <= hi:
        raise TaskError(task, where, f"{v} is outside [{lo}, {hi}]")
    return float(v)


def _list(task: str, where: str, v: Any) -> list:
    if not isinstance(v, list):
        raise TaskError(task, where, f"expected a list, got {type(v).__name__}")
    return v


def _obj(task: str, where: str, v: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    if not isinstance(v, dict):
        raise TaskError(task, where, f"expected an object, got {type(v).__name__}")
    missing = [k for k in required if k not in v]
    if missing:
        raise TaskError(task, f"{where}.{missing[0]}", "missing")
    extra = sorted(set(v) - set(required) - set(optional))
    if extra:
        raise TaskError(task, f"{where}.{extra[0]}", "unknown field")
    return v


def _str(task: str, where: str, v: Any, allow_empty: bool = False) -> str:
    if not isinstance(v, str) or (not v.strip() and not allow_empty):
        raise TaskError(task, where, f"expected a non-empty string, got {v!r}")
    return v


def _rel_path(task: str, where: str, v: Any) -> str:
    """A relative POSIX path without ``..`` (confinement to the folder is checked on reading)."""
    s = _str(task, where, v)
    p = PurePosixPath(s)
    if p.is_absolute() or s.startswith(("/", "\\")) or (len(s) > 1 and s[1] == ":") or ".." in p.parts \
            or "\\" in s:
        raise TaskError(task, where, f"{s!r} must be a relative path inside the release folder (no '..', no absolute path)")
    return s


def _ref_index(task: str, where: str, v: Any, n_refs: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n_refs:
        raise TaskError(task, where, f"expected a reference index in 0..{n_refs - 1}, got {v!r}")
    return v


def _point(task: str, where: str, v: Any) -> tuple[float, float]:
    v = _list(task, where, v)
    if len(v) != 2:
        raise TaskError(task, where, f"expected [x, y], got {len(v)} numbers")
    return (_num(task, f"{where}[0]", v[0], 0, 1), _num(task, f"{where}[1]", v[1], 0, 1))


def parse_task(obj: Any, where: str = "record") -> Task:
    """Validate one record (a parsed JSON object) into a :class:`Task`."""
    if not isinstance(obj, dict):
        raise TaskError(where, "record", f"expected an object, got {type(obj).__name__}")
    tid = obj.get("id")
    if not isinstance(tid, str) or not tid or "/" in tid or tid.strip() != tid:
        raise TaskError(where, "id", f"expected a non-empty id without '/' or surrounding spaces, got {tid!r}")
    _obj(tid, "record", obj, ("id", "references", "layout", "instruction"),
         ("orientations", "arrows", "poses", "conflicts", "text_subset"))
    refs_raw = _list(tid, "references", obj["references"])
    if not 1 <= len(refs_raw) <= MAX_REFERENCES:
        raise TaskError(tid, "references", f"expected 1..{MAX_REFERENCES} references, got {len(refs_raw)}")
    refs = []
    for i, r in enumerate(refs_raw):
        w = f"references[{i}]"
        _obj(tid, w, r, ("file", "role", "type"))
        if r["role"] not in ROLES:
            raise TaskError(tid, f"{w}.role", f"{r['role']!r} is not one of {', '.join(ROLES)}")
        refs.append(Reference(_rel_path(tid, f"{w}.file", r["file"]), r["role"], _str(tid, f"{w}.type", r["type"])))
    n = len(refs)
    layout = []
    for i, b in enumerate(_list(tid, "layout", obj["layout"])):
        w = f"layout[{i}]"
        _obj(tid, w, b, ("ref", "box"))
        box = _list(tid, f"{w}.box", b["box"])
        if len(box) != 4:
            raise TaskError(tid, f"{w}.box", f"expected [x0, y0, x1, y1], got {len(box)} numbers")
        x0, y0, x1, y1 = (_num(tid, f"{w}.box[{j}]", v, 0, 1) for j, v in enumerate(box))
        if not (x0 < x1 and y0 < y1):
            raise TaskError(tid, f"{w}.box", f"needs x0 < x1 and y0 < y1, got {box}")
        layout.append(LayoutBox(_ref_index(tid, f"{w}.ref", b["ref"], n), (x0, y0, x1, y1)))
    if not layout:
        raise TaskError(tid, "layout", "every task has at least one layout box")
    bound = [b.ref for b in layout]
    if len(set(bound)) != len(bound):
        raise TaskError(tid, "layout", "a reference has two boxes")
    for i in bound:
        if refs[i].role != "main":
            raise TaskError(tid, "layout", f"box of reference {i}, whose role is {refs[i].role!r} (boxes bind main subjects)")
    orients = []
    for i, o in enumerate(_list(tid, "orientations", obj.get("orientations", []))):
        w = f"orientations[{i}]"
        _obj(tid, w, o, ("ref", "yaw", "pitch"))
        orients.append(Orientation(_ref_index(tid, f"{w}.ref", o["ref"], n), _num(tid, f"{w}.yaw", o["yaw"], -180, 180),
                                   _num(tid, f"{w}.pitch", o["pitch"], -90, 90)))
    arrows = []
    for i, a in enumerate(_list(tid, "arrows", obj.get("arrows", []))):
        w = f"arrows[{i}]"
        _obj(tid, w, a, ("kind", "start", "end"))
        if a["kind"] not in ARROW_KINDS:
            raise TaskError(tid, f"{w}.kind", f"{a['kind']!r} is not one of {', '.join(ARROW_KINDS)}")
        start, end = _point(tid, f"{w}.start", a["start"]), _point(tid, f"{w}.end", a["end"])
        if start == end:
            raise TaskError(tid, w, "start and end are the same point (no direction)")
        arrows.append(Arrow(a["kind"], start, end))
    text_subset = obj.get("text_subset", False)
    if not isinstance(text_subset, bool):
        raise TaskError(tid, "text_subset", f"expected true or false, got {text_subset!r}")
    poses = []
    for i, p in enumerate(_list(tid, "poses", obj.get("poses", []))):
        w = f"poses[{i}]"
        _obj(tid, w, p, ("ref", "file"), ("description",))
        desc = _str(tid, f"{w}.description", p.get("description", ""), allow_empty=True)
        if text_subset and not desc.strip():
            raise TaskError(tid, f"{w}.description", "required on the text subset (the TI variants describe the pose)")
        poses.append(Pose(_ref_index(tid, f"{w}.ref", p["ref"], n), _rel_path(tid, f"{w}.file", p["file"]), desc))
    conflicts = _obj(tid, "conflicts", obj.get("conflicts", {}), (), CONFLICT_TYPES)
    for k, v in conflicts.items():
        if not isinstance(v, bool):
            raise TaskError(tid, f"conflicts.{k}", f"expected true or false, got {v!r}")
    task = Task(tid, tuple(refs), tuple(layout), _str(tid, "instruction", obj["instruction"]), tuple(orients),
                tuple(arrows), tuple(poses), dict(conflicts), text_subset)
    for k, v in conflicts.items():
        if v and k not in task.vi_types:
            raise TaskError(tid, f"conflicts.{k}", f"marked true but the task has no {k} instruction")
    if task.n_vis > MAX_VIS:
        raise TaskError(tid, "record", f"{task.n_vis} visual instructions (at most {MAX_VIS})")
    return task


def confined(root: Path, rel: str, task: str, where: str) -> Path:
    """``root / rel`` after resolving links, refused when it leaves ``root``."""
    base = root.resolve()
    path = (base / rel).resolve()
    if path != base and base not in path.parents:
        raise TaskError(task, where, f"{rel!r} resolves outside the release folder")
    return path


def read_image(root: Path, rel: str, task: str, where: str) -> np.ndarray:
    """A release image as uint8 RGB ``[H, W, 3]``, read with the capped reader."""
    import cv2

    from icl.data.images import ImageError, decode_image

    path = confined(root, rel, task, where)
    if not path.is_file():
        raise TaskError(task, where, f"{rel!r}: no such file in the release folder")
    try:
        img = decode_image(path, cv2.IMREAD_COLOR)
    except ImageError as exc:
        raise TaskError(task, where, str(exc)) from None
    if img.dtype != np.uint8:
        raise TaskError(task, where, f"{rel!r}: expected 8-bit pixels, got {img.dtype}")
    return np.ascontiguousarray(img[:, :, ::-1])


def load_release(root: Path) -> list[Task]:
    """Every record of ``root/tasks.jsonl``, validated; ids unique; referenced files present and confined."""
    root = Path(root)
    listing = root / "tasks.jsonl"
    if not listing.is_file():
        raise ValueError(f"vif: no tasks.jsonl in the release folder {root} (schema {SCHEMA}, docs/vif.md; "
                         "--fast runs the built-in synthetic tasks)")
    tasks: list[Task] = []
    seen: set[str] = set()
    for n, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"at line {n}", "record", f"not JSON ({exc.msg})") from None
        bad = bad_text(obj)
        if bad:
            raise TaskError(f"at line {n} of {listing}", bad[0] or "record", bad[1])
        task = parse_task(obj, f"at line {n}")
        if task.id in seen:
            raise TaskError(task.id, "id", f"repeated at line {n}")
        seen.add(task.id)
        for i, r in enumerate(task.references):
            if not confined(root, r.file, task.id, f"references[{i}].file").is_file():
                raise TaskError(task.id, f"references[{i}].file", f"{r.file!r}: no such file in the release folder")
        for i, p in enumerate(task.poses):
            if not confined(root, p.file, task.id, f"poses[{i}].file").is_file():
                raise TaskError(task.id, f"poses[{i}].file", f"{p.file!r}: no such file in the release folder")
        tasks.append(task)
    if not tasks:
        raise ValueError(f"vif: {listing} has no task records")
    return tasks


def record(task: Task) -> dict[str, Any]:
    """The JSON record of ``task`` (inverse of :func:`parse_task`)."""
    out: dict[str, Any] = {
        "id": task.id,
        "references": [{"file": r.file, "role": r.role, "type": r.type} for r in task.references],
        "layout": [{"ref": b.ref, "box": list(b.box)} for b in task.layout],
        "instruction": task.instruction,
    }
    if task.orientations:
        out["orientations"] = [{"ref": o.ref, "yaw": o.yaw, "pitch": o.pitch} for o in task.orientations]
    if task.arrows:
        out["arrows"] = [{"kind": a.kind, "start": list(a.start), "end": list(a.end)} for a in task.arrows]
    if task.poses:
        out["poses"] = [{"ref": p.ref, "file": p.file, **({"description": p.description} if p.description else {})}
                        for p in task.poses]
    if task.conflicts:
        out["conflicts"] = dict(task.conflicts)
    if task.text_subset:
        out["text_subset"] = True
    return out
