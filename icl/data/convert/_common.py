"""What every converter shares: raw readers that name the bad file, the streaming writer of one
dataset with its filter report and manifest, and sample-id hygiene.

A converter walks the raw release one sample at a time (bounded memory), hands each kept
sample to :meth:`Conversion.add`, each filtered one to :meth:`Conversion.drop` with the
reason, and each unreadable or inconsistent raw file to :meth:`Conversion.bad`; then
:meth:`Conversion.finish` writes ``convert-report.json`` (what the filters removed and why,
which raw files were skipped) and ``manifest.json`` (SHA-256 of every raw file read and every
file written) beside ``meta.json``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from icl.data.dataset import DatasetMeta
from icl.data.writer import DatasetWriter

CONVERTER_VERSION = "convert-1"
REPORT = "convert-report.json"
MANIFEST = "manifest.json"
_BAD_ID = re.compile(r"[^A-Za-z0-9._-]")


class ConvertError(Exception):
    """The raw release does not have the layout the converter reads (names what is missing)."""


class RawError(Exception):
    """One raw file is corrupt, missing or disagrees with its partner; the sample is skipped."""

    def __init__(self, path: str | Path, message: str):
        self.path = str(path)
        self.message = message
        super().__init__(f"{path}: {message}")


def sample_id(*parts: str) -> str:
    """A valid sample id (``[A-Za-z0-9][A-Za-z0-9._-]*``) from raw name parts joined by ``_``."""
    sid = _BAD_ID.sub("-", "_".join(parts)).lstrip("._-")
    if not sid:
        raise ValueError(f"no usable characters for a sample id in {parts!r}")
    return sid


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def need(path: Path, what: str) -> Path:
    """``path`` when it exists, else a :class:`ConvertError` naming it and what it should hold."""
    if not path.exists():
        raise ConvertError(f"missing {what}: expected {path}")
    return path


def read_image(path: Path) -> np.ndarray:
    """8-bit (or 16-bit, scaled by 1/257) image file -> uint8 [H, W, 3] RGB; grey replicated."""
    if not path.is_file():
        raise RawError(path, "missing image")
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise RawError(path, "cannot decode image (corrupt or not an image)")
    if img.dtype == np.uint16:
        img = ((img.astype(np.uint32) + 128) // 257).astype(np.uint8)
    if img.dtype != np.uint8:
        raise RawError(path, f"expected an 8- or 16-bit image, got {img.dtype}")
    if img.ndim == 2:
        return np.ascontiguousarray(np.repeat(img[:, :, None], 3, axis=2))
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise RawError(path, f"expected 1, 3 or 4 channels, got shape {img.shape}")
    return np.ascontiguousarray(cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB))


def read_label_png(path: Path) -> np.ndarray:
    """Class-index PNG -> integer [H, W]: the palette indices of a palette ("P") PNG, the values
    of a grey one (PIL, since OpenCV turns palette PNGs into colours)."""
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise RawError(path, "missing annotation")
    try:
        with Image.open(path) as im:
            if im.mode not in ("P", "L", "I", "I;16"):
                raise RawError(path, f"expected a palette or grey label PNG, got mode {im.mode}")
            return np.asarray(im).astype(np.int64)
    except (OSError, UnidentifiedImageError) as exc:
        raise RawError(path, f"cannot decode label image ({exc})") from exc


def read_json(path: Path) -> Any:
    """A JSON file, or :class:`RawError` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RawError(path, "missing annotation file") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RawError(path, f"cannot read JSON ({exc})") from exc


def same_size(path: Path, got: tuple[int, ...], image: tuple[int, ...], what: str) -> None:
    """:class:`RawError` when an annotation's (h, w) differs from its image's."""
    if tuple(got[:2]) != tuple(image[:2]):
        raise RawError(path, f"{what} is {got[1]}x{got[0]} but its image is {image[1]}x{image[0]}")


