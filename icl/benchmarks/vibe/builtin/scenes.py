"""Procedural scenes with exact annotations, deterministic from a generator.

A pinhole camera looks over a ground plane; three objects, one of each kind, stand on it and are
z-buffered per pixel. Each rendering carries: the RGB image, segmentation (background +
ground + one class per object kind; the outdoor style marks instance boundaries void),
depth in metres (the outdoor sky is invalid, -1), edges (instance boundaries), boxes
(visible extent of each object, some overlapping), keypoints (at least 14 px apart, so their
r = 5 discs never touch), an object-removal pair (the scene re-rendered without one object,
plus that object's box), a modality pair (thermal-like or surface normals) and an artifact
pair (rain or depth-dependent haze).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from icl.benchmarks.vibe.builtin import effects

KEYPOINT_SEPARATION = 14.0  # px between rounded centres: discs of radius 5 stay 8-disconnected


@dataclass(frozen=True)
class Style:
    """How a family of scenes looks: classes, shapes, colours, camera, depth range, pairs."""

    classes: tuple[str, ...]
    shapes: tuple[str, ...]  # shape of class 2, 3, 4, ...
    colours: tuple[tuple[int, int, int], ...]  # base colour per class
    heat: tuple[float, ...]  # thermal intensity per class
    depth_range: tuple[float, float]
    object_depth: tuple[float, float]
    object_size: tuple[float, float]  # metres
    outdoor: bool
    artifact: str
    modality: str


INDOOR = Style(
    classes=("background", "floor", "ball", "crate", "cone"),
    shapes=("sphere", "block", "cone"),
    colours=((186, 176, 158), (120, 96, 70), (200, 40, 40), (170, 120, 60), (240, 150, 30)),
    heat=(0.25, 0.35, 0.9, 0.5, 0.7),
    depth_range=(0.0, 10.0),
    object_depth=(3.0, 7.5),
    object_size=(0.9, 1.9),
    outdoor=False,
    artifact="rain",
    modality="thermal",
)
OUTDOOR = Style(
    classes=("background", "ground", "tree", "rock", "house"),
    shapes=("tree", "rock", "house"),
    colours=((120, 170, 230), (80, 130, 60), (30, 100, 40), (130, 125, 120), (180, 80, 70)),
    heat=(0.1, 0.4, 0.6, 0.5, 0.8),
    depth_range=(0.0, 20.0),
    object_depth=(3.5, 10.0),
    object_size=(1.8, 3.6),
    outdoor=True,
    artifact="haze",
    modality="normals",
)


@dataclass(frozen=True)
class _Obj:
    cls: int
    shape: str
    u: float  # column of the object's axis
    z: float  # depth of its base (metres)
    w: float  # width in px
    h: float  # height in px
    colour: tuple[float, float, float]
    heat: float
    seed: int


@dataclass(frozen=True)
class _Scene:
    h: int
    w: int
    focal: float
    horizon: float
    cam_height: float
    back: float  # indoor wall depth, or outdoor far limit of the ground
    objects: tuple[_Obj, ...]
    seed: int


def _ground_depth(scene: _Scene, ys: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(ys > scene.horizon, scene.cam_height * scene.focal / np.maximum(ys - scene.horizon, 1e-9), np.inf)


def _base_row(scene: _Scene, z: float) -> float:
    return scene.horizon + scene.cam_height * scene.focal / z


def _triangle(xs: np.ndarray, ys: np.ndarray, u: float, top: float, bottom: float, half: float) -> np.ndarray:
    t = (ys - top) / max(bottom - top, 1e-9)
    return (ys >= top) & (ys <= bottom) & (np.abs(xs - u) <= t * half)


def _shape(obj: _Obj, scene: _Scene, xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mask and per-pixel depth (metres) of one object."""
    v = _base_row(scene, obj.z)
    metres_per_px = obj.z / scene.focal
    depth = np.full(xs.shape, obj.z, np.float64)
    if obj.shape == "sphere":
        r = obj.w / 2
        rho2 = (xs - obj.u) ** 2 + (ys - (v - r)) ** 2
        mask = rho2 <= r * r
        depth = obj.z - np.sqrt(np.maximum(r * r - rho2, 0.0)) * metres_per_px
    elif obj.shape == "block":
        mask = (np.abs(xs - obj.u) <= obj.w / 2) & (ys >= v - obj.h) & (ys <= v)
    elif obj.shape == "cone":
        mask = _triangle(xs, ys, obj.u, v - obj.h, v, obj.w / 2)
    elif obj.shape == "tree":
        trunk = (np.abs(xs - obj.u) <= max(obj.w * 0.12, 0.8)) & (ys >= v - 0.3 * obj.h) & (ys <= v)
        mask = trunk | _triangle(xs, ys, obj.u, v - obj.h, v - 0.25 * obj.h, obj.w / 2)
    elif obj.shape == "rock":
        e = ((xs - obj.u) / (obj.w / 2)) ** 2 + ((ys - v) / obj.h) ** 2
        mask = (e <= 1.0) & (ys <= v)
        depth = obj.z - np.sqrt(np.maximum(1.0 - e, 0.0)) * 0.3 * obj.w * metres_per_px
    elif obj.shape == "house":
        body = (np.abs(xs - obj.u) <= obj.w / 2) & (ys >= v - 0.6 * obj.h) & (ys <= v)
        mask = body | _triangle(xs, ys, obj.u, v - obj.h, v - 0.6 * obj.h, 0.6 * obj.w)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")
    return mask, depth


