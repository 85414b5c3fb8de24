"""Raw release files, read defensively: the confined opener every converter uses, the readers
built on it, and the errors that name the bad file.

Raw files are opened through :func:`confined`: a path must stay inside the raw folder of the
conversion in progress once symbolic links are resolved (no absolute path, no ``..`` from an
annotation, no link out), and must be a regular file (a FIFO or device would hang or never end).
Declared sizes are checked before anything is allocated (:data:`RAW_JSON_MAX_BYTES`,
:func:`max_array_bytes`, the image pixel cap of :mod:`icl.data.images`). Messages name the file
and what was wrong, never the file's contents (:func:`describe` elides what a parser quotes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from icl._parse import env_number
from icl.data.images import ImageError, decode_image, display_path

RAW_JSON_MAX_BYTES = 1 << 30  # AP-10K's largest annotation file is ~60 MB
# one array read whole (a NIfTI volume, a .mat variable, a depth TIFF): IXI's are ~80 MB as float64,
# Duke's ~200 MB; a 4 MB .mat declaring 4.4 GB is refused. ICL_CONVERT_MAX_ARRAY_BYTES changes it.
RAW_ARRAY_MAX_BYTES = 2 << 30
_BAD_ID = re.compile(r"[^A-Za-z0-9._-]")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|b'[^']*'")


class ConvertError(Exception):
    """The raw release does not have the layout the converter reads (names what is missing)."""


class UnsafeOutput(ConvertError):
    """OUT_DIR equals, contains or lies inside RAW_DIR: converting would write into the release."""


class RawError(Exception):
    """One raw file is corrupt, missing or disagrees with its partner; the sample is skipped."""

    def __init__(self, path: str | Path, message: str):
        self.path = display_path(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")


def describe(exc: BaseException) -> str:
    """An unexpected exception as a one-line reason that quotes nothing from the file: quoted
    strings (where parsers put the offending text) are elided."""
    text = _QUOTED.sub("'...'", str(exc)).replace("\n", " ")[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def sample_id(*parts: str) -> str:
    """A valid sample id (``[A-Za-z0-9][A-Za-z0-9._-]*``) from raw name parts joined by ``_``
    (a name part that is not UTF-8 keeps its escaped bytes as ``-``)."""
    sid = _BAD_ID.sub("-", "_".join(display_path(p) for p in parts)).lstrip("._-")
    if not sid:
        raise ValueError(f"no usable characters for a sample id in {parts!r}")
    return sid


# -- the confined opener ------------------------------------------------------------------------
_RAW_ROOT: list[Path] = []  # the raw folder of the conversion in progress (set by convert())


class raw_root_set:
    """``with raw_root_set(raw):`` confines every raw read of the block to ``raw``."""

    def __init__(self, raw: Path):
        self.raw = Path(os.path.realpath(raw))

    def __enter__(self) -> Path:
        _RAW_ROOT.append(self.raw)
        return self.raw

    def __exit__(self, *exc: Any) -> None:
        _RAW_ROOT.pop()


def raw_join(base: Path, rel: str, source: Path) -> Path:
    """``base / rel`` for a path written inside an annotation file (``source``): refused when
    absolute, holding ``..``, or empty."""
    text = str(rel)
    parts = text.replace("\\", "/").split("/")
    if not text or text.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", text) or ".." in parts:
        raise RawError(source, "names a file outside the release (an absolute path or '..'); skipped")
    return base / text


def confined(path: Path) -> Path:
    """``path`` when it is a regular file inside the raw folder of the conversion in progress,
    symbolic links resolved; else :class:`RawError` (missing, outside, or not a regular file)."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    if _RAW_ROOT:
        root = _RAW_ROOT[-1]
        if real != root and root not in real.parents:
            raise RawError(path, "lies outside the raw folder (a symbolic link or path leading out); skipped")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise RawError(path, "missing file") from None
    except OSError as exc:
        raise RawError(path, f"cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise RawError(path, "not a regular file (a folder, FIFO or device); skipped")
    return real


def raw_bytes(path: Path, cap: int) -> bytes:
    """The bytes of a confined raw file, refused above ``cap`` bytes before reading."""
    real = confined(path)
    size = os.stat(real).st_size
    if size > cap:
        raise RawError(path, f"is {size:,} bytes, over the limit of {cap:,} for this kind of file")
    with open(real, "rb") as f:
        return f.read(cap + 1)


def max_array_bytes() -> int:
    """The cap on one raw array: ``ICL_CONVERT_MAX_ARRAY_BYTES`` when set, else :data:`RAW_ARRAY_MAX_BYTES`."""
    cap: int = env_number("ICL_CONVERT_MAX_ARRAY_BYTES", RAW_ARRAY_MAX_BYTES)
    return cap


def check_declared(path: Path | str, shape: Iterable[int], itemsize: int, what: str, cap: int | None = None) -> None:
    """:class:`RawError` when an array's declared shape needs more than ``cap`` bytes
    (default :func:`max_array_bytes`)."""
    cap = max_array_bytes() if cap is None else cap
    dims = [int(d) for d in shape]
    total = itemsize
    for d in dims:
        if d < 0:
            raise RawError(path, f"{what} declares a negative dimension {dims}")
        total *= d
    if total > cap:
        raise RawError(path, f"{what} declares shape {dims} ({total:,} bytes), over the limit of {cap:,} "
                             "(ICL_CONVERT_MAX_ARRAY_BYTES)")


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
        raise ConvertError(f"missing {what}: expected {display_path(path)}")
    return path


def _decode8(path: Path, what: str) -> np.ndarray:
    """OpenCV's array of a confined image file, 16-bit scaled to 8 (by 1/257); decoded in memory
    after the header cap and the completeness check (a truncated JPEG is a bad file, not grey)."""
    real = confined(path)
    try:
        img = decode_image(real)
    except ImageError as exc:
        raise RawError(path, str(exc).removeprefix(exc.path + ": ")) from None
    if img.dtype == np.uint16:
        img = ((img.astype(np.uint32) + 128) // 257).astype(np.uint8)
    if img.dtype != np.uint8:
        raise RawError(path, f"expected an 8- or 16-bit {what}, got {img.dtype}")
    return img


def read_image(path: Path) -> np.ndarray:
    """8-bit (or 16-bit, scaled by 1/257) image file -> uint8 [H, W, 3] RGB; grey replicated."""
    import cv2

    img = _decode8(path, "image")
    if img.ndim == 2:
        return np.ascontiguousarray(np.repeat(img[:, :, None], 3, axis=2))
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise RawError(path, f"expected 1, 3 or 4 channels, got shape {img.shape}")
    return np.ascontiguousarray(cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB))


def read_grey(path: Path) -> np.ndarray:
    """A single-channel image file (a mask) -> uint8 [H, W] (colour converted to grey)."""
    import cv2

    img = _decode8(path, "mask")
    return cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2GRAY) if img.ndim == 3 else img


