"""Helpers of the converter tests: writing the files of a fabricated raw release."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np


def rng() -> np.random.Generator:
    return np.random.default_rng(20240601)


def write_rgb(path: Path, rgb: np.ndarray) -> Path:
    """Write an RGB uint8 array with OpenCV (PNG lossless; JPEG as the release does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    params = [cv2.IMWRITE_JPEG_QUALITY, 100] if path.suffix.lower() in (".jpg", ".jpeg") else []
    assert cv2.imwrite(str(path), cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR), params)
    return path


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def report_of(out: Path, name: str) -> dict:
    return json.loads((out / name / "convert-report.json").read_text())
