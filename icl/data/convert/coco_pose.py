"""Pose releases: AP-10K (COCO keypoint JSON) and OpenThermalPose (YOLO-pose text labels).

- **AP-10K**: ``annotations/ap10k-{train,val,test}-split1.json`` (COCO: ``images``,
  ``annotations`` with ``keypoints`` [x, y, v] x 17 and ``bbox`` [x, y, w, h], ``categories``:
  the species) and ``data/<file_name>``. The three files of split 1 together hold every image
  once. The paper keeps single-instance images with at least 7 annotated (v > 0) keypoints.
- **OpenThermalPose**: ``{train,val,test}/images/<stem>.<ext>`` and ``.../labels/<stem>.txt``,
  one line per person: ``class cx cy w h`` then ``x y v`` x 17, all normalised to the image
  size. The paper keeps single-person images.

Visibility follows COCO (0 unlabelled, 1 labelled but hidden, 2 visible); visible points are
clipped to the image (paper A.4), boxes to its bounds. An annotation whose recorded image size
disagrees with the image file is reported and skipped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, raw_join, read_image, read_json,
                                      read_text, sample_id)
from icl.data.dataset import DatasetMeta

IMAGE_TASKS = ("inpainting", "denoising", "rotation", "flip")
AP10K_MIN_KEYPOINTS = 7
AP10K_SPLITS = ("train", "val", "test")


def clip_points(points: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """[N, 3] (x, y, v): visible points clipped into ``[0, w-1] x [0, h-1]``; others as they are."""
    h, w = size
    out = np.asarray(points, np.float64).reshape(-1, 3).copy()
    vis = out[:, 2] == 2
    out[vis, 0] = np.clip(out[vis, 0], 0, w - 1)
    out[vis, 1] = np.clip(out[vis, 1], 0, h - 1)
    return out


def xywh_to_box(bbox: list[float], size: tuple[int, int]) -> np.ndarray:
    """COCO [x, y, w, h] -> [x0, y0, x1, y1] clipped to the image."""
    h, w = size
    x, y, bw, bh = (float(v) for v in bbox)
    return np.array([max(x, 0.0), max(y, 0.0), min(x + bw, w), min(y + bh, h)])


def _keypoints(ann: dict, path: Path) -> np.ndarray:
    try:
        kp = np.asarray(ann.get("keypoints", []), np.float64).reshape(-1, 3)
    except (TypeError, ValueError) as exc:
        raise RawError(path, f"annotation {ann.get('id')}: keypoints are not x, y, v triples ({exc})") from exc
    if not np.isfinite(kp).all() or not np.isin(kp[:, 2], (0, 1, 2)).all():
        raise RawError(path, f"annotation {ann.get('id')}: non-finite keypoints or visibility outside 0/1/2")
    return kp


def convert_ap10k(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = next((raw / d for d in ("ap-10k", "ap10k") if (raw / d / "annotations").is_dir()), raw)
    files = [root / "annotations" / f"ap10k-{s}-split1.json" for s in AP10K_SPLITS]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConvertError(f"missing AP-10K annotation files: {', '.join(missing)}")
    images: dict[int, dict] = {}
    origin: dict[int, Path] = {}  # image id -> the annotation file that lists it
    anns: dict[int, list[dict]] = {}
    categories: dict[int, str] = {}
    bad_entries: list[RawError] = []
    for f in files:
        try:
            coco = read_json(f)
            if not isinstance(coco, dict):
                raise RawError(f, "expected a COCO JSON object")
        except RawError as err:
            raise ConvertError(str(err)) from err
        for n, im in enumerate(coco.get("images", [])):
            try:
                if images.setdefault(int(im["id"]), im) is im:
                    origin[int(im["id"])] = f
            except (KeyError, TypeError, ValueError):
                bad_entries.append(RawError(f, f"images[{n}] has no integer id"))
        for n, a in enumerate(coco.get("annotations", [])):
            try:
                anns.setdefault(int(a["image_id"]), []).append(a)
            except (KeyError, TypeError, ValueError):
                bad_entries.append(RawError(f, f"annotations[{n}] has no integer image_id"))
        for n, c in enumerate(coco.get("categories", [])):
            try:
                categories[int(c["id"])] = str(c["name"])
            except (KeyError, TypeError, ValueError):
                bad_entries.append(RawError(f, f"categories[{n}] has no integer id and name"))
    cat_ids = sorted(categories)
    class_of = {c: i for i, c in enumerate(cat_ids)}
    meta = DatasetMeta(name="ap10k", version="split1-all", tasks=("detection", "keypoints", *IMAGE_TASKS, "colorization"),
                       classes=tuple(categories[c] for c in cat_ids),
                       description="AP-10K single animals with >= 7 annotated keypoints")
    conv = Conversion(out, meta, raw, "ap10k", {"min_keypoints": AP10K_MIN_KEYPOINTS})
    conv.use(*files)
    for entry_error in bad_entries:
        conv.bad(entry_error)
    items = []  # (id, path, image entry, annotation, keypoints) of the images the filters keep
    for image_id in sorted(images):
        info = images[image_id]
        file_name = str(info.get("file_name", ""))
        sid = sample_id(Path(file_name.replace("\\", "/")).stem or str(image_id))
        try:
            path = raw_join(root / "data", file_name, origin[image_id])
        except RawError as err:
            conv.bad(RawError(f"{origin[image_id]}#image-{image_id}", f"file_name {err.message}"))
            continue
        mine = anns.get(image_id, [])
        if len(mine) != 1:
            conv.drop(sid, "no animal annotated" if not mine else "more than one animal")
            continue
        try:
            kp = _keypoints(mine[0], path)
        except Exception as err:  # one image's failure is that image's
            conv.bad(err, path)
            continue
        if int((kp[:, 2] > 0).sum()) < AP10K_MIN_KEYPOINTS:
            conv.drop(sid, f"fewer than {AP10K_MIN_KEYPOINTS} annotated keypoints")
            continue
        items.append((sid, path, info, mine[0], kp))

    def load(item: tuple) -> tuple[np.ndarray, np.ndarray, int]:
        _sid, path, info, ann, _kp = item
        image = read_image(path)
        size = image.shape[:2]
        try:
            recorded = (int(info.get("height") or size[0]), int(info.get("width") or size[1]))
            category, bbox = int(ann["category_id"]), [float(v) for v in ann["bbox"]]
        except (KeyError, TypeError, ValueError):
            raise RawError(path, f"annotation {ann.get('id')}: bad size, category or bbox") from None
        if recorded != size:
            raise RawError(path, f"the annotation says {recorded[1]}x{recorded[0]}, the image is {size[1]}x{size[0]}")
        if category not in class_of or len(bbox) != 4:
            raise RawError(path, f"annotation {ann.get('id')} has an unknown category {category} or a bad bbox")
        box = xywh_to_box(bbox, size)
        if box[2] <= box[0] or box[3] <= box[1]:
            raise RawError(path, f"annotation {ann.get('id')}: bbox {bbox} is empty inside the image")
        return image, box, category

    conv.expect(len(items))
    for (sid, path, _info, _ann, kp), result in conv.map(load, items):
        if isinstance(result, BaseException):
            conv.bad(result, path)
            continue
        image, box, category = result
        kp[kp[:, 2] > 0, 2] = 2  # AP-10K labels annotated points as visible
        conv.add(sid, image, raw=(path,), source=path, keypoints=clip_points(kp, image.shape[:2]), boxes=box[None],
                 box_classes=np.array([class_of[category]]))
    return [conv.finish()]


def _yolo_lines(path: Path) -> list[np.ndarray]:
    if not path.exists() and not path.is_symlink():
        return []
    text = read_text(path, 1 << 20)
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            values = np.array([float(v) for v in line.split()])
        except ValueError:
            raise RawError(path, f"line {n}: not numbers") from None
        if len(values) != 5 + 17 * 3:
            raise RawError(path, f"line {n}: {len(values)} values, expected 5 + 17 x 3 (YOLO pose)")
        rows.append(values)
    return rows


def convert_otp(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = raw / "OpenThermalPose" if (raw / "OpenThermalPose").is_dir() else raw
    splits = [s for s in ("train", "val", "test") if (root / s / "images").is_dir()]
    if not splits:
        raise ConvertError(f"no train/val/test images/ folders under {root} (YOLO pose layout)")
    meta = DatasetMeta(name="otp", version="v1-single-person", tasks=("keypoints", *IMAGE_TASKS),
                       description="OpenThermalPose thermal images with one person (17 COCO keypoints)")
    conv = Conversion(out, meta, raw, "otp")
    for split in splits:
        for path in sorted(p for p in (root / split / "images").iterdir()
                           if p.suffix.lower() in (".jpg", ".jpeg", ".png")):
            label = root / split / "labels" / f"{path.stem}.txt"
            sid = sample_id(split, path.stem)
            try:
                rows = _yolo_lines(label)
                if len(rows) != 1:
                    conv.drop(sid, "no person" if not rows else "more than one person", raw=(path,))
                    continue
                image = read_image(path)
            except Exception as err:  # one image's failure is that image's
                conv.bad(err, label)
                continue
            h, w = image.shape[:2]
            kp = rows[0][5:].reshape(17, 3) * np.array([w, h, 1.0])
            if not np.isin(kp[:, 2], (0, 1, 2)).all():
                conv.bad(RawError(label, f"visibility flags {sorted(set(kp[:, 2].tolist()))} are not 0/1/2"))
                continue
            conv.add(sid, image, raw=(path, label), source=path, keypoints=clip_points(kp, (h, w)))
    return [conv.finish()]
