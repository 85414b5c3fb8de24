"""CUB-200-2011 (Caltech Birds): keypoints from the 15 part locations, the bird's box.

Raw layout (``CUB_200_2011.tgz``): ``images.txt`` (id, path), ``image_class_labels.txt`` (id,
class), ``classes.txt`` (class, folder name), ``bounding_boxes.txt`` (id, x, y, w, h),
``parts/part_locs.txt`` (id, part, x, y, visible) and ``images/<class folder>/<name>.jpg``.
The paper draws 30 images per class at random: here ``rng(global_seed, "cub", "*",
<class folder>, "subsample").choice`` over the class's images in id order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, need, raw_join, read_image, read_text,
                                      sample_id)
from icl.data.dataset import DatasetMeta
from icl.data.seeds import ANY, rng

PER_CLASS = 30
N_PARTS = 15


def _table(path: Path, width: int) -> list[list[str]]:
    try:
        text = read_text(path, 256 << 20)
    except RawError as err:
        raise ConvertError(str(err)) from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            parts = line.split(maxsplit=width - 1)
            if len(parts) != width:
                raise ConvertError(f"{path}:{n}: expected {width} fields, got {len(parts)}")
            rows.append(parts)
    return rows


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = raw / "CUB_200_2011" if (raw / "CUB_200_2011" / "images.txt").is_file() else raw
    files = {k: need(root / k, f"CUB {k}") for k in ("images.txt", "image_class_labels.txt", "classes.txt",
                                                      "bounding_boxes.txt", "parts/part_locs.txt")}
    paths = {int(i): p for i, p in _table(files["images.txt"], 2)}
    label = {int(i): int(c) for i, c in _table(files["image_class_labels.txt"], 2)}
    folders = {int(c): name for c, name in _table(files["classes.txt"], 2)}
    boxes = {int(r[0]): [float(v) for v in r[1:]] for r in _table(files["bounding_boxes.txt"], 5)}
    parts: dict[int, np.ndarray] = {}
    for r in _table(files["parts/part_locs.txt"], 5):
        img, part = int(r[0]), int(r[1])
        arr = parts.setdefault(img, np.zeros((N_PARTS, 3)))
        if 1 <= part <= N_PARTS:
            arr[part - 1] = [float(r[2]), float(r[3]), 2.0 if float(r[4]) > 0 else 0.0]
    class_ids = sorted(folders)
    index = {c: i for i, c in enumerate(class_ids)}
    meta = DatasetMeta(name="cub", version=f"CUB-200-2011/{PER_CLASS}-per-class", tasks=(
        "detection", "keypoints", "inpainting", "denoising", "colorization", "rotation", "flip"),
        classes=tuple(folders[c].split(".", 1)[-1] for c in class_ids),
        description=f"CUB-200-2011, {PER_CLASS} random images per class; 15 parts as keypoints")
    conv = Conversion(out, meta, raw, "cub", {"per_class": PER_CLASS, "global_seed": global_seed})
    conv.use(*files.values())
    items = []  # (id, image index, class) of the drawn images
    for c in class_ids:
        members = sorted(i for i, lab in label.items() if lab == c)
        pick = set(rng(global_seed, "cub", ANY, folders[c], "subsample").choice(
            members, min(PER_CLASS, len(members)), replace=False).tolist())
        for i in members:
            sid = sample_id(Path(paths[i]).stem)
            if i not in pick:
                conv.drop(sid, f"not among the {PER_CLASS} drawn for its class")
            else:
                items.append((sid, i, c))

    def load(item: tuple[str, int, int]) -> tuple[Path, np.ndarray]:
        _sid, i, _c = item
        path = raw_join(root / "images", paths[i], files["images.txt"])
        image = read_image(path)
        if i not in boxes:
            raise RawError(path, f"image {i} has no line in bounding_boxes.txt")
        return path, image

    conv.expect(len(items))
    for (sid, i, c), result in conv.map(load, items):
        if isinstance(result, BaseException):
            conv.bad(result, root / "images" / paths[i])
            continue
        path, image = result
        h, w = image.shape[:2]
        x, y, bw, bh = boxes[i]
        box = np.array([[max(x, 0.0), max(y, 0.0), min(x + bw, w), min(y + bh, h)]])
        if box[0, 2] <= box[0, 0] or box[0, 3] <= box[0, 1]:
            conv.bad(RawError(path, f"box {boxes[i]} lies outside the {w}x{h} image"))
            continue
        kp = parts.get(i, np.zeros((N_PARTS, 3))).copy()
        vis = kp[:, 2] == 2
        kp[vis, 0] = np.clip(kp[vis, 0], 0, w - 1)
        kp[vis, 1] = np.clip(kp[vis, 1], 0, h - 1)
        conv.add(sid, image, raw=(path,), source=path, keypoints=kp, boxes=box, box_classes=np.array([index[c]]))
    return [conv.finish()]
