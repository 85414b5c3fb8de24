"""LLVIP (visible-infrared pedestrian pairs): detection and RGB -> infrared transfer.

Raw layout: ``visible/{train,test}/<id>.jpg``, ``infrared/{train,test}/<id>.jpg`` (the same
ids) and ``Annotations/<id>.xml`` (PASCAL VOC: ``object/name``, ``object/bndbox``). The paper
keeps every 25th frame (every 25th id in sorted order over both splits) and removes the frames
"where the bounding boxes of more than three persons overlap": a frame is dropped when its boxes
do not fit the three colour channels of the detection encoding, decided by the encoding's own
packing (``icl.data.geometry.pack_channels``: red, else green, else blue where
a box neither overlaps nor touches one already drawn). Frames with no person are kept (no
filter of the paper removes them).

Box convention: LLVIP's own conversion scripts (bupt-ai-cz/LLVIP ``toolbox/voc2coco.py``:
``[xmin, ymin, xmax - xmin, ymax - ymin]``; ``toolbox/xml2txt_yolov5.py``: centre
``(xmin + xmax) / 2``, width ``xmax - xmin``) read ``xmin, ymin, xmax, ymax`` as the box's edges
in pixel coordinates, with no 1-based shift; so do we: ``[xmin, ymin, xmax, ymax]``, clipped to
the image. XML entity declarations are refused (no entity expansion, no external entity).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, raw_bytes, read_image, same_size,
                                      sample_id)
from icl.data.dataset import DatasetMeta

EVERY = 25
XML_MAX_BYTES = 1 << 20


def _root(raw: Path) -> Path:
    for cand in (raw, raw / "LLVIP"):
        if (cand / "visible").is_dir() and (cand / "infrared").is_dir():
            return cand
    raise ConvertError(f"no visible/ and infrared/ folders under {raw} (or {raw / 'LLVIP'})")


def read_voc(path: Path) -> tuple[tuple[int, int] | None, list[tuple[str, list[float]]]]:
    """VOC XML -> ((h, w) from ``size`` or None, [(name, [xmin, ymin, xmax, ymax])])."""
    data = raw_bytes(path, XML_MAX_BYTES)
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise RawError(path, "VOC XML with a DOCTYPE or entity declaration: refused (entity expansion)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise RawError(path, f"cannot parse VOC XML ({exc})") from None
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
    from icl.data.geometry import pack_channels, pixel_rects

    root = _root(raw)
    frames = sorted((p.stem, p) for p in (root / "visible").rglob("*.jpg"))
    meta = DatasetMeta(name="llvip", version="every-25th", tasks=(
        "detection", "modality_transfer", "inpainting", "denoising", "colorization", "rotation", "flip"),
        classes=("person",), pairs=(("modality_transfer", "infrared"),),
        description="LLVIP every 25th frame whose person boxes fit three channels; visible -> infrared")
    conv = Conversion(out, meta, raw, "llvip", {"every": EVERY, "overlap": "pack_channels (R, G, B)"})
    conv.expect(len(frames[::EVERY]))
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
        except Exception as err:  # one frame's failure is that frame's
            conv.bad(err, path)
            continue
        persons = [c for name, c in objects if name == "person"]
        h, w = image.shape[:2]
        boxes = np.clip(np.asarray(persons, np.float64).reshape(-1, 4), 0, [w, h, w, h])
        if ((boxes[:, 2] <= boxes[:, 0]) | (boxes[:, 3] <= boxes[:, 1])).any():
            conv.bad(RawError(xml, "a box is empty once clipped to the image"))
            continue
        packed = pack_channels(pixel_rects(boxes, (h, w)))
        if isinstance(packed, str):
            conv.drop(sid, "more than three person boxes overlap", raw=(path, xml))
            continue
        conv.add(sid, image, raw=(path, xml, ir_path), source=path, boxes=boxes,
                 box_classes=np.zeros(len(boxes), np.int64), paired={"infrared": infrared})
    return [conv.finish()]
