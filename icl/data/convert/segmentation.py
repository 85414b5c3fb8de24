"""Colour- and palette-coded segmentation releases: SUIM, ATLANTIS, DRAM.

- **SUIM** (``train_val/`` and ``TEST/``, each ``images/*.jpg`` + ``masks/*.bmp``; ``TEST/masks/``
  also holds one sub-folder of binary masks per class, ``FV/``, ``HD/``, ``RI/``, ``RO/``, ``WR/``,
  which are not read): RGB masks whose channels are bits, thresholded at 128 as the release's own
  code does; class ``4 R + 2 G + B``: 0 waterbody/background, 1 divers, 2 plants, 3 wrecks,
  4 robots, 5 reefs, 6 fish, 7 sea floor. About 80 masks of the release have another size than
  their image: the class map is resized to the image with nearest neighbour, pixel centres
  aligned (class ids are labels, never blended: the rule PROTOCOL §1.3 applies to every
  label-like map, the same function) and the report lists each such mask under
  ``adjusted_files``.
- **ATLANTIS** (``images/<split>/<waterbody>/<id>.jpg`` + ``masks/<split>/<waterbody>/<id>.png``,
  the official loader's pairing): label PNGs of values 1..56, 0 unlabeled; class ``v`` becomes
  id ``v - 1``, 0 void. The 56 names are the release's ``labels_info.json`` (ids 1..56).
- **DRAM** (``DRAM_processed/{train,test}/<movement>/.../<name>.jpg`` and
  ``labels/<movement>/.../<name>.png``): a label belongs to the painting at the same relative
  path under ``test/`` (as the official loader pairs them), or under any other folder beside
  ``labels/`` when there is no ``test/``; the sample id is that relative path joined by ``_``
  (``<movement>_<...>_<name>``). Masks in the PASCAL VOC colours (palette PNG indices, or RGB
  colours) of its 12 classes; VOC's border index 255 and classes outside the 12 become void.

All samples with a mask are kept ("the entire dataset"); a mask that is missing, corrupt, of
another size than its image (SUIM aside), or holding an unknown colour is reported by file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, confined, need, read_image,
                                      read_label_png, same_size, sample_id)
from icl.data.dataset import VOID, DatasetMeta

IMAGE_TASKS = ("inpainting", "denoising", "colorization", "rotation", "flip")
IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp")
SUIM_CLASSES = ("waterbody", "human divers", "plants and sea-grass", "wrecks and ruins", "robots",
                "reefs and invertebrates", "fish and vertebrates", "sea-floor and rocks")
DRAM_CLASSES = ("background", "bird", "boat", "bottle", "cat", "chair", "cow", "dog", "horse", "person",
                "pottedplant", "sheep")
_DRAM_VOC_IDS = (0, 3, 4, 5, 8, 9, 10, 12, 13, 15, 16, 17)  # PASCAL VOC index of each DRAM class
# smhassanerfani/atlantis, adk/images_analyser/labels_info.json: ids 1..56 (0 is background/unlabeled)
ATLANTIS_CLASSES = (
    "bicycle", "boat", "breakwater", "bridge", "building", "bus", "canal", "car", "cliff", "culvert",
    "cypress_tree", "dam", "ditch", "fence", "fire_hydrant", "fjord", "flood", "glaciers", "hot_spring", "lake",
    "levee", "lighthouse", "mangrove", "marsh", "motorcycle", "offshore_platform", "parking_meter", "person", "pier",
    "pipeline", "pole", "puddle", "rapids", "reservoir", "river", "river_delta", "road", "sea", "ship", "shoreline",
    "sidewalk", "sky", "snow", "spillway", "swimming_pool", "terrain", "traffic_sign", "train", "truck", "umbrella",
    "vegetation", "wall", "water_tower", "water_well", "waterfall", "wetland",
)


def voc_colormap() -> np.ndarray:
    """The PASCAL VOC palette: uint8 [256, 3], index bits spread over R, G, B from the high bit down."""
    cmap = np.zeros((256, 3), np.uint8)
    for i in range(256):
        c, rgb = i, [0, 0, 0]
        for j in range(8):
            for ch in range(3):
                rgb[ch] |= ((c >> ch) & 1) << (7 - j)
            c >>= 3
        cmap[i] = rgb
    return cmap


def _run(conv: Conversion, items: list[tuple[str, Path, Path]], decode: Callable[[Path], np.ndarray],
         resize: bool = False) -> Report:
    """Read each (id, image, mask) on the pool; keep it, or report the file that failed.
    ``resize``: a mask of another size than its image is resized to it (nearest)."""
    def load(item: tuple[str, Path, Path]) -> tuple[np.ndarray, np.ndarray, tuple[int, ...] | None]:
        _sid, image_path, mask_path = item
        image = read_image(image_path)
        labels = decode(mask_path)
        resized = labels.shape[:2] if labels.shape[:2] != image.shape[:2] else None
        if resized and resize:
            from icl.data.geometry import resize_nearest  # PROTOCOL §1.3's label-map resize

            labels = resize_nearest(labels, image.shape[:2])
        else:
            same_size(mask_path, labels.shape, image.shape, "mask")
        return image, labels, resized

    conv.expect(len(items))
    for (sid, image_path, mask_path), result in conv.map(load, items):
        if isinstance(result, BaseException):
            conv.bad(result, mask_path)
            continue
        image, labels, resized = result
        if resized:
            conv.adjusted(mask_path, f"mask {resized[1]}x{resized[0]} resized to its {image.shape[1]}x"
                                     f"{image.shape[0]} image (nearest)")
        conv.add(sid, image, raw=(image_path, mask_path), source=image_path, segmentation=labels.astype(np.uint8))
    return conv.finish()


def _by_stem(folder: Path, exts: tuple[str, ...]) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.iterdir()) if p.suffix.lower() in exts and not p.is_dir()}


def _decode_suim(path: Path) -> np.ndarray:
    rgb = read_image(path).astype(np.int64) >= 128
    return rgb[:, :, 0] * 4 + rgb[:, :, 1] * 2 + rgb[:, :, 2]


def convert_suim(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = raw / "SUIM" if (raw / "SUIM" / "TEST").is_dir() else raw
    meta = DatasetMeta(name="suim", version="train_val+TEST", tasks=("segmentation",) + IMAGE_TASKS,
                       classes=SUIM_CLASSES, description="SUIM underwater segmentation, 8 colour-coded classes")
    conv = Conversion(out, meta, raw, "suim", {"mask_size_mismatch": "resized to the image (nearest)"})
    items = []
    for part in ("train_val", "TEST"):
        images = _by_stem(need(root / part / "images", f"SUIM {part} images"), IMAGE_EXTS)
        masks = _by_stem(need(root / part / "masks", f"SUIM {part} masks"), IMAGE_EXTS)
        for stem, path in images.items():
            if stem not in masks:
                conv.bad(RawError(path, f"no mask {part}/masks/{stem}.bmp"))
                continue
            items.append((sample_id(stem), path, masks[stem]))
    return [_run(conv, items, _decode_suim, resize=True)]


def _decode_atlantis(path: Path) -> np.ndarray:
    v = read_label_png(path)
    if v.max() > len(ATLANTIS_CLASSES):
        raise RawError(path, f"label {int(v.max())} outside 0..{len(ATLANTIS_CLASSES)}")
    return np.where(v == 0, VOID, v - 1)


def _walk_files(folder: Path) -> list[Path]:
    """Files under ``folder`` (following no symbolic link to a folder), sorted by bytes of the path."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        found += [Path(dirpath) / f for f in filenames]
    return sorted(found, key=lambda p: os.fsencode(p))