def _keypoints(obj: _Obj, scene: _Scene) -> list[tuple[float, float]]:
    v = _base_row(scene, obj.z)
    u, w, h = obj.u, obj.w, obj.h
    if obj.shape == "sphere":
        return [(u, v - w + 1.5), (u, v - w / 2)]
    if obj.shape == "block":
        return [(u - w / 2 + 1.5, v - h + 1.5), (u + w / 2 - 1.5, v - h + 1.5), (u, v - h / 2)]
    if obj.shape == "cone":
        return [(u, v - h + 2.5), (u - w / 2 + 2.0, v - 1.0), (u + w / 2 - 2.0, v - 1.0)]
    if obj.shape == "tree":
        return [(u, v - h + 2.5), (u, v - 1.0)]
    if obj.shape == "rock":
        return [(u, v - h + 1.5)]
    return [(u, v - h + 2.5), (u - w / 2 + 1.5, v - 1.0), (u + w / 2 - 1.5, v - 1.0)]


def _background(scene: _Scene, style: Style, xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, ...]:
    """Colour [H,W,3], depth (-1 invalid), instance ids (0 back, 1 ground) and heat of the empty scene."""
    gen = np.random.default_rng(scene.seed)
    h, w = scene.h, scene.w
    zg = _ground_depth(scene, ys)
    ground = zg <= scene.back
    back_col = np.array(style.colours[0], np.float64) + gen.uniform(-20, 20, 3)
    ground_col = np.array(style.colours[1], np.float64) + gen.uniform(-20, 20, 3)
    colour = np.empty((h, w, 3), np.float64)
    if style.outdoor:
        t = np.clip(ys / max(scene.horizon, 1.0), 0.0, 1.0)[..., None]
        colour[:] = back_col * (1 - t) + np.array([215.0, 225.0, 240.0]) * t
        depth = np.where(ground, zg, -1.0)
    else:
        colour[:] = back_col + 12.0 * effects.smooth_noise(gen, h, w)[..., None] - 0.15 * ys[..., None]
        depth = np.where(ground, zg, scene.back)
    zx = np.where(ground, zg, scene.back)
    checker = (np.floor((xs - (w - 1) / 2) * zx / scene.focal / 0.6) + np.floor(zx / 0.6)) % 2
    tex = ground_col + (25.0 * checker if not style.outdoor else 18.0 * effects.smooth_noise(gen, h, w, 12))[..., None]
    colour = np.where(ground[..., None], tex, colour)
    inst = ground.astype(np.int32)
    heat = np.where(ground, style.heat[1] + 0.1 * np.clip(1.5 / np.maximum(zx, 1e-6), 0, 1), style.heat[0])
    return colour, depth, inst, heat


