"""Datasets in the canonical on-disk format (docs/data-format.md) and their validating loader.

A dataset is a directory with ``meta.json`` and one file per sample and annotation kind.
:func:`load_dataset` checks the metadata and that every sample has the files its declared
tasks need; :meth:`Dataset.load` decodes and validates one sample's files and raises
:class:`DataError` naming the file and the sample when something is missing or corrupt.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import cv2
import numpy as np

FORMAT = "icl-dataset/1"
VOID = 255
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

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
    """Missing, corrupt or inconsistent dataset files; the message names the file and sample."""

    def __init__(self, message: str, *, path: str | Path | None = None, sample_id: str | None = None):
        self.path = None if path is None else str(path)
        self.sample_id = sample_id
        where = []
        if sample_id is not None:
            where.append(f"sample {sample_id!r}")
        if path is not None:
            where.append(f"file {str(path)!r}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


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


def read_rgb(path: Path, sample_id: str) -> np.ndarray:
    """8-bit image file -> uint8 [H, W, 3] RGB (grey is replicated, alpha dropped)."""
    if not path.is_file():
        raise DataError("missing image", path=path, sample_id=sample_id)
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise DataError("cannot decode image (corrupt or not an image)", path=path, sample_id=sample_id)
    if img.dtype != np.uint8:
        raise DataError(f"expected an 8-bit image, got {img.dtype}", path=path, sample_id=sample_id)
    if img.ndim == 2:
        return np.ascontiguousarray(np.repeat(img[:, :, None], 3, axis=2))
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise DataError(f"expected 1, 3 or 4 channels, got shape {img.shape}", path=path, sample_id=sample_id)
    return np.ascontiguousarray(cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB))


def _read_gray8(path: Path, sample_id: str, what: str) -> np.ndarray:
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise DataError(f"cannot decode {what} PNG", path=path, sample_id=sample_id)
    if img.dtype != np.uint8 or img.ndim != 2:
        raise DataError(
            f"{what} must be a single-channel 8-bit PNG, got {img.dtype} shape {img.shape}",
            path=path,
            sample_id=sample_id,
        )
    return img


def _read_json(path: Path, sample_id: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read JSON ({exc})", path=path, sample_id=sample_id) from exc


def _check_size(arr: np.ndarray, hw: tuple[int, int], path: Path, sample_id: str, what: str) -> None:
    if arr.shape[:2] != hw:
        raise DataError(f"{what} has size {arr.shape[:2]}, the image {hw}", path=path, sample_id=sample_id)


class Dataset:
    """A validated dataset directory. Use :func:`load_dataset` to open one."""

    def __init__(self, root: Path, meta: DatasetMeta, files: dict[str, Path]):
        self.root = root
        self.meta = meta
        self._images = files
        self._parts = tuple(p for p in PARTS if any(p in TASK_PARTS[t] for t in meta.tasks))
        self._class_cache: dict[tuple[str, str], frozenset[int]] = {}

    def __repr__(self) -> str:
        return f"Dataset({self.meta.name!r}, {len(self._images)} samples, root={str(self.root)!r})"

    def __len__(self) -> int:
        return len(self._images)

    def ids(self) -> list[str]:
        """Sample ids, sorted."""
        return sorted(self._images)

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

    def check_files(self) -> None:
        """Every sample has a file for every part its declared tasks need (no decoding)."""
        for sid in self.ids():
            for part in self._parts:
                for kind in self._kinds() if part == "paired" else [None]:
                    path = self._path(part, sid, kind)
                    if not path.is_file():
                        raise DataError(f"missing {part} file", path=path, sample_id=sid)

    def load(self, sample_id: str, parts: Iterable[str] | None = None) -> Sample:
        """Decode and validate one sample (all parts the dataset's tasks need, or ``parts``)."""
        if sample_id not in self._images:
            raise DataError(f"unknown sample id in dataset {self.meta.name!r}", path=self.root, sample_id=sample_id)
        wanted = self._parts if parts is None else tuple(parts)
        image = read_rgb(self._images[sample_id], sample_id)
        hw = image.shape[:2]
        ann: dict[str, Any] = {}
        for part in wanted:
            if part not in PARTS:
                raise ValueError(f"parts: unknown part {part!r}; known: {PARTS}")
            if part == "paired":
                ann["paired"], ann["paired_info"] = {}, {}
                ann["pair_kinds"] = dict(self.meta.pairs)
                for kind in self._kinds():
                    path = self._path(part, sample_id, kind)
                    ann["paired"][kind] = read_rgb(path, sample_id)
                    side = path.with_suffix(".json")
                    ann["paired_info"][kind] = _read_json(side, sample_id) if side.exists() else {}
                    self._check_paired_info(ann["paired_info"][kind], hw, side, sample_id)
                continue
            path = self._path(part, sample_id)
            if not path.is_file():
                raise DataError(f"missing {part} file", path=path, sample_id=sample_id)
            ann.update(getattr(self, f"_read_{part}")(path, sample_id, hw))
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
        seg = _read_gray8(path, sid, "segmentation")
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
            try:
                arr = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise DataError(f"cannot read depth .npy ({exc})", path=path, sample_id=sid) from exc
            if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.floating):
                raise DataError(f"depth .npy must be 2-D float metres, got {arr.dtype} {arr.shape}", path=path, sample_id=sid)
            depth = arr.astype(np.float32)
        else:
            arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
            if arr is None or arr.dtype != np.uint16 or arr.ndim != 2:
                got = "undecodable" if arr is None else f"{arr.dtype} {arr.shape}"
                raise DataError(f"depth PNG must be single-channel 16-bit millimetres, got {got}", path=path, sample_id=sid)
            depth = arr.astype(np.float32) / np.float32(1000.0)
        _check_size(depth, hw, path, sid, "depth")
        depth[~np.isfinite(depth) | (depth <= 0)] = -1.0
        return {"depth": depth}

    def _read_edges(self, path: Path, sid: str, hw: tuple[int, int]) -> dict[str, Any]:
        edges = _read_gray8(path, sid, "edges")
        _check_size(edges, hw, path, sid, "edges")
        return {"edges": edges != 0}

    def _read_keypoints(self, path: Path, sid: str, hw: tuple[int, int]) -> dict[str, Any]:
        raw = _read_json(path, sid)
        pts = raw.get("points") if isinstance(raw, dict) else None
        shape_ok = isinstance(pts, list) and all(isinstance(p, list) and len(p) == 3 for p in pts)
        try:
            arr = np.asarray(pts, dtype=np.float64).reshape(-1, 3) if shape_ok else None
        except (TypeError, ValueError):
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
        except (TypeError, ValueError) as exc:
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


