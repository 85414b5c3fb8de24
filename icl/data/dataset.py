"""Datasets in the canonical on-disk format (docs/data-format.md) and their validating loader.

A dataset is a directory with ``meta.json`` and one file per sample and annotation kind.
:func:`load_dataset` checks the metadata and lists the samples; a problem of one sample (a
missing annotation file, a file name that is not a valid sample id, two images with one id) is
recorded in :attr:`Dataset.problems` and fails only that sample. :meth:`Dataset.load` decodes
and validates one sample's files and raises :class:`DataError` naming the file and the sample
for anything that goes wrong while reading them, whatever the underlying exception was (its
type is kept in ``DataError.cause``): images are size-checked from their headers and checked
for truncation before decoding (:mod:`icl.data.images`), annotation images and ``.npy`` arrays
are checked against the image's size from their headers before they are decoded.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import cv2
import numpy as np

from icl._text import bad_text
from icl.data.images import (ImageError, check_complete, check_size, decode_image, display_path, load_npy,
                             read_header, read_npy_header)

FORMAT = "icl-dataset/1"
VOID = 255
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_JSON_MAX_BYTES = 64 << 20  # a sample's keypoints or boxes, or meta.json

# The annotation parts each task reads (the format's contract; icl.benchmarks.vibe.tasks relies on it).
# "paired" means paired/<kind>/<id>.png with kind = meta.pairs[task].
TASK_PARTS: dict[str, tuple[str, ...]] = {
    "segmentation": ("segmentation",),
    "edges": ("edges",),
    "depth": ("depth",),
    "detection": ("boxes",),
    "keypoints": ("keypoints",),
    "inpainting": (),
    "denoising": (),
    "colorization": (),
    "rotation": (),
    "flip": (),
    "artifact_removal": ("paired",),
    "modality_transfer": ("paired",),
    "object_removal": ("paired",),
}
PARTS = ("segmentation", "depth", "edges", "keypoints", "boxes", "paired")


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and _NAME.match(value) is not None


class DataError(Exception):
    """Missing, corrupt or inconsistent dataset files; the message names the file and sample.

    ``path`` is always UTF-8-encodable text (see :func:`icl.data.images.display_path`);
    ``cause`` names the type of the exception that made the file unreadable ("DataError" when
    the loader itself found the problem)."""

    def __init__(self, message: str, *, path: str | Path | None = None, sample_id: str | None = None,
                 cause: str = "DataError"):
        self.path = None if path is None else display_path(path)
        self.sample_id = sample_id
        self.cause = cause
        where = []
        if sample_id is not None:
            where.append(f"sample {sample_id!r}")
        if path is not None:
            where.append(f"file {self.path!r}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)

    def __reduce__(self) -> tuple:  # picklable across worker processes, with its keywords
        return (_rebuild_data_error, (self.args[0], self.path, self.sample_id, self.cause))


def _rebuild_data_error(text: str, path: str | None, sample_id: str | None, cause: str) -> DataError:
    err = DataError.__new__(DataError)
    Exception.__init__(err, text)
    err.path, err.sample_id, err.cause = path, sample_id, cause
    return err


@dataclass(frozen=True)
class DatasetMeta:
    """What ``meta.json`` declares. ``classes[i]`` names class id ``i`` ("background" at 0 when
    the dataset has one); ``depth_range`` is ``(d_min, d_max)`` in metres; ``pairs`` maps a
    paired-image task to the ``paired/<kind>`` directory it uses, as sorted ``(task, kind)``."""

    name: str
    version: str
    tasks: tuple[str, ...]
    classes: tuple[str, ...] = ()
    depth_range: tuple[float, float] | None = None
    description: str = ""
    pairs: tuple[tuple[str, str], ...] = ()

    def pair_kind(self, task: str) -> str | None:
        """The ``paired/<kind>`` directory that ``task`` uses, or None."""
        return dict(self.pairs).get(task)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "tasks": list(self.tasks),
            "classes": list(self.classes),
            "depth_range": None if self.depth_range is None else list(self.depth_range),
            "pairs": dict(self.pairs),
        }


@dataclass
class Sample:
    """One sample. ``image`` is uint8 ``[H, W, 3]`` RGB. ``annotations`` holds what the dataset has:
    ``segmentation`` uint8 [H, W] (255 void), ``depth`` float32 [H, W] metres (-1 invalid),
    ``edges`` bool [H, W], ``keypoints`` float64 [N, 3] (x, y, v; v=2 visible), ``boxes`` float64
    [N, 4] (x0, y0, x1, y1 in pixels, x1/y1 exclusive) with ``box_classes`` int64 [N],
    ``paired`` {kind: uint8 [h, w, 3]}, ``paired_info`` {kind: dict} and ``pair_kinds``
    {task: kind} (which paired image each task uses, from ``meta.pairs``)."""

    dataset: str
    id: str
    image: np.ndarray
    annotations: dict[str, Any] = field(default_factory=dict)


def _meta_from_json(raw: Any, path: Path) -> DatasetMeta:
    def bad(msg: str) -> DataError:
        return DataError(f"invalid meta.json: {msg}", path=path)

    if not isinstance(raw, dict):
        raise bad("expected a JSON object")
    if raw.get("format", FORMAT) != FORMAT:
        raise bad(f"format {raw.get('format')!r} is not {FORMAT!r}")
    for key in ("name", "version", "tasks"):
        if key not in raw:
            raise bad(f"missing key {key!r}")
    name, version = raw["name"], str(raw["version"])
    if not isinstance(name, str) or not _NAME.match(name):
        raise bad(f"name {name!r} must match {_NAME.pattern}")
    tasks = raw["tasks"]
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks) or len(set(tasks)) != len(tasks):
        raise bad("tasks must be a list of distinct task names")
    unknown = sorted(set(tasks) - set(TASK_PARTS))
    if unknown:
        raise bad(f"unknown tasks {unknown}; known: {sorted(TASK_PARTS)}")
    classes = raw.get("classes", [])
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes) or len(classes) > 255:
        raise bad("classes must be a list of at most 255 names")
    if ("segmentation" in tasks or "detection" in tasks) and not classes:
        raise bad("segmentation and detection need a non-empty classes list")
    depth_range = raw.get("depth_range")
    if depth_range is not None:
        ok = isinstance(depth_range, list) and len(depth_range) == 2 and all(isinstance(v, (int, float)) for v in depth_range)
        if not ok or not (math.isfinite(depth_range[0]) and math.isfinite(depth_range[1])) or not depth_range[0] < depth_range[1]:
            raise bad(f"depth_range must be [d_min, d_max] with d_min < d_max, got {depth_range!r}")
        depth_range = (float(depth_range[0]), float(depth_range[1]))
    if "depth" in tasks and depth_range is None:
        raise bad("the depth task needs depth_range")
    pairs = raw.get("pairs", {})
    if not isinstance(pairs, dict) or not all(isinstance(k, str) and _is_name(v) for k, v in pairs.items()):
        raise bad("pairs must map task names to paired/<kind> directory names")
    for task in tasks:
        if "paired" in TASK_PARTS[task] and task not in pairs:
            raise bad(f"task {task!r} needs pairs[{task!r}] naming its paired/<kind> directory")
    return DatasetMeta(
        name=name,
        version=version,
        tasks=tuple(tasks),
        classes=tuple(classes),
        depth_range=depth_range,
        description=str(raw.get("description", "")),
        pairs=tuple(sorted((k, v) for k, v in pairs.items() if k in tasks)),
    )


def _decode(path: Path, sample_id: str, what: str, max_pixels: int | None,
            hw: tuple[int, int] | None = None) -> np.ndarray:
    """Header checks (size cap; equal to ``hw`` when given), completeness check, then decode."""
    if not path.is_file():
        raise DataError(f"missing {what}", path=path, sample_id=sample_id)
    try:
        if hw is not None:
            header = read_header(path)
            if (header.height, header.width) != hw:
                raise DataError(f"{what} has size {(header.height, header.width)}, the image {hw}",
                                path=path, sample_id=sample_id)
        return decode_image(path, max_pixels=max_pixels)
    except ImageError as exc:
        raise DataError(f"cannot read {what}: {str(exc).removeprefix(exc.path + ': ')}", path=path,
                        sample_id=sample_id, cause="ImageError") from None


def read_rgb(path: Path, sample_id: str, max_pixels: int | None = None) -> np.ndarray:
    """8-bit image file -> uint8 [H, W, 3] RGB (grey is replicated, alpha dropped).

    ``max_pixels``: the size cap checked from the header (None: :mod:`icl.data.images`' default)."""
    img = _decode(path, sample_id, "image", max_pixels)
    if img.dtype != np.uint8:
        raise DataError(f"expected an 8-bit image, got {img.dtype}", path=path, sample_id=sample_id)
    if img.ndim == 2:
        return np.ascontiguousarray(np.repeat(img[:, :, None], 3, axis=2))
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise DataError(f"expected 1, 3 or 4 channels, got shape {img.shape}", path=path, sample_id=sample_id)
    return np.ascontiguousarray(cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB))


