"""Real photographs bundled with scikit-image (no download), cropped to a fixed non-square size."""

from __future__ import annotations

import cv2
import numpy as np

from icl.data.dataset import DataError

# colour photographs shipped inside the scikit-image wheel (``cat`` is ``chelsea`` again)
PHOTOS = (
    "astronaut",
    "chelsea",
    "coffee",
    "colorwheel",
    "hubble_deep_field",
    "immunohistochemistry",
    "motorcycle_left",
    "motorcycle_right",
    "retina",
    "rocket",
)


def load_photo(name: str) -> np.ndarray:
    """uint8 [H, W, 3] RGB photograph ``name`` from ``skimage.data``."""
    try:
        from skimage import data
    except ImportError as exc:
        raise DataError("the built-in 'photos' dataset needs scikit-image: pip install scikit-image") from exc
    if name.startswith("motorcycle_"):
        left, right, _ = data.stereo_motorcycle()
        img = left if name.endswith("left") else right
    else:
        img = getattr(data, name)()
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] < 3:
        raise DataError(f"skimage.data.{name} is not an 8-bit colour image ({img.dtype}, {img.shape})")
    return np.ascontiguousarray(img[:, :, :3])


def crop(photo: np.ndarray, gen: np.random.Generator, h: int, w: int, zoom: float) -> np.ndarray:
    """A random crop with aspect ``w / h`` covering ``zoom`` of the largest such crop, resized to ``(h, w)``."""
    ph, pw = photo.shape[:2]
    scale = min(ph / h, pw / w) * zoom
    ch, cw = max(1, int(h * scale)), max(1, int(w * scale))
    y0 = int(gen.integers(0, ph - ch + 1))
    x0 = int(gen.integers(0, pw - cw + 1))
    window = photo[y0 : y0 + ch, x0 : x0 + cw]
    return np.ascontiguousarray(cv2.resize(window, (w, h), interpolation=cv2.INTER_AREA))