def read_label_png(path: Path) -> np.ndarray:
    """Class-index PNG -> integer [H, W]: the palette indices of a palette ("P") PNG, the values
    of a grey one (PIL, since OpenCV turns palette PNGs into colours). Size-capped and checked
    for truncation from the header first."""
    import io

    from PIL import Image

    from icl.data.images import check_complete, check_size, read_header

    real = confined(path)
    try:
        header = read_header(real)
        check_size(header, real)
        data = raw_bytes(path, 1 << 31)
        check_complete(data, header.format, real)
    except ImageError as exc:
        raise RawError(path, str(exc).removeprefix(exc.path + ": ")) from None
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.mode not in ("P", "L", "I", "I;16"):
                raise RawError(path, f"expected a palette or grey label PNG, got mode {im.mode}")
            return np.asarray(im).astype(np.int64)
    except RawError:
        raise
    except Exception as exc:  # PIL raises many types on a hostile file
        raise RawError(path, f"cannot decode label image ({describe(exc)})") from None


def read_json(path: Path, cap: int = RAW_JSON_MAX_BYTES) -> Any:
    """A JSON file (at most ``cap`` bytes), or :class:`RawError` naming it."""
    data = raw_bytes(path, cap)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise RawError(path, "cannot read JSON (not UTF-8 text)") from None
    except (ValueError, RecursionError) as exc:
        raise RawError(path, f"cannot read JSON ({describe(exc)})") from None


def read_text(path: Path, cap: int = RAW_JSON_MAX_BYTES) -> str:
    """A UTF-8 text file (at most ``cap`` bytes), or :class:`RawError` naming it."""
    try:
        return raw_bytes(path, cap).decode("utf-8")
    except UnicodeDecodeError:
        raise RawError(path, "not UTF-8 text") from None


def same_size(path: Path, got: tuple[int, ...], image: tuple[int, ...], what: str) -> None:
    """:class:`RawError` when an annotation's (h, w) differs from its image's."""
    if tuple(got[:2]) != tuple(image[:2]):
        raise RawError(path, f"{what} is {got[1]}x{got[0]} but its image is {image[1]}x{image[0]}")
