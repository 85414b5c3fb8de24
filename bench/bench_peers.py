"""Our public ops beside the strongest simple peers, at small and large sizes, interleaved.

Each comparison alternates one call of ours and one of the peer for ``--seconds`` and reports
the median of each: load that comes and goes hits both alike. Numpy in, numpy out, as a user
calls them (the public ``icl.ops`` functions, default backend):

- ``psnr`` vs ``cv2.PSNR`` (the same value): 72x96 and 1024x1024 RGB uint8, one image a call;
- ``ssim`` vs an OpenCV float32 SSIM (``cv2.GaussianBlur`` 11x11, sigma 1.5, the classic form;
  not skimage's exact window handling, so values differ in the 4th decimal);
- ``nearest_palette`` vs a numpy lookup table (2^24 entries, ``table[r << 16 | g << 8 | b]``;
  its one-off build is reported apart), on noise-free and on noisy predictions;
- ``box_iou`` vs ``pycocotools.mask.iou`` and a numpy broadcast formula at 100x100 and 2000x2000.

Usage: ``python bench/bench_peers.py [--seconds S] [--json OUT]``; ``pytest bench/bench_peers.py``
runs it briefly. Ratios > 1 mean ours is faster.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

import cv2
import numpy as np

import icl.ops as ops


def interleaved(ours: Callable[[], Any], peer: Callable[[], Any], seconds: float) -> tuple[float, float]:
    """Median seconds per call of ``ours`` and ``peer``, called alternately."""
    ours(), peer()
    a: list[float] = []
    b: list[float] = []
    until = time.perf_counter() + seconds
    while time.perf_counter() < until or len(a) < 5:
        t = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        peer()
        b.append(time.perf_counter() - t)
    return statistics.median(a), statistics.median(b)


def cv2_ssim(x: np.ndarray, y: np.ndarray) -> float:
    """SSIM in float32 with OpenCV's Gaussian blur (the widespread OpenCV recipe)."""
    x, y = x.astype(np.float32), y.astype(np.float32)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(t: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(t, (11, 11), 1.5)

    mx, my = blur(x), blur(y)
    vx, vy, vxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    s = (2 * mx * my + c1) * (2 * vxy + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s[5:-5, 5:-5].mean())


def numpy_lut(palette: np.ndarray) -> np.ndarray:
    """The nearest palette index of every RGB value (built with our kernel, once)."""
    codes = np.arange(1 << 24, dtype=np.uint32)
    every = np.stack([codes >> 16, (codes >> 8) & 255, codes & 255], 1).astype(np.uint8).reshape(1, 4096, 4096, 3)
    return ops.nearest_palette(every, palette, backend="cpu").reshape(-1).astype(np.uint8)


def lut_gather(images: np.ndarray, table: np.ndarray) -> np.ndarray:
    x = images.astype(np.uint32)
    return table[(x[..., 0] << 16) | (x[..., 1] << 8) | x[..., 2]]


def palette_images(palette: np.ndarray, size: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, len(palette), (size // 32, size // 32))
    img = palette[idx].repeat(32, 0).repeat(32, 1).astype(np.float32)
    if noise:
        img += rng.normal(0, noise, img.shape)
    return img.clip(0, 255).round().astype(np.uint8)


def boxes(n: int, rng: np.random.Generator) -> np.ndarray:
    b = rng.random((n, 4)) * 500
    b[:, 2:] = b[:, :2] + rng.random((n, 2)) * 80 + 1
    return b


def numpy_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w = (np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])).clip(0)
    h = (np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])).clip(0)
    inter = w * h
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.where(inter > 0, area_a[:, None] + area_b[None] - inter, 1.0)


def run(seconds: float = 1.0) -> list[dict[str, Any]]:
    from pycocotools import mask as mask_utils

    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []

    def add(op: str, size: str, peer: str, ours: Callable[[], Any], other: Callable[[], Any]) -> None:
        t_ours, t_peer = interleaved(ours, other, seconds)
        rows.append(dict(op=op, size=size, peer=peer, ours_us=t_ours * 1e6, peer_us=t_peer * 1e6,
                         ratio=t_peer / t_ours))
        print(f"{op:16s} {size:24s} ours {t_ours * 1e6:10.1f} us  {peer:34s} {t_peer * 1e6:10.1f} us  "
              f"ratio {t_peer / t_ours:5.2f}", flush=True)

    for h, w in ((72, 96), (1024, 1024)):
        a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        b = np.clip(a.astype(int) + rng.integers(-20, 21, a.shape), 0, 255).astype(np.uint8)
        assert abs(float(ops.psnr(a, b)) - cv2.PSNR(a, b)) < 1e-9
        add("psnr", f"{h}x{w} rgb uint8", "cv2.PSNR", lambda: ops.psnr(a, b), lambda: cv2.PSNR(a, b))
        assert abs(float(ops.ssim(a, b)) - cv2_ssim(a, b)) < 5e-3
        add("ssim", f"{h}x{w} rgb uint8", "OpenCV float32 SSIM", lambda: ops.ssim(a, b), lambda: cv2_ssim(a, b))

    palette = np.array(json.loads((__import__("pathlib").Path(ops.__file__).parents[1] / "data" /
                                   "ade20k_palette.json").read_text())["palette"], dtype=np.uint8)
    t = time.perf_counter()
    table = numpy_lut(palette)
    build = time.perf_counter() - t
    print(f"numpy LUT build (2^24 entries, once): {build * 1e3:.0f} ms", flush=True)
    for noise in (0.0, 8.0):
        for size in (256, 1024):
            img = palette_images(palette, size, noise, rng)
            assert (ops.nearest_palette(img, palette) == lut_gather(img, table)).all()
            add("nearest_palette", f"{size}^2 noise {noise:g}", "numpy LUT gather",
                lambda: ops.nearest_palette(img, palette), lambda: lut_gather(img, table))
    rows.append(dict(op="nearest_palette", size="lut build", peer="numpy LUT", peer_us=build * 1e6))

    for n in (100, 2000):
        x, y = boxes(n, rng), boxes(n, rng)
        xywh = lambda t: np.concatenate([t[:, :2], t[:, 2:] - t[:, :2]], 1)  # noqa: E731
        np.testing.assert_allclose(ops.box_iou(x, y), mask_utils.iou(xywh(x), xywh(y), [0] * n), rtol=1e-12)
        add("box_iou", f"{n}x{n} float64", "pycocotools mask.iou",
            lambda: ops.box_iou(x, y), lambda: mask_utils.iou(xywh(x), xywh(y), [0] * n))
        add("box_iou", f"{n}x{n} float64", "numpy broadcast", lambda: ops.box_iou(x, y), lambda: numpy_iou(x, y))
    return rows


def test_peers(benchmark: Any) -> None:
    benchmark.extra_info["rows"] = benchmark.pedantic(lambda: run(0.2), rounds=1, iterations=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="interleaved timing per comparison")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    rows = run(args.seconds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