@dataclass
class Report:
    """What one conversion did; written as ``convert-report.json``."""

    dataset: str
    kept: int = 0
    dropped: dict[str, str] = field(default_factory=dict)  # sample id -> filter reason
    bad: dict[str, str] = field(default_factory=dict)  # raw file -> what is wrong with it

    def summary(self) -> str:
        reasons = Counter(self.dropped.values())
        parts = [f"{self.dataset}: {self.kept} samples kept"]
        parts += [f"{n} dropped: {reason}" for reason, n in sorted(reasons.items())]
        if self.bad:
            parts.append(f"{len(self.bad)} bad raw files skipped (see {REPORT})")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "kept": self.kept, "dropped_by_reason": dict(Counter(self.dropped.values())),
                "dropped": dict(sorted(self.dropped.items())), "bad_files": dict(sorted(self.bad.items()))}


class Conversion:
    """One dataset being written under ``out_root/meta.name`` (see the module docstring).
    An existing directory of that name is replaced, so a rerun never mixes old samples in."""

    def __init__(self, out_root: Path, meta: DatasetMeta, raw_root: Path, converter: str, settings: dict | None = None):
        self.root = Path(out_root) / meta.name
        if self.root.exists():
            shutil.rmtree(self.root)
        self.meta = meta
        self.raw_root = Path(raw_root)
        self.converter = converter
        self.settings = dict(settings or {})
        self.writer = DatasetWriter(self.root, meta)
        self.report = Report(meta.name)
        self._raw: dict[str, str] = {}
        self._ids: set[str] = set()

    def use(self, *paths: Path) -> None:
        """Record raw files read for the kept or dropped samples (hashed into the manifest)."""
        for p in paths:
            key = self._rel(p)
            if key not in self._raw:
                self._raw[key] = sha256_file(p)

    def add(self, sid: str, image: np.ndarray, raw: tuple[Path, ...] = (), **annotations: Any) -> None:
        """Write one kept sample (``DatasetWriter.add`` arguments); ``raw``: its source files."""
        if sid in self._ids:
            raise ConvertError(f"two raw samples map to the sample id {sid!r} in {self.meta.name}")
        self._ids.add(sid)
        self.writer.add(sid, image, **annotations)
        self.use(*raw)
        self.report.kept += 1

    def drop(self, sid: str, reason: str, raw: tuple[Path, ...] = ()) -> None:
        """A sample the paper's filters remove, with the reason."""
        self.report.dropped[sid] = reason
        self.use(*raw)

    def bad(self, err: RawError) -> None:
        """A raw file that cannot be used: reported by file, the sample skipped."""
        self.report.bad[self._rel(Path(err.path))] = err.message

    def ids(self) -> list[str]:
        """Kept sample ids, sorted."""
        return sorted(self._ids)

    def set_meta(self, **changes: Any) -> None:
        """Change ``meta.json`` fields known only after the samples (e.g. a data-derived depth range)."""
        self.meta = replace(self.meta, **changes)
        self.writer.write_meta(self.meta)

    def finish(self) -> Report:
        """Write the report and the manifest; returns the report."""
        if self.report.kept == 0:
            raise ConvertError(f"{self.meta.name}: no sample survived conversion ({self.report.summary()})")
        (self.root / REPORT).write_text(json.dumps(self.report.to_json(), indent=1, sort_keys=True) + "\n")
        outputs = {p.relative_to(self.root).as_posix(): sha256_file(p)
                   for p in sorted(self.root.rglob("*")) if p.is_file() and p.name != MANIFEST}
        manifest = {"converter": self.converter, "converter_version": CONVERTER_VERSION, "dataset": self.meta.name,
                    "settings": self.settings, "raw_root": str(self.raw_root.resolve()),
                    "raw_files": dict(sorted(self._raw.items())), "files": outputs}
        (self.root / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        return self.report

    def _rel(self, path: Path) -> str:
        try:
            return Path(path).resolve().relative_to(self.raw_root.resolve()).as_posix()
        except ValueError:
            return str(path)