def _read_gray8(path: Path, sample_id: str, what: str, hw: tuple[int, int], max_pixels: int | None) -> np.ndarray:
    img = _decode(path, sample_id, f"{what} PNG", max_pixels, hw)
    if img.dtype != np.uint8 or img.ndim != 2:
        raise DataError(
            f"{what} must be a single-channel 8-bit PNG, got {img.dtype} shape {img.shape}",
            path=path,
            sample_id=sample_id,
        )
    return img


def _read_json(path: Path, sample_id: str | None) -> Any:
    """Parse a JSON file; every way it can fail (unreadable, not UTF-8, invalid, nested too
    deeply for the parser, an integer too long to convert, not a regular file, over 64 MB) is a
    :class:`DataError`."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise DataError("not a regular file (a folder, FIFO or device)", path=path, sample_id=sample_id)
        if st.st_size > _JSON_MAX_BYTES:
            raise DataError(f"JSON file of {st.st_size:,} bytes, over the limit of {_JSON_MAX_BYTES:,}", path=path,
                            sample_id=sample_id)
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"cannot read JSON ({exc.strerror or exc})", path=path, sample_id=sample_id,
                        cause=type(exc).__name__) from None
    except RecursionError:
        raise DataError("cannot read JSON (nested too deeply)", path=path, sample_id=sample_id,
                        cause="RecursionError") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, and int digit-limit errors
        raise DataError(f"cannot read JSON ({str(exc)[:200]})", path=path, sample_id=sample_id,
                        cause=type(exc).__name__) from None
    bad = bad_text(value)  # "\ud800" is legal JSON but no Unicode: named here, not at a write
    if bad:
        raise DataError(f"field {bad[0] or '(the document)'!r}: {bad[1]}", path=path, sample_id=sample_id,
                        cause="UnicodeError")
    return value


def _check_size(arr: np.ndarray, hw: tuple[int, int], path: Path, sample_id: str, what: str) -> None:
    if arr.shape[:2] != hw:
        raise DataError(f"{what} has size {arr.shape[:2]}, the image {hw}", path=path, sample_id=sample_id)


class Dataset:
    """A validated dataset directory. Use :func:`load_dataset` to open one."""

    def __init__(self, root: Path, meta: DatasetMeta, files: dict[str, Path], *,
                 problems: list[DataError] | None = None, max_pixels: int | None = None):
        self.root = root
        self.meta = meta
        self._images = files
        #: problems found on opening, one per file or sample (each fails only its sample; one
        #: without a usable sample id, e.g. a file name that is not UTF-8, names no sample)
        self.problems: list[DataError] = list(problems or [])
        #: size cap for every image this dataset decodes (None: icl.data.images' default)
        self.max_pixels = max_pixels
        # samples that fail whatever part is asked for (two images with one id)
        self._broken: dict[str, DataError] = {}
        self._parts = tuple(p for p in PARTS if any(p in TASK_PARTS[t] for t in meta.tasks))
        self._class_cache: dict[tuple[str, str], frozenset[int]] = {}
        self._digest: str | None = None

    def __repr__(self) -> str:
        return f"Dataset({self.meta.name!r}, {len(self._images)} samples, root={str(self.root)!r})"

    def __len__(self) -> int:
        return len(self._images)

    def ids(self) -> list[str]:
        """Sample ids, sorted."""
        return sorted(self._images)

    def content_digest(self) -> str:
        """SHA-256 over every content file's path and bytes (:mod:`icl.data.digest`; cached by
        inode, size, mtime and ctime), so a benchmark's item keys change with the content."""
        if self._digest is None:
            from icl.data.digest import content_digest

            self._digest = content_digest(self.root)
        return self._digest

    def _path(self, part: str, sample_id: str, kind: str | None = None) -> Path:
        if part == "depth":
            npy = self.root / "depth" / f"{sample_id}.npy"
            return npy if npy.exists() else self.root / "depth" / f"{sample_id}.png"
        if part == "paired":
            return self.root / "paired" / str(kind) / f"{sample_id}.png"
        suffix = ".json" if part in ("keypoints", "boxes") else ".png"
        return self.root / part / f"{sample_id}{suffix}"

    def _kinds(self) -> list[str]:
        return sorted({kind for _, kind in self.meta.pairs})

    def check_files(self) -> list[DataError]:
        """One error per sample lacking a file that a part of its declared tasks needs (no decoding)."""
        found = []
        for sid in self.ids():
            for part in self._parts:
                for kind in self._kinds() if part == "paired" else [None]:
                    path = self._path(part, sid, kind)
                    if not path.is_file():
                        found.append(DataError(f"missing {part} file", path=path, sample_id=sid))
        return found

    def precheck(self, sample_id: str) -> DataError | None:
        """Why ``sample_id`` cannot be read, found without decoding (a problem recorded on
        opening, a missing file, an image header over the size cap, a truncated PNG/JPEG, a bad
        ``.npy`` header), or None. Lets a benchmark leave damaged samples out before it splits
        the dataset, so the rest runs exactly as on the dataset without them."""
        if sample_id in self._broken:
            return self._broken[sample_id]
        for e in self.problems:
            if e.sample_id == sample_id:
                return e
        paths = [self._images[sample_id]] + [self._path(part, sample_id, kind) for part in self._parts
                                             for kind in (self._kinds() if part == "paired" else [None])]
        for path in paths:
            try:
                if path.suffix == ".npy":
                    read_npy_header(path)
                elif path.suffix != ".json":
                    header = read_header(path)
                    check_size(header, path, self.max_pixels)
                    check_complete(path.read_bytes(), header.format, path)
            except FileNotFoundError:
                return DataError("missing file", path=path, sample_id=sample_id)
            except (ImageError, OSError) as exc:
                return DataError(f"cannot read: {exc}", path=path, sample_id=sample_id, cause=type(exc).__name__)
        return None

    def load(self, sample_id: str, parts: Iterable[str] | None = None) -> Sample:
        """Decode and validate one sample (all parts the dataset's tasks need, or ``parts``).

        Raises :class:`DataError` (naming the file being read and the sample) for any failure
        while reading the sample's files; ``ValueError`` only for an unknown part name."""
        if sample_id not in self._images:
            raise DataError(f"unknown sample id in dataset {self.meta.name!r}", path=self.root, sample_id=sample_id)
        if sample_id in self._broken:
            raise self._broken[sample_id]
        wanted = self._parts if parts is None else tuple(parts)
        unknown = [p for p in wanted if p not in PARTS]
        if unknown:
            raise ValueError(f"parts: unknown part {unknown[0]!r}; known: {PARTS}")
        reading: Path = self._images[sample_id]
        try:
            image = read_rgb(reading, sample_id, self.max_pixels)
            hw = image.shape[:2]
            ann: dict[str, Any] = {}
            for part in wanted:
                if part == "paired":
                    ann["paired"], ann["paired_info"] = {}, {}
                    ann["pair_kinds"] = dict(self.meta.pairs)
                    for kind in self._kinds():
                        reading = self._path(part, sample_id, kind)
                        ann["paired"][kind] = read_rgb(reading, sample_id, self.max_pixels)
                        reading = reading.with_suffix(".json")
                        ann["paired_info"][kind] = _read_json(reading, sample_id) if reading.exists() else {}
                        self._check_paired_info(ann["paired_info"][kind], hw, reading, sample_id)
                    continue
                reading = self._path(part, sample_id)
                if not reading.is_file():
                    raise DataError(f"missing {part} file", path=reading, sample_id=sample_id)
                ann.update(getattr(self, f"_read_{part}")(reading, sample_id, hw))
        except DataError:
            raise
        except Exception as exc:  # contained: any failure reading one sample fails that sample only
            raise DataError(f"cannot read file ({type(exc).__name__}: {str(exc)[:300]})", path=reading,
                            sample_id=sample_id, cause=type(exc).__name__) from exc
        return Sample(dataset=self.meta.name, id=sample_id, image=image, annotations=ann)

    def classes_present(self, sample_id: str, part: str) -> frozenset[int]:
        """Class ids present in a sample's ``segmentation`` (void excluded) or ``boxes``; cached."""
        key = (sample_id, part)
        if key not in self._class_cache:
            ann = self.load(sample_id, parts=(part,)).annotations
            if part == "segmentation":
                found = np.unique(ann["segmentation"])
                self._class_cache[key] = frozenset(int(c) for c in found if c != VOID)
            elif part == "boxes":
                self._class_cache[key] = frozenset(int(c) for c in ann["box_classes"])
            else:
                raise ValueError(f"part: expected 'segmentation' or 'boxes', got {part!r}")
        return self._class_cache[key]

    def validate(self) -> int:
        """Load every sample (decoding all files); returns the number of samples checked."""
        for sid in self.ids():
            self.load(sid)
        return len(self._images)

    # -- readers, one per part ------------------------------------------------------------
    def _read_segmentation(self, path: Path, sid: str, hw: tuple[int, int]) -> dict[str, Any]:
        seg = _read_gray8(path, sid, "segmentation", hw, self.max_pixels)
        _check_size(seg, hw, path, sid, "segmentation")
        bad = (seg != VOID) & (seg >= len(self.meta.classes))
        if bad.any():
            raise DataError(
                f"class id {int(seg[bad].max())} >= number of classes {len(self.meta.classes)} (255 is void)",
                path=path,
                sample_id=sid,
            )
        return {"segmentation": seg}

    def _read_depth(self, path: Path, sid: str, hw: tuple[int, int]) -> dict[str, Any]:
        if path.suffix == ".npy":
            # shape and dtype from the header, checked against the image before the data is read
            try:
                header = read_npy_header(path)
            except ImageError as exc:
                raise DataError(f"cannot read depth .npy: {str(exc).removeprefix(exc.path + ': ')}", path=path,
                                sample_id=sid, cause="ImageError") from None
            if len(header.shape) != 2 or not np.issubdtype(header.dtype, np.floating):
                raise DataError(f"depth .npy must be 2-D float metres, got {header.dtype} {header.shape}",
                                path=path, sample_id=sid)
            if header.shape != hw:
                raise DataError(f"depth has size {header.shape}, the image {hw}", path=path, sample_id=sid)
            try:
                arr = load_npy(path, header)
            except ImageError as exc:
                raise DataError(f"cannot read depth .npy: {str(exc).removeprefix(exc.path + ': ')}", path=path,
                                sample_id=sid, cause="ImageError") from None
            depth = arr.astype(np.float32)
        else:
            arr = _decode(path, sid, "depth PNG", self.max_pixels, hw)
            if arr.dtype != np.uint16 or arr.ndim != 2:
                raise DataError(f"depth PNG must be single-channel 16-bit millimetres, got {arr.dtype} {arr.shape}",
                                path=path, sample_id=sid)
            depth = arr.astype(np.float32) / np.float32(1000.0)
        _check_size(depth, hw, path, sid, "depth")
        depth[~np.isfinite(depth) | (depth <= 0)] = -1.0
        return {"depth": depth}

    def _read_edges(self, path: Path, sid: str, hw: tuple[int, int]) -> dict[str, Any]:
        edges = _read_gray8(path, sid, "edges", hw, self.max_pixels)
        _check_size(edges, hw, path, sid, "edges")
        return {"edges": edges != 0}

    def _read_keypoints(self, path: Path, sid: str, hw: tuple[int, int]) -> dict[str, Any]:
        raw = _read_json(path, sid)
        pts = raw.get("points") if isinstance(raw, dict) else None
        shape_ok = isinstance(pts, list) and all(isinstance(p, list) and len(p) == 3 for p in pts)
        try:
            arr = np.asarray(pts, dtype=np.float64).reshape(-1, 3) if shape_ok else None
        except (TypeError, ValueError, OverflowError):
            arr = None
        if arr is None:
            raise DataError('keypoints must be {"points": [[x, y, v], ...]} with numbers', path=path, sample_id=sid)
        if not np.isfinite(arr).all() or not np.isin(arr[:, 2], (0, 1, 2)).all():
            raise DataError("keypoints must be finite with v in {0, 1, 2}", path=path, sample_id=sid)
        vis = arr[:, 2] == 2
        h, w = hw
        out = vis & ((arr[:, 0] < 0) | (arr[:, 0] > w - 1) | (arr[:, 1] < 0) | (arr[:, 1] > h - 1))
        if out.any():
            raise DataError(f"visible keypoint {arr[out][0, :2].tolist()} outside the {w}x{h} image", path=path, sample_id=sid)
        return {"keypoints": arr}

    def _read_boxes(self, path: Path, sid: str, hw: tuple[int, int]) -> dict[str, Any]:
        raw = _read_json(path, sid)
        items = raw.get("boxes") if isinstance(raw, dict) else None
        if not isinstance(items, list) or not all(isinstance(b, dict) and "box" in b for b in items):
            raise DataError('boxes must be {"boxes": [{"box": [x0, y0, x1, y1], "class": c}, ...]}', path=path, sample_id=sid)
        try:
            boxes = np.asarray([b["box"] for b in items], dtype=np.float64).reshape(-1, 4)
            classes = np.asarray([int(b.get("class", 0)) for b in items], dtype=np.int64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise DataError(f"boxes: bad box or class ({exc})", path=path, sample_id=sid) from exc
        h, w = hw
        ok = (
            np.isfinite(boxes).all(axis=1)
            & (boxes[:, 0] >= 0) & (boxes[:, 1] >= 0) & (boxes[:, 2] <= w) & (boxes[:, 3] <= h)
            & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        )
        if not ok.all():
            raise DataError(
                f"box {boxes[~ok][0].tolist()} is not 0 <= x0 < x1 <= {w}, 0 <= y0 < y1 <= {h}", path=path, sample_id=sid
            )
        if ((classes < 0) | (classes >= max(len(self.meta.classes), 1))).any():
            raise DataError(f"box class out of range for {len(self.meta.classes)} classes", path=path, sample_id=sid)
        return {"boxes": boxes, "box_classes": classes}

    @staticmethod
    def _check_paired_info(info: Any, hw: tuple[int, int], path: Path, sid: str) -> None:
        if not isinstance(info, dict):
            raise DataError("paired sidecar must be a JSON object", path=path, sample_id=sid)
        if "box" in info:
            box = info["box"]
            ok = isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)
            if not ok or not (0 <= box[0] < box[2] <= hw[1] and 0 <= box[1] < box[3] <= hw[0]):
                raise DataError(f"paired box {box!r} is not inside the image", path=path, sample_id=sid)


