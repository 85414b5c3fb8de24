"""Converter throughput before and after, on fabricated releases of DeepCrack's and ATLANTIS's sizes.

``python bench/bench_convert.py [--before REV] [--deepcrack N] [--atlantis N]`` builds each release
in its published layout (DeepCrack: ``train_img/*.jpg`` 544x384 + ``train_lab/*.png``; ATLANTIS:
``images/train/<waterbody>/*.jpg`` 1024x768 + ``masks/train/<waterbody>/*.png`` label maps),
converts it with ``python -m icl.data convert`` from the code at ``REV`` (default: the commit
before the converter rework, 35d1349; checked out with ``git archive`` into a temporary folder)
and from this checkout, and prints images/s of each (wall time of the whole command, imports
included), the CPU seconds it used (the fair measure on a shared, loaded machine) and the ratios. It also times the two ways of storing a JPEG source: re-encoded as a
PNG at zlib level 3 (before) or 1, and kept as its own bytes (after).

The images are smooth photographs-like fields with fine texture, not noise (noise makes PNG
encoding unrealistically slow); the work per image is what a real release costs.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _photo(gen: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A smooth colour field with fine texture (compresses like a photograph)."""
    base = cv2.resize(gen.integers(0, 256, (h // 32 + 2, w // 32 + 2, 3), dtype=np.uint8), (w, h),
                      interpolation=cv2.INTER_CUBIC)
    texture = gen.normal(0, 6, (h, w, 1))
    return np.clip(base.astype(np.float64) + texture, 0, 255).astype(np.uint8)


def deepcrack(raw: Path, n: int) -> Path:
    gen = np.random.default_rng(1)
    (raw / "train_img").mkdir(parents=True)
    (raw / "train_lab").mkdir(parents=True)
    for i in range(n):
        cv2.imwrite(str(raw / "train_img" / f"{i:05d}.jpg"), _photo(gen, 384, 544), [cv2.IMWRITE_JPEG_QUALITY, 95])
        mask = np.zeros((384, 544), np.uint8)
        pts = np.cumsum(gen.integers(-6, 7, (60, 2)), axis=0) + [272, 192]
        cv2.polylines(mask, [pts.astype(np.int32)], False, 255, 3)
        cv2.imwrite(str(raw / "train_lab" / f"{i:05d}.png"), mask)
    return raw


def atlantis(raw: Path, n: int) -> Path:
    gen = np.random.default_rng(2)
    for i in range(n):
        water = ("sea", "river", "lake", "flood")[i % 4]
        img_dir, mask_dir = raw / "images" / "train" / water, raw / "masks" / "train" / water
        img_dir.mkdir(parents=True, exist_ok=True)
        mask_dir.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(img_dir / f"{1000 + i}.jpg"), _photo(gen, 768, 1024), [cv2.IMWRITE_JPEG_QUALITY, 95])
        labels = cv2.resize(gen.integers(1, 57, (6, 8), dtype=np.uint8), (1024, 768), interpolation=cv2.INTER_NEAREST)
        cv2.imwrite(str(mask_dir / f"{1000 + i}.png"), labels)
    return raw


def _checkout(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev, "icl"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def _convert(code: Path, name: str, raw: Path, out: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child, images kept)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "icl.data", "convert", name, str(raw), str(out)], cwd=code, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{name} at {code}: {done.stderr.strip()}")
    kept = sum(1 for _ in (out / name / "images").iterdir())
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return seconds, cpu, kept


def _encodings(raw: Path) -> list[str]:
    jpegs = sorted((raw / "train_img").glob("*.jpg"))[:20]
    lines = []
    for label, level in (("PNG level 3 (before)", 3), ("PNG level 1", 1)):
        start, size = time.perf_counter(), 0
        for p in jpegs:
            size += len(cv2.imencode(".png", cv2.imread(str(p)), [cv2.IMWRITE_PNG_COMPRESSION, level])[1])
        ms = (time.perf_counter() - start) / len(jpegs) * 1e3
        lines.append(f"  {label}: {ms:.1f} ms and {size / len(jpegs) / 1024:.0f} KiB per 544x384 image")
    start, size = time.perf_counter(), 0
    for p in jpegs:
        size += len(p.read_bytes())
    ms = (time.perf_counter() - start) / len(jpegs) * 1e3
    lines.append(f"  JPEG kept as its bytes (after): {ms:.2f} ms and {size / len(jpegs) / 1024:.0f} KiB per image")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="35d1349", help="git revision of the 'before' converter")
    parser.add_argument("--deepcrack", type=int, default=120, help="images of the DeepCrack-sized release")
    parser.add_argument("--atlantis", type=int, default=40, help="images of the ATLANTIS-sized release")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        before = _checkout(args.before, tmp / "before")
        releases = {"deepcrack": deepcrack(tmp / "raw-deepcrack", args.deepcrack),
                    "atlantis": atlantis(tmp / "raw-atlantis", args.atlantis)}
        print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}; before = {args.before}, "
              "after = this checkout (wall time includes ~1 s of imports)")
        for name, raw in releases.items():
            t0, c0, n0 = _convert(before, name, raw, tmp / f"out-before-{name}")
            t1, c1, n1 = _convert(REPO, name, raw, tmp / f"out-after-{name}")
            print(f"{name}: before {n0 / t0:.1f} images/s ({n0} in {t0:.1f} s, {c0:.1f} CPU s), after "
                  f"{n1 / t1:.1f} images/s ({n1} in {t1:.1f} s, {c1:.1f} CPU s): {t0 / t1 * n1 / n0:.2f}x wall, "
                  f"{c0 / c1 * n1 / n0:.2f}x CPU")
        print("storing a JPEG source image:")
        for line in _encodings(releases["deepcrack"]):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
