"""Where CoBSAT's images come from: the published layout or CoBSAT-lite.

The release (the reference repository's ``datasets/`` folder, UW-Madison-Lee-Lab/CoBSAT) keeps one
image per (attribute, object) at ``datasets/{attr_type}_{obj}/{attr}_{obj}.jpg`` (raw values:
``3d_car.jpg``, ``park_dog.jpg``) and the captions of a theme in ``datasets/{theme}.csv`` (columns
``image``, ``caption``). Give ``--data-root`` the folder that holds ``datasets/``, or its parent
holding ``cobsat/datasets/``.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from typing import Optional

import numpy as np

from icl.benchmarks.cobsat import lite
from icl.benchmarks.cobsat.vocab import THEMES, Theme, image_relpath


class MissingCaption(ValueError):
    """A theme's captions file has no row for an image: that image's caption-variant item fails,
    the rest of the release is readable (a ValueError, as every other data error here)."""


class LiteImages:
    """CoBSAT-lite (:mod:`icl.benchmarks.cobsat.lite`), drawn in memory."""

    origin = "lite"
    size: Optional[tuple[int, int]] = (lite.SIZE, lite.SIZE)

    def has_theme(self, theme: Theme) -> bool:
        return theme.drawable

    def missing(self, theme: Theme, attribute: str, obj: str) -> Optional[str]:
        return None if theme.drawable else f"CoBSAT-lite cannot draw {theme.name}"

    def image(self, theme: Theme, attribute: str, obj: str) -> np.ndarray:
        return lite.draw(theme, attribute, obj)

    def caption(self, theme: Theme, attribute: str, obj: str) -> str:
        return lite.caption(theme, attribute, obj)

    def describe(self) -> str:
        return "built-in synthetic (CoBSAT-lite, symbolic drawings)"


def release_root(data_root: Path) -> Path:
    """The folder holding ``datasets/``: ``data_root`` itself or ``data_root/cobsat``."""
    for cand in (data_root, data_root / "cobsat"):
        if (cand / "datasets").is_dir():
            return cand
    raise ValueError(f"cobsat: no datasets/ folder under {data_root} or {data_root / 'cobsat'} (the release layout "
                     "is datasets/{attr_type}_{obj}/{attr}_{obj}.jpg; --fast runs the built-in CoBSAT-lite)")


class ReleaseImages:
    """The published layout under ``root`` (the folder holding ``datasets/``)."""

    origin = "release"
    size: Optional[tuple[int, int]] = None

    def __init__(self, root: Path) -> None:
        self.root = release_root(Path(root))
        self._present: dict[str, bool] = {}
        self._captions: dict[str, dict[str, str]] = {}

    def path(self, theme: Theme, attribute: str, obj: str) -> Path:
        return self.root / image_relpath(theme, attribute, obj)

    def has_theme(self, theme: Theme) -> bool:
        return any(self.root.joinpath("datasets").glob(f"{theme.attribute}_*"))

    def missing(self, theme: Theme, attribute: str, obj: str) -> Optional[str]:
        rel = image_relpath(theme, attribute, obj)
        if rel not in self._present:
            self._present[rel] = (self.root / rel).is_file()
        return None if self._present[rel] else f"missing image {rel}"

    def image(self, theme: Theme, attribute: str, obj: str) -> np.ndarray:
        import cv2

        from icl.data.images import decode_image

        img = decode_image(self.path(theme, attribute, obj), cv2.IMREAD_COLOR)
        return np.ascontiguousarray(img[:, :, ::-1])

    def caption(self, theme: Theme, attribute: str, obj: str) -> str:
        if theme.name not in self._captions:
            path = self.root / "datasets" / f"{theme.name}.csv"
            try:
                with open(path, newline="", encoding="utf-8") as f:
                    rows = list(csv.DictReader(f))
            except OSError as exc:
                raise ValueError(f"cobsat: the caption variant needs {path} ({exc.strerror or exc})") from None
            if rows and not {"image", "caption"} <= set(rows[0]):
                raise ValueError(f"cobsat: {path} has no 'image' and 'caption' columns (has {', '.join(rows[0])})")
            self._captions[theme.name] = {r["image"]: r["caption"] for r in rows}
        name = Path(image_relpath(theme, attribute, obj)).name
        try:
            return self._captions[theme.name][name]
        except KeyError:
            raise MissingCaption(f"cobsat: {self.root / 'datasets' / (theme.name + '.csv')} has no caption for "
                                 f"{name}") from None

    def describe(self) -> str:
        listing = sorted(p.relative_to(self.root).as_posix() for p in self.root.joinpath("datasets").rglob("*.jpg"))
        digest = hashlib.sha256("\n".join(listing).encode()).hexdigest()[:16]
        return f"release {self.root} ({len(listing)} images, listing sha256 {digest})"


def open_images(data_root: Optional[Path], use_lite: bool) -> LiteImages | ReleaseImages:
    if use_lite:
        return LiteImages()
    if data_root is None:
        raise ValueError("cobsat: no data: give --data-root (the folder holding the release's datasets/) or run "
                         "--fast (the built-in CoBSAT-lite), or --lite true")
    return ReleaseImages(data_root)


__all__ = ["LiteImages", "MissingCaption", "ReleaseImages", "THEMES", "open_images", "release_root"]