def _render(scene: _Scene, style: Style, skip: int | None = None) -> dict[str, np.ndarray]:
    ys, xs = np.mgrid[0 : scene.h, 0 : scene.w].astype(np.float64)
    colour, depth, inst, heat = _background(scene, style, xs, ys)
    zbuf = np.where(depth > 0, depth, np.inf)
    for k, obj in enumerate(scene.objects):
        if k == skip:
            continue
        mask, odepth = _shape(obj, scene, xs, ys)
        win = mask & (odepth < zbuf)
        gen = np.random.default_rng(obj.seed)
        tex = np.array(obj.colour) + 18.0 * effects.smooth_noise(gen, scene.h, scene.w, 10)[..., None]
        if obj.shape in ("sphere", "rock"):
            shade = np.clip((obj.z - odepth) / max(obj.w * obj.z / scene.focal / 2, 1e-6), 0, 1)
            tex = tex * (0.55 + 0.45 * shade[..., None])
        elif obj.shape == "block":
            tex = tex + 14.0 * np.sin(xs * 1.3)[..., None]
        colour = np.where(win[..., None], tex, colour)
        zbuf = np.where(win, odepth, zbuf)
        depth = np.where(win, odepth, depth)
        inst = np.where(win, k + 2, inst)
        heat = np.where(win, obj.heat, heat)
    far = style.depth_range[1]
    colour = colour * (1.0 - 0.3 * np.clip(np.where(depth > 0, depth, far) / far, 0, 1))[..., None]
    colour += np.random.default_rng(scene.seed + 1).normal(0.0, 2.0, colour.shape)
    return {"image": effects.to_uint8(colour), "depth": depth.astype(np.float32), "inst": inst, "heat": heat}


def _sample_scene(style: Style, gen: np.random.Generator, h: int, w: int, spread: bool = False) -> _Scene:
    focal = 0.8 * max(h, w)
    horizon = gen.uniform(0.3, 0.42) * h
    cam = gen.uniform(1.4, 1.8)
    back = gen.uniform(7.5, 9.5) if not style.outdoor else 19.0
    objects: list[_Obj] = []
    # One object of every kind, in a random order: every scene shows every class, so a single
    # context always covers a query's classes and the oracle's segmentation decodes exactly
    # (PROTOCOL §1.4 asks mIoU 1 of it; decoding only knows the context's colours).
    kinds = gen.permutation(len(style.shapes))
    for i, k in enumerate(int(k) for k in kinds):
        size = gen.uniform(*style.object_size) * focal
        if spread:  # crowded draws keep failing: side by side, no overlap
            z = gen.uniform(*style.object_depth)
            u = (i + 0.5) / len(kinds) * w
        elif objects and gen.random() < 0.6:  # next to the previous object: boxes overlap
            prev = objects[-1]
            z = float(np.clip(prev.z + gen.uniform(-2.0, 2.0), *style.object_depth))
            u = prev.u + gen.choice([-1, 1]) * gen.uniform(0.3, 0.8) * prev.w
        else:
            z = gen.uniform(*style.object_depth)
            u = gen.uniform(0.12, 0.88) * w
        aspect = gen.uniform(0.8, 1.3) if style.shapes[k] != "tree" else gen.uniform(1.6, 2.2)
        colour = tuple(np.array(style.colours[k + 2], np.float64) + gen.uniform(-25, 25, 3))
        objects.append(
            _Obj(k + 2, style.shapes[k], float(u), float(z), size / z, size / z * aspect, colour,
                 float(np.clip(style.heat[k + 2] + gen.uniform(-0.1, 0.1), 0, 1)), int(gen.integers(2**62)))
        )
    return _Scene(h, w, focal, horizon, cam, back, tuple(objects), int(gen.integers(2**62)))


