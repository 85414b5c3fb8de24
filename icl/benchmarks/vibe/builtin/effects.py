"""Image effects for built-in paired data: degradations (rain, haze, low light) and modalities
(thermal-like, surface normals). All deterministic given their inputs and generator."""

from __future__ import annotations

import cv2
import numpy as np
from matplotlib import colormaps


def to_uint8(x: np.ndarray) -> np.ndarray:
    """float in [0, 255] -> uint8 with round-half-even and clipping."""
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def smooth_noise(gen: np.random.Generator, h: int, w: int, cells: int = 6) -> np.ndarray:
    """Low-frequency noise in [-1, 1], float32 [h, w]: a coarse random grid upsampled bilinearly."""
    ch = max(2, round(cells * h / max(h, w)))
    cw = max(2, round(cells * w / max(h, w)))
    grid = gen.uniform(-1.0, 1.0, size=(ch, cw)).astype(np.float32)
    return cv2.resize(grid, (w, h), interpolation=cv2.INTER_LINEAR)


def rain(image: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Slanted bright streaks added to a uint8 [H, W, 3] image."""
    h, w = image.shape[:2]
    layer = np.zeros((h, w), np.float32)
    length = max(4, round(0.12 * min(h, w)))
    angle = np.deg2rad(gen.uniform(95.0, 115.0))
    n = max(8, int(h * w / 90))
    xs, ys = gen.uniform(-length, w + length, n), gen.uniform(-length, h, n)
    bright = gen.uniform(50.0, 110.0, n)
    dx, dy = np.cos(angle) * length, np.sin(angle) * length
    for x, y, b in zip(xs, ys, bright):
        p0 = (int(round(x)), int(round(y)))
        p1 = (int(round(x + dx)), int(round(y + dy)))
        cv2.line(layer, p0, p1, float(b), thickness=1, lineType=cv2.LINE_8)
    blurred = cv2.GaussianBlur(layer, (3, 3), 0.8)
    return to_uint8(image.astype(np.float32) + blurred[:, :, None])


def haze(image: np.ndarray, depth: np.ndarray, gen: np.random.Generator, far: float) -> np.ndarray:
    """Atmospheric scattering ``I = J t + A (1 - t)``, ``t = exp(-beta d)``; invalid depth is
    taken as infinitely far (``t = 0``)."""
    beta = gen.uniform(0.8, 1.5) / far * 2.0
    airlight = gen.uniform(200.0, 235.0)
    d = np.where(depth > 0, depth, np.inf).astype(np.float32)
    t = np.exp(-beta * d)[:, :, None]
    return to_uint8(image.astype(np.float32) * t + airlight * (1.0 - t))


def low_light(image: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Dark, gamma-compressed, slightly noisy version of a uint8 image."""
    x = image.astype(np.float64) / 255.0
    gain, gamma = gen.uniform(0.2, 0.4), gen.uniform(1.5, 2.2)
    y = gain * x**gamma + gen.normal(0.0, 0.015, size=x.shape)
    return to_uint8(np.clip(y, 0.0, 1.0) * 255.0)


def thermal(heat: np.ndarray) -> np.ndarray:
    """Heat in [0, 1] (float [H, W]) -> uint8 [H, W, 3] through matplotlib's inferno map."""
    lut = np.rint(255.0 * colormaps["inferno"](np.arange(256) / 255.0)[:, :3]).astype(np.uint8)
    heat = cv2.GaussianBlur(heat.astype(np.float32), (5, 5), 1.0)
    return lut[np.clip(np.rint(heat * 255.0), 0, 255).astype(np.int64)]


def normals(depth: np.ndarray, focal: float) -> np.ndarray:
    """Camera-space surface normals of a z-buffer, drawn as ``(n + 1) / 2`` in RGB; invalid depth black."""
    h, w = depth.shape
    valid = depth > 0
    z = np.where(valid, depth, np.nan).astype(np.float64)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    pts = np.stack([(xs - (w - 1) / 2) * z / focal, (ys - (h - 1) / 2) * z / focal, z], axis=-1)
    du = np.gradient(pts, axis=1)
    dv = np.gradient(pts, axis=0)
    n = np.cross(du, dv)
    n /= np.linalg.norm(n, axis=-1, keepdims=True) + 1e-12
    n = np.where(n[..., 2:3] > 0, -n, n)  # face the camera
    rgb = (n + 1.0) / 2.0 * 255.0
    ok = valid & np.isfinite(rgb).all(axis=-1)
    return np.where(ok[..., None], to_uint8(np.nan_to_num(rgb)), 0).astype(np.uint8)
