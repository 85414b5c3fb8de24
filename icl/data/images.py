"""Image files read defensively: size from the header before any decoding, truncation caught.

A valid 389 KB PNG can claim 20000 x 20000 pixels and take 22 GB once decoded, and a JPEG cut
short decodes "successfully" into grey (libjpeg only warns). So every image is first checked
from its header bytes (:func:`read_header`: PNG, JPEG, BMP, GIF, WebP, TIFF; anything else is
refused, since its size cannot be known without decoding) against a pixel cap
(:data:`DEFAULT_MAX_PIXELS`, 40 megapixels; ``ICL_MAX_IMAGE_PIXELS`` or the ``max_pixels``
argument change it), then its structure is checked for completeness (PNG: every chunk whole,
CRCs right, IEND present; JPEG: every segment and scan whole up to EOI), and only then decoded
with OpenCV. Failures raise :class:`ImageError`, which names the file.

``.npy`` arrays get the same treatment: :func:`read_npy_header` reads shape and dtype without
loading the data, so a caller can compare them with the image first.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Optional

import numpy as np

from icl._parse import env_number

DEFAULT_MAX_PIXELS = 40_000_000
_ENV_MAX_PIXELS = "ICL_MAX_IMAGE_PIXELS"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# the largest .npy header numpy itself writes is far below this; a bigger one is hostile
_MAX_NPY_HEADER = 1 << 16


class ImageError(ValueError):
    """An image (or array) file is unreadable, truncated, of unknown format or too large."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = display_path(path)
        super().__init__(f"{self.path}: {message}")


def display_path(path: str | Path) -> str:
    """``path`` as text that always encodes to UTF-8 (undecodable bytes of a file name become
    ``\\xNN`` escapes), safe for messages, JSON and SQLite."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def max_pixels_default() -> int:
    """The pixel cap in force: ``ICL_MAX_IMAGE_PIXELS`` when set (a positive integer), else 40 MP."""
    cap: int = env_number(_ENV_MAX_PIXELS, DEFAULT_MAX_PIXELS)
    return cap


@dataclass(frozen=True)
class ImageHeader:
    """What the header says: ``format`` ("png", "jpeg", ...), ``width``, ``height``."""

    format: str
    width: int
    height: int

    @property
    def pixels(self) -> int:
        return self.width * self.height


def check_regular(path: str | Path) -> None:
    """:class:`ImageError` unless ``path`` is a regular file: a FIFO would block the reader
    forever, a device never end."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ImageError(path, f"cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ImageError(path, "not a regular file (a folder, FIFO or device)")


def read_header(path: str | Path) -> ImageHeader:
    """Format and size of an image file from its first bytes (no decoding); raises :class:`ImageError`."""
    check_regular(path)
    try:
        with open(path, "rb") as f:
            head = f.read(32)
            header = _header(f, head, path)
    except OSError as exc:
        raise ImageError(path, f"cannot read ({exc.strerror or exc})") from None
    if header.width < 1 or header.height < 1:
        raise ImageError(path, f"header claims an empty {header.width}x{header.height} image")
    return header


def _header(f: BinaryIO, head: bytes, path: str | Path) -> ImageHeader:
    if head[:8] == _PNG_MAGIC:
        if head[12:16] != b"IHDR" or len(head) < 24:
            raise ImageError(path, "PNG without an IHDR chunk first")
        w, h = struct.unpack(">II", head[16:24])
        return ImageHeader("png", w, h)
    if head[:3] == b"\xff\xd8\xff":
        f.seek(2)
        size = _jpeg_frame_size(f)
        if size is None:
            raise ImageError(path, "JPEG without a readable frame header (SOF)")
        return ImageHeader("jpeg", size[0], size[1])
    if head[:2] == b"BM" and len(head) >= 26:
        w, h = struct.unpack("<ii", head[18:26])
        return ImageHeader("bmp", abs(w), abs(h))
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        w, h = struct.unpack("<HH", head[6:10])
        return ImageHeader("gif", w, h)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp_header(head, path)
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return _tiff_header(path)
    raise ImageError(path, "unknown image format (expected PNG, JPEG, BMP, GIF, WebP or TIFF)")


