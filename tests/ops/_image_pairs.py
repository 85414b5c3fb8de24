"""Deterministic image pairs shared by the PSNR and SSIM tests (real photos and distortions)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import scipy.fft
import scipy.ndimage
import skimage.data

IMAGES = ("astronaut", "coffee", "chelsea")
DISTORTIONS = ("noise", "blur", "jpeg")


def _jpeg_like(img: np.ndarray, step: float = 40.0) -> np.ndarray:
    """8x8 block DCT with uniform coefficient quantisation (edge-padded to whole blocks)."""
    h, w, c = img.shape
    ph, pw = -h % 8, -w % 8
    x = np.pad(img.astype(np.float64) - 128.0, ((0, ph), (0, pw), (0, 0)), mode="edge")
    blocks = x.reshape((h + ph) // 8, 8, (w + pw) // 8, 8, c)
    coef = scipy.fft.dctn(blocks, axes=(1, 3), norm="ortho")
    rec = scipy.fft.idctn(np.round(coef / step) * step, axes=(1, 3), norm="ortho")
    out = rec.reshape(h + ph, w + pw, c)[:h, :w] + 128.0
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


@lru_cache(maxsize=None)
def real_pair(image: str, distortion: str) -> tuple[np.ndarray, np.ndarray]:
    """``(clean, distorted)`` uint8 [H, W, 3] from skimage.data, distorted deterministically."""
    clean = getattr(skimage.data, image)()
    if distortion == "noise":
        noise = np.random.default_rng(7).normal(0.0, 20.0, clean.shape)
        bad = np.clip(np.round(clean + noise), 0, 255).astype(np.uint8)
    elif distortion == "blur":
        bad = np.round(scipy.ndimage.gaussian_filter(clean.astype(np.float64), sigma=(2, 2, 0)))
        bad = bad.astype(np.uint8)
    else:
        bad = _jpeg_like(clean)
    return clean, bad


def random_pair(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, spread: int = 60):
    """Correlated random uint8 pair (b = a + uniform noise) as ``dtype``: floats scaled to [0, 1]."""
    a = rng.integers(0, 256, shape)
    b = np.clip(a + rng.integers(-spread, spread + 1, shape), 0, 255)
    if dtype == "uint8":
        return a.astype(np.uint8), b.astype(np.uint8)
    return (a / 255.0).astype(dtype), (b / 255.0).astype(dtype)