def _boxes(inst: np.ndarray, n: int) -> list[tuple[int, int, int, int] | None]:
    out: list[tuple[int, int, int, int] | None] = []
    for k in range(n):
        ys, xs = np.nonzero(inst == k + 2)
        out.append(None if len(xs) == 0 else (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1))
    return out


def _acceptable(scene: _Scene, style: Style, rendered: dict[str, np.ndarray]) -> bool:
    """Every object is visible enough to be detected and box-annotated."""
    ys, xs = np.mgrid[0 : scene.h, 0 : scene.w].astype(np.float64)
    for k, (obj, box) in enumerate(zip(scene.objects, _boxes(rendered["inst"], len(scene.objects)))):
        full = int(_shape(obj, scene, xs, ys)[0].sum())
        seen = int((rendered["inst"] == k + 2).sum())
        if box is None or seen < max(12, 0.4 * full) or box[2] - box[0] < 4 or box[3] - box[1] < 4:
            return False
    return True


def _edges(inst: np.ndarray) -> np.ndarray:
    edges = np.zeros(inst.shape, bool)
    edges[:, :-1] |= inst[:, :-1] != inst[:, 1:]
    edges[:-1, :] |= inst[:-1, :] != inst[1:, :]
    return edges


def _keypoint_table(scene: _Scene, inst: np.ndarray) -> np.ndarray:
    rows: list[list[float]] = []
    kept: list[tuple[int, int]] = []
    for k, obj in enumerate(scene.objects):
        for x, y in _keypoints(obj, scene):
            xi, yi = int(np.floor(x + 0.5)), int(np.floor(y + 0.5))
            inside = 0 <= xi < scene.w and 0 <= yi < scene.h and 0 <= x <= scene.w - 1 and 0 <= y <= scene.h - 1
            v = 0
            if inside:
                v = 2 if inst[yi, xi] == k + 2 else 1
            if v == 2 and any(np.hypot(xi - a, yi - b) < KEYPOINT_SEPARATION for a, b in kept):
                v = 0  # too close to a kept point: its disc would merge with that one
            if v == 2:
                kept.append((xi, yi))
            rows.append([float(x), float(y), float(v)])
    return np.asarray(rows, np.float64).reshape(-1, 3)


def make_scene(style: Style, gen: np.random.Generator, h: int, w: int) -> dict[str, Any]:
    """One scene and all its annotations, as keyword arguments for ``DatasetWriter.add``."""
    for attempt in range(400):
        scene = _sample_scene(style, gen, h, w, spread=attempt >= 100)
        full = _render(scene, style)
        if _acceptable(scene, style, full):
            break
    else:
        raise RuntimeError("could not sample an acceptable scene")
    inst = full["inst"]
    seg = np.asarray([0, 1, *[o.cls for o in scene.objects]], np.uint8)[inst]
    edges = _edges(inst)
    if style.outdoor:
        seg = np.where(edges, 255, seg).astype(np.uint8)  # VOC-like void boundaries
    boxes = _boxes(inst, len(scene.objects))
    removed_k = int(gen.integers(len(scene.objects)))
    removed_box = boxes[removed_k]
    assert removed_box is not None  # the scene was _acceptable: every object is visible
    removed = _render(scene, style, skip=removed_k)["image"]
    if style.modality == "thermal":
        modal = effects.thermal(np.clip(full["heat"] + 0.05 * effects.smooth_noise(gen, h, w, 8), 0, 1))
    else:
        modal = effects.normals(full["depth"], scene.focal)
    if style.artifact == "rain":
        degraded = effects.rain(full["image"], gen)
    else:
        degraded = effects.haze(full["image"], full["depth"], gen, style.depth_range[1])
    return {
        "image": full["image"],
        "segmentation": seg,
        "depth": full["depth"],
        "edges": edges,
        "keypoints": _keypoint_table(scene, inst),
        "boxes": np.asarray(boxes, np.float64).reshape(-1, 4),
        "box_classes": np.asarray([o.cls for o in scene.objects], np.int64),
        "paired": {"removed": removed, style.modality: modal, style.artifact: degraded},
        "paired_info": {"removed": {"box": list(removed_box)}},
    }