def load_dataset(root: str | Path, max_pixels: int | None = None) -> Dataset:
    """Open a dataset directory: validate ``meta.json`` and list the samples of ``images/``.

    Raises :class:`DataError` only when the dataset as a whole is unusable (no or invalid
    ``meta.json``, no ``images/``, no image at all). A problem of one file or sample is recorded
    in :attr:`Dataset.problems` instead: a file name that is not a valid sample id (including
    names that are not UTF-8) is left out; a sample with two images, or without a file its tasks
    need, keeps its id and fails when loaded. ``max_pixels``: size cap for every image decoded.
    """
    root = Path(root)
    meta_path = root / "meta.json"
    if not meta_path.is_file():
        raise DataError("not a dataset directory: meta.json is missing", path=meta_path)
    meta = _meta_from_json(_read_json(meta_path, None), meta_path)
    images_dir = root / "images"
    if not images_dir.is_dir():
        raise DataError("missing images/ directory", path=images_dir)
    files: dict[str, Path] = {}
    problems: list[DataError] = []
    duplicates: dict[str, DataError] = {}
    try:
        listing = sorted(images_dir.iterdir(), key=lambda p: os.fsencode(p.name))
    except OSError as exc:
        raise DataError(f"cannot list images/ ({exc.strerror or exc})", path=images_dir) from None
    for path in listing:
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        sid = path.stem
        if not _NAME.fullmatch(sid):
            problems.append(DataError(f"file name {display_path(sid)!r} is not a valid sample id "
                                      f"(must match {_NAME.pattern}); file skipped", path=path))
            continue
        if sid in files:
            duplicates[sid] = DataError(f"two images share the sample id ({files[sid].name} and {path.name})",
                                        path=path, sample_id=sid)
            problems.append(duplicates[sid])
            continue
        files[sid] = path
    if not files:
        raise DataError("no images (.png/.jpg/.jpeg) with a valid sample id in images/", path=images_dir)
    if "object_removal" in meta.tasks:
        kind = meta.pair_kind("object_removal")
        for sid in files:
            side = root / "paired" / str(kind) / f"{sid}.json"
            if not side.is_file():
                problems.append(DataError('object removal needs a sidecar {"box": [x0, y0, x1, y1]}', path=side,
                                          sample_id=sid))
    dataset = Dataset(root, meta, files, problems=problems, max_pixels=max_pixels)
    dataset._broken.update(duplicates)
    # a missing file fails its sample only for the tasks that read it (load raises then)
    dataset.problems += dataset.check_files()
    return dataset