def load_dataset(root: str | Path) -> Dataset:
    """Open and validate a dataset directory (meta.json, sample ids, presence of needed files)."""
    root = Path(root)
    meta_path = root / "meta.json"
    if not meta_path.is_file():
        raise DataError("not a dataset directory: meta.json is missing", path=meta_path)
    try:
        raw = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read meta.json ({exc})", path=meta_path) from exc
    meta = _meta_from_json(raw, meta_path)
    images_dir = root / "images"
    if not images_dir.is_dir():
        raise DataError("missing images/ directory", path=images_dir)
    files: dict[str, Path] = {}
    for path in sorted(images_dir.iterdir()):
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        sid = path.stem
        if not _NAME.match(sid):
            raise DataError(f"sample id {sid!r} must match {_NAME.pattern}", path=path, sample_id=sid)
        if sid in files:
            raise DataError(f"two images share the sample id (also {files[sid].name})", path=path, sample_id=sid)
        files[sid] = path
    if not files:
        raise DataError("no images (.png/.jpg/.jpeg) in images/", path=images_dir)
    if "object_removal" in meta.tasks:
        kind = meta.pair_kind("object_removal")
        for sid in files:
            side = root / "paired" / str(kind) / f"{sid}.json"
            if not side.is_file():
                raise DataError('object removal needs a sidecar {"box": [x0, y0, x1, y1]}', path=side, sample_id=sid)
    dataset = Dataset(root, meta, files)
    dataset.check_files()
    return dataset
