"""LLVIP (visible-infrared pedestrian pairs): detection and RGB -> infrared transfer.

Raw layout: ``visible/{train,test}/<id>.jpg``, ``infrared/{train,test}/<id>.jpg`` (the same
ids) and ``Annotations/<id>.xml`` (PASCAL VOC: ``object/name``, ``object/bndbox``). The paper
keeps every 25th frame (every 25th id in sorted order over both splits) with one to three
persons, so that the boxes always fit the three colour channels of the encoding. VOC boxes
are 1-based inclusive pixels: ``[xmin - 1, ymin - 1, xmax, ymax]`` here (exclusive ends),
clipped to the image.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from icl.data.convert._common import Conversion, ConvertError, RawError, Report, read_image, same_size, sample_id
from icl.data.dataset import DatasetMeta

EVERY = 25
MAX_PERSONS = 3


def _root(raw: Path) -> Path:
    for cand in (raw, raw / "LLVIP"):
        if (cand / "visible").is_dir() and (cand / "infrared").is_dir():
            return cand
    raise ConvertError(f"no visible/ and infrared/ folders under {raw} (or {raw / 'LLVIP'})")


def read_voc(path: Path) -> tuple[tuple[int, int] | None, list[tuple[str, list[float]]]]:
    """VOC XML -> ((h, w) from ``size`` or None, [(name, [xmin, ymin, xmax, ymax])])."""
    try:
        tree = ET.parse(path)
    except FileNotFoundError as exc:
        raise RawError(path, "missing annotation") from exc
    except (ET.ParseError, OSError) as exc:
        raise RawError(path, f"cannot parse VOC XML ({exc})") from exc
    root = tree.getroot()
    size = None
    if root.find("size") is not None:
        try:
            size = (int(root.findtext("size/height", "")), int(root.findtext("size/width", "")))
        except ValueError:
            size = None
    objects = []
    for obj in root.iter("object"):
        box = obj.find("bndbox")
        try:
            coords = [float(box.findtext(k, "")) for k in ("xmin", "ymin", "xmax", "ymax")] if box is not None else None
        except ValueError:
            coords = None
        if coords is None:
            raise RawError(path, "an object without a numeric bndbox")
        objects.append((obj.findtext("name", "").strip(), coords))
    return size, objects


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = _root(raw)
    frames = sorted((p.stem, p) for p in (root / "visible").rglob("*.jpg"))
    meta = DatasetMeta(name="llvip", version="every-25th", tasks=(
        "detection", "modality_transfer", "inpainting", "denoising", "colorization", "rotation", "flip"),
        classes=("person",), pairs=(("modality_transfer", "infrared"),),
        description="LLVIP every 25th frame with 1-3 persons; visible -> infrared")
    conv = Conversion(out, meta, raw, "llvip", {"every": EVERY, "max_persons": MAX_PERSONS})
    for i, (stem, path) in enumerate(frames):
        if i % EVERY:
            continue
        sid = sample_id(stem)
        xml = root / "Annotations" / f"{stem}.xml"
        ir_path = root / "infrared" / path.relative_to(root / "visible")
        try:
            image = read_image(path)
            size, objects = read_voc(xml)
            if size is not None and size != image.shape[:2]:
                raise RawError(xml, f"annotation size {size[1]}x{size[0]} but the image is "
                                    f"{image.shape[1]}x{image.shape[0]}")
            infrared = read_image(ir_path)
            same_size(ir_path, infrared.shape, image.shape, "infrared image")
        except RawError as err:
            conv.bad(err)
            continue
        persons = [c for name, c in objects if name == "person"]
        if not persons:
            conv.drop(sid, "no person", raw=(path, xml))
            continue
        if len(persons) > MAX_PERSONS:
            conv.drop(sid, f"more than {MAX_PERSONS} persons", raw=(path, xml))
            continue
        h, w = image.shape[:2]
        boxes = np.asarray(persons, np.float64) - np.array([1.0, 1.0, 0.0, 0.0])
        boxes = np.clip(boxes, 0, [w, h, w, h])
        if ((boxes[:, 2] <= boxes[:, 0]) | (boxes[:, 3] <= boxes[:, 1])).any():
            conv.bad(RawError(xml, "a box is empty once clipped to the image"))
            continue
        conv.add(sid, image, raw=(path, xml, ir_path), boxes=boxes, box_classes=np.zeros(len(boxes), np.int64),
                 paired={"infrared": infrared})
    return [conv.finish()]
