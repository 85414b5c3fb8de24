"""Load and validate a best50 package directory (PROTOCOL §2) and build model requests.

Layout: ``inputs/inputs_k{K}.jsonl`` (K = 1, 2, 4, 8 in the published package), one sample per
line; image paths are relative to the package directory. Every field is checked:

- ``sample_id``, ``class``, ``prompt``, ``prompt_template``, ``support_stem``: non-empty
  strings (``prompt_template`` may be empty); ``sample_id`` unique within its file.
- ``k``: integer equal to the K of its file.
- ``support_image``, ``query_image``: package-relative paths to readable image files.
- ``support_image_size``, ``query_image_size``: ``[width, height]``, equal to the file's.
- ``support_boxes_pixel`` (exactly K boxes), ``query_gt_boxes_pixel`` (any number): lists of
  ``[x0, y0, x1, y1]`` with ``0 <= x0 < x1 <= width`` and ``0 <= y0 < y1 <= height``.
- ``support_boxes_tokens``, ``query_gt_boxes_tokens``: one grid box per pixel box, same order,
  each a ``<bbox_start><xA><yB><xC><yD><bbox_end>`` string or four integers, within one grid
  step (``size / 1024`` pixels) of its pixel box on every side.

Image sizes come from the PNG/JPEG header (no decoding), else from ``cv2.imread``; EXIF
orientation is ignored there and when images are loaded for a model, so both agree.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from icl.benchmarks.best50._fields import (FieldError, get_boxes, get_int, get_size, get_str, get_text,
                                           get_token_boxes, json_lines)
from icl.benchmarks.best50.parse import GRID

_INPUTS = re.compile(r"inputs_k([0-9]+)\.jsonl")
MAX_ERRORS_SHOWN = 30


def format_problems(header: str, problems: list[str]) -> str:
    """``header`` then one problem per line, the first ``MAX_ERRORS_SHOWN`` of them."""
    shown = problems[:MAX_ERRORS_SHOWN]
    more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    return f"{header}:\n  " + "\n  ".join(shown) + more


class PackageError(ValueError):
    """A package directory is missing files or holds invalid lines; lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(format_problems(f"invalid best50 package ({len(problems)} problem(s))", problems))
        self.problems = problems


@dataclass(frozen=True)
class DetectionRequest:
    """What a vision-language adapter receives: ``images`` (RGB uint8 ``[H, W, 3]``: the support
    image with its red boxes, then the query image) and the text ``prompt``. Adapters answer text."""

    sample_id: str
    images: list
    prompt: str


@dataclass(frozen=True)
class Sample:
    """One validated line of ``inputs_k{K}.jsonl`` (image paths resolved, sizes ``(w, h)``)."""

    sample_id: str
    cls: str
    k: int
    prompt: str
    prompt_template: str
    support_image: Path
    support_image_size: tuple[int, int]
    support_boxes_pixel: np.ndarray = field(repr=False)
    support_boxes_tokens: tuple = field(repr=False)
    query_image: Path
    query_image_size: tuple[int, int]
    query_gt_boxes_pixel: np.ndarray = field(repr=False)
    query_gt_boxes_tokens: tuple = field(repr=False)
    support_stem: str
    line: int


@dataclass
class Package:
    root: Path
    samples: dict[int, list[Sample]]
    sha256: str
    _index: Optional[dict] = field(default=None, repr=False, compare=False)

    @property
    def ks(self) -> list[int]:
        return sorted(self.samples)

    @property
    def classes(self) -> list[str]:
        return sorted({s.cls for ss in self.samples.values() for s in ss})

    def find(self, k: int, sample_id: str) -> Optional[Sample]:
        """The sample ``sample_id`` of ``inputs_k{k}.jsonl``, or None."""
        if self._index is None:
            self._index = {(s.k, s.sample_id): s for ss in self.samples.values() for s in ss}
        return self._index.get((k, sample_id))