def convert_atlantis(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = raw / "atlantis" if (raw / "atlantis" / "images").is_dir() else raw
    images_dir, masks_dir = need(root / "images", "ATLANTIS images/"), need(root / "masks", "ATLANTIS masks/")
    meta = DatasetMeta(name="atlantis", version="v1", tasks=("segmentation",) + IMAGE_TASKS,
                       classes=ATLANTIS_CLASSES,
                       description="ATLANTIS waterbody segmentation (56 labels; label k is class id k-1)")
    conv = Conversion(out, meta, raw, "atlantis")
    items = []
    for path in _walk_files(images_dir):
        if path.suffix.lower() not in (".jpg", ".jpeg"):
            continue
        mask = (masks_dir / path.relative_to(images_dir)).with_suffix(".png")
        if not mask.is_file():
            conv.bad(RawError(path, f"no mask {mask.relative_to(root)}"))
            continue
        items.append((sample_id(path.stem), path, mask))
    return [_run(conv, items, _decode_atlantis)]


def _decode_dram(path: Path) -> np.ndarray:
    lut = np.full(256, VOID, np.int64)
    lut[list(_DRAM_VOC_IDS)] = np.arange(len(_DRAM_VOC_IDS))
    with open(confined(path), "rb") as f:
        head = f.read(26)
    # PNG colour type (byte 25): 3 = palette, 0 = grey -> indices; else RGB colours
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 26 and head[25] in (0, 3):
        return lut[read_label_png(path)]
    rgb = read_image(path).astype(np.int64)
    code = (rgb[:, :, 0] << 16) | (rgb[:, :, 1] << 8) | rgb[:, :, 2]
    cmap = voc_colormap().astype(np.int64)
    keys = (cmap[:, 0] << 16) | (cmap[:, 1] << 8) | cmap[:, 2]
    order = np.argsort(keys)
    pos = np.clip(np.searchsorted(keys[order], code), 0, 255)
    index = order[pos]
    unknown = keys[index] != code
    if unknown.any():
        y, x = np.argwhere(unknown)[0]
        raise RawError(path, f"colour {rgb[y, x].tolist()} at (x={x}, y={y}) is not a PASCAL VOC colour")
    return lut[index]


def _dram_root(raw: Path) -> Path:
    for cand in (raw, raw / "DRAM_processed"):
        if (cand / "labels").is_dir():
            return cand
    found = sorted(p.parent for p in raw.rglob("labels") if p.is_dir())
    if found:
        return found[0]
    raise ConvertError(f"no labels/ folder under {raw}: expected the labelled test set of DRAM_processed")


def convert_dram(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = _dram_root(raw)
    labels_dir = root / "labels"
    labels = [p for p in _walk_files(labels_dir) if p.suffix.lower() == ".png"]
    if not labels:
        raise ConvertError(f"no labels/**/*.png under {raw}: expected the labelled test set of DRAM_processed")
    # the official loader reads test/<rel>.jpg for labels/<rel>.png; without test/, any sibling split
    splits = [root / "test"] if (root / "test").is_dir() else sorted(
        p for p in root.iterdir() if p.is_dir() and p.name != "labels")
    meta = DatasetMeta(name="dram", version="labelled-test", tasks=("segmentation",) + IMAGE_TASKS,
                       classes=DRAM_CLASSES, description="DRAM art paintings, the labelled subset (12 classes)")
    conv = Conversion(out, meta, raw, "dram")
    items = []
    for mask in labels:
        rel = mask.relative_to(labels_dir).with_suffix("")
        found = [p for split in splits for ext in (".jpg", ".jpeg", ".png")
                 if (p := (split / rel).with_suffix(ext)).is_file()]
        if len(found) != 1:
            why = "no painting" if not found else f"{len(found)} paintings"
            where = " or ".join(f"{s.name}/" for s in splits) or "a split folder"
            conv.bad(RawError(mask, f"{why} at {rel.as_posix()}.jpg under {where}"))
            continue
        items.append((sample_id(*rel.parts), found[0], mask))
    return [_run(conv, items, _decode_dram)]