def _jpeg_frame_size(f: BinaryIO) -> Optional[tuple[int, int]]:
    """``(width, height)`` from the first start-of-frame segment, walking marker segments."""
    while True:
        if f.read(1) != b"\xff":
            return None
        marker = f.read(1)
        while marker == b"\xff":  # fill bytes
            marker = f.read(1)
        if not marker:
            return None
        if marker == b"\x01" or b"\xd0" <= marker <= b"\xd9":  # markers without a length
            continue
        length_bytes = f.read(2)
        if len(length_bytes) < 2:
            return None
        # SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC)
        if b"\xc0" <= marker <= b"\xcf" and marker not in (b"\xc4", b"\xc8", b"\xcc"):
            data = f.read(5)
            if len(data) < 5:
                return None
            h, w = struct.unpack(">HH", data[1:5])
            return int(w), int(h)
        f.seek(struct.unpack(">H", length_bytes)[0] - 2, 1)


def _webp_header(head: bytes, path: str | Path) -> ImageHeader:
    chunk = head[12:16]
    if chunk == b"VP8 " and len(head) >= 30:
        w, h = struct.unpack("<HH", head[26:30])
        return ImageHeader("webp", w & 0x3FFF, h & 0x3FFF)
    if chunk == b"VP8L" and len(head) >= 25:
        bits = int.from_bytes(head[21:25], "little")
        return ImageHeader("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(head) >= 30:
        return ImageHeader("webp", int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1)
    raise ImageError(path, "WebP without a readable VP8/VP8L/VP8X header")


def _tiff_header(path: str | Path) -> ImageHeader:
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            page = tif.pages.first
            return ImageHeader("tiff", int(page.imagewidth), int(page.imagelength))
    except (tifffile.TiffFileError, OSError, ValueError, IndexError, struct.error) as exc:
        raise ImageError(path, f"unreadable TIFF header ({exc})") from None


def check_size(header: ImageHeader, path: str | Path, max_pixels: Optional[int] = None) -> None:
    """Raise :class:`ImageError` when the header's pixel count exceeds the cap."""
    cap = max_pixels_default() if max_pixels is None else max_pixels
    if header.pixels > cap:
        raise ImageError(path, f"{header.format.upper()} header claims {header.width}x{header.height} = "
                               f"{header.pixels:,} pixels, over the limit of {cap:,} (raise it with "
                               f"{_ENV_MAX_PIXELS} or max_pixels if the image is genuine)")


def check_complete(data: bytes, fmt: str, path: str | Path) -> None:
    """Raise :class:`ImageError` when a PNG or JPEG byte string is truncated or its PNG CRCs fail."""
    if fmt == "png":
        _check_png(data, path)
    elif fmt == "jpeg":
        _check_jpeg(data, path)


def _check_png(data: bytes, path: str | Path) -> None:
    pos, n = 8, len(data)
    while True:
        if pos + 8 > n:
            raise ImageError(path, f"truncated PNG: ends at byte {n} before the IEND chunk")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        end = pos + 12 + length
        if end > n:
            raise ImageError(path, f"truncated PNG: chunk {kind!r} at byte {pos} needs {length} bytes, the file ends first")
        crc = struct.unpack(">I", data[end - 4:end])[0]
        if zlib.crc32(data[pos + 4:end - 4]) != crc:
            raise ImageError(path, f"corrupt PNG: CRC mismatch in chunk {kind!r} at byte {pos}")
        if kind == b"IEND":
            return
        pos = end


def _check_jpeg(data: bytes, path: str | Path) -> None:
    pos, n = 2, len(data)
    markers: Optional[np.ndarray] = None
    while True:
        if pos + 2 > n:
            raise ImageError(path, f"truncated JPEG: ends at byte {n} before the end-of-image marker")
        if data[pos] != 0xFF:
            raise ImageError(path, f"corrupt JPEG: expected a marker at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0xD9:  # EOI
            return
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:
            pos += 2
            continue
        if pos + 4 > n:
            raise ImageError(path, f"truncated JPEG: segment header at byte {pos} cut short")
        end = pos + 2 + struct.unpack(">H", data[pos + 2:pos + 4])[0]
        if end > n:
            raise ImageError(path, f"truncated JPEG: segment 0xFF{marker:02X} at byte {pos} runs past the end")
        pos = end
        if marker == 0xDA:  # start of scan: entropy-coded data runs up to the next real marker
            if markers is None:
                markers = _marker_offsets(data)
            i = int(np.searchsorted(markers, pos))
            if i == len(markers):
                raise ImageError(path, "truncated JPEG: the image data ends before the end-of-image marker")
            pos = int(markers[i])


def _marker_offsets(data: bytes) -> np.ndarray:
    """Sorted offsets of every 0xFF followed by a byte other than 00 (stuffing), D0-D7 (restart
    markers) or FF (fill): inside entropy-coded data, only a real marker looks like that."""
    arr = np.frombuffer(data, np.uint8)
    ff = np.flatnonzero(arr[:-1] == 0xFF)
    nxt = arr[ff + 1]
    real = (nxt != 0x00) & (nxt != 0xFF) & ((nxt < 0xD0) | (nxt > 0xD7))
    return ff[real]


def decode_image(path: str | Path, flags: Optional[int] = None, max_pixels: Optional[int] = None) -> np.ndarray:
    """Decode an image file with OpenCV after the header, size-cap and completeness checks.

    ``flags``: ``cv2.imread`` flags (default ``IMREAD_UNCHANGED``); EXIF orientation is always
    ignored, so a decoded image has the size its header states. Returns OpenCV's array (BGR or
    BGRA channel order, any dtype). Raises :class:`ImageError`.
    """
    import cv2

    header = read_header(path)
    check_size(header, path, max_pixels)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ImageError(path, f"cannot read ({exc.strerror or exc})") from None
    check_complete(data, header.format, path)
    flags = cv2.IMREAD_UNCHANGED if flags is None else flags
    if flags != cv2.IMREAD_UNCHANGED:
        flags |= cv2.IMREAD_IGNORE_ORIENTATION
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if img is None:
        raise ImageError(path, f"cannot decode {header.format.upper()} (corrupt or not an image)")
    if img.shape[:2] != (header.height, header.width):
        raise ImageError(path, f"decoded to {img.shape[1]}x{img.shape[0]}, the header says {header.width}x{header.height}")
    return img


@dataclass(frozen=True)
class NpyHeader:
    """``shape``, ``dtype`` and ``fortran_order`` of a ``.npy`` file, from its header alone."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool


def read_npy_header(path: str | Path) -> NpyHeader:
    """Read and check a ``.npy`` header (no data); also check the file holds all the data it claims."""
    fmt = np.lib.format
    check_regular(path)
    try:
        with open(path, "rb") as f:
            try:
                major, _minor = fmt.read_magic(f)
                if major not in (1, 2, 3):
                    raise ValueError(f"unsupported .npy version {major}")
                read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
                shape, fortran, dtype = read(f, max_header_size=_MAX_NPY_HEADER)
            except Exception as exc:  # numpy parses the header as a Python literal: any failure is a bad header
                raise ImageError(path, f"bad .npy header ({type(exc).__name__}: {str(exc)[:200]})") from None
            data_start = f.tell()
            f.seek(0, os.SEEK_END)
            size = f.tell()
    except OSError as exc:
        raise ImageError(path, f"cannot read ({exc.strerror or exc})") from None
    if dtype.hasobject:
        raise ImageError(path, f".npy holds Python objects ({dtype}); only numeric arrays are read")
    count = 1
    for dim in shape:
        count *= int(dim)
    need = count * dtype.itemsize
    if size - data_start < need:
        raise ImageError(path, f"truncated .npy: shape {shape} {dtype} needs {need} data bytes, the file has "
                               f"{size - data_start}")
    return NpyHeader(tuple(int(d) for d in shape), dtype, bool(fortran))


def load_npy(path: str | Path, header: Optional[NpyHeader] = None) -> np.ndarray:
    """Load a ``.npy`` file whose header has been checked (``allow_pickle=False``)."""
    header = read_npy_header(path) if header is None else header
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ImageError(path, f"cannot read .npy ({exc})") from None