def image_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` of an image file, from its header when PNG or JPEG."""
    with open(path, "rb") as f:
        head = f.read(32)
        if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
            w, h = struct.unpack(">II", head[16:24])
            return int(w), int(h)
        if head[:2] == b"\xff\xd8":
            f.seek(2)
            size = _jpeg_size(f)
            if size is not None:
                return size
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED | cv2.IMREAD_IGNORE_ORIENTATION)
    if img is None:
        raise ValueError(f"{path}: not a readable image")
    return int(img.shape[1]), int(img.shape[0])


def _jpeg_size(f: Any) -> Optional[tuple[int, int]]:
    # Walk the marker segments up to the first start-of-frame (SOF0..SOF15 except DHT/JPG/DAC).
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
        if b"\xc0" <= marker <= b"\xcf" and marker not in (b"\xc4", b"\xc8", b"\xcc"):
            data = f.read(5)
            if len(data) < 5:
                return None
            h, w = struct.unpack(">HH", data[1:5])
            return int(w), int(h)
        f.seek(struct.unpack(">H", length_bytes)[0] - 2, 1)


def load_image(path: Path) -> np.ndarray:
    """RGB uint8 ``[H, W, 3]`` (EXIF orientation ignored, like the size check)."""
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if img is None:
        raise ValueError(f"{path}: not a readable image")
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def build_request(sample: Sample) -> DetectionRequest:
    """The message of one sample: ``[support image, query image, prompt]``."""
    return DetectionRequest(sample.sample_id, [load_image(sample.support_image), load_image(sample.query_image)],
                            sample.prompt)


def _check_boxes_in(boxes: np.ndarray, size: tuple[int, int], name: str) -> None:
    w, h = size
    for i, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
        if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
            raise FieldError(name, f"box {i} {[x0, y0, x1, y1]} lies outside the {w}x{h} image")


def _check_tokens(tokens: list, pixels: np.ndarray, size: tuple[int, int], name: str) -> None:
    if len(tokens) != len(pixels):
        raise FieldError(name, f"expected {len(pixels)} boxes (one per pixel box), got {len(tokens)}")
    scale = np.array([size[0], size[1], size[0], size[1]], dtype=np.float64)
    for i, (tok, px) in enumerate(zip(tokens, pixels)):
        err = np.abs(np.asarray(tok, dtype=np.float64) / GRID * scale - px)
        if (err > scale / GRID + 1e-6).any():
            raise FieldError(name, f"box {i} {list(tok)} does not match pixel box {px.tolist()} within one grid step")


def _sample(obj: dict, k: int, root: Path, line: int, sizes: dict[Path, tuple[int, int]]) -> Sample:
    got_k = get_int(obj, "k")
    if got_k != k:
        raise FieldError("k", f"expected {k} (the K of this file), got {got_k}")
    images = {}
    for name in ("support_image", "query_image"):
        rel = get_str(obj, name)
        path = root / rel
        if Path(rel).is_absolute():
            raise FieldError(name, f"expected a package-relative path, got {rel!r}")
        if not path.is_file():
            raise FieldError(name, f"{rel!r} does not exist in the package")
        claimed = get_size(obj, name + "_size")
        if path not in sizes:
            try:
                sizes[path] = image_size(path)
            except (OSError, ValueError) as exc:
                raise FieldError(name, str(exc)) from None
        if sizes[path] != claimed:
            raise FieldError(name + "_size", f"says {list(claimed)} but {rel} is {list(sizes[path])} (width, height)")
        images[name] = (path, claimed)
    support = get_boxes(obj, "support_boxes_pixel", positive=True)
    if len(support) != k:
        raise FieldError("support_boxes_pixel", f"expected {k} boxes (K), got {len(support)}")
    gt = get_boxes(obj, "query_gt_boxes_pixel", positive=True)
    _check_boxes_in(support, images["support_image"][1], "support_boxes_pixel")
    _check_boxes_in(gt, images["query_image"][1], "query_gt_boxes_pixel")
    support_tok = get_token_boxes(obj, "support_boxes_tokens")
    gt_tok = get_token_boxes(obj, "query_gt_boxes_tokens")
    _check_tokens(support_tok, support, images["support_image"][1], "support_boxes_tokens")
    _check_tokens(gt_tok, gt, images["query_image"][1], "query_gt_boxes_tokens")
    return Sample(
        sample_id=get_str(obj, "sample_id"), cls=get_str(obj, "class"), k=k, prompt=get_str(obj, "prompt"),
        prompt_template=get_text(obj, "prompt_template"),
        support_image=images["support_image"][0], support_image_size=images["support_image"][1],
        support_boxes_pixel=support, support_boxes_tokens=tuple(support_tok),
        query_image=images["query_image"][0], query_image_size=images["query_image"][1],
        query_gt_boxes_pixel=gt, query_gt_boxes_tokens=tuple(gt_tok),
        support_stem=get_str(obj, "support_stem"), line=line)


def _hash(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def load_package(root: str | Path) -> Package:
    """Read and validate every ``inputs/inputs_k*.jsonl`` of ``root``; raise :class:`PackageError`.

    ``sha256`` covers the inputs files and every image they reference (path and content).
    """
    root = Path(root)
    inputs = root / "inputs"
    files = sorted(p for p in inputs.glob("inputs_k*.jsonl") if _INPUTS.fullmatch(p.name)) if inputs.is_dir() else []
    if not files:
        raise PackageError([f"{inputs}: no inputs_k{{K}}.jsonl files (expected inputs_k1.jsonl ... inputs_k8.jsonl)"])
    problems: list[str] = []
    samples: dict[int, list[Sample]] = {}
    sizes: dict[Path, tuple[int, int]] = {}
    for path in files:
        k = int(_INPUTS.fullmatch(path.name).group(1))
        rel = path.relative_to(root).as_posix()
        seen: dict[str, int] = {}
        rows = samples.setdefault(k, [])
        for line, obj, error in json_lines(path):
            if error:
                problems.append(f"{rel}:{line}: {error}")
                continue
            try:
                s = _sample(obj, k, root, line, sizes)
            except FieldError as exc:
                problems.append(f"{rel}:{line}: {exc}")
                continue
            if s.sample_id in seen:
                problems.append(f"{rel}:{line}: sample_id {s.sample_id!r} repeats line {seen[s.sample_id]}")
                continue
            seen[s.sample_id] = line
            rows.append(s)
        if not rows and not problems:
            problems.append(f"{rel}: holds no samples")
    if problems:
        raise PackageError(problems)
    return Package(root=root, samples=samples, sha256=_hash(root, files + list(sizes)))
