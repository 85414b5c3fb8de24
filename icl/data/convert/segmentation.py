"""Colour- and palette-coded segmentation releases: SUIM, ATLANTIS, DRAM.

- **SUIM** (``train_val/`` and ``TEST/``, each ``images/*.jpg`` + ``masks/*.bmp``): RGB masks
  whose channels are bits, thresholded at 128 as the release's own code does; class
  ``4 R + 2 G + B``: 0 waterbody/background, 1 divers, 2 plants, 3 wrecks, 4 robots, 5 reefs,
  6 fish, 7 sea floor.
- **ATLANTIS** (``images/<split>/**/<id>.jpg`` + ``masks/<split>/**/<id>.png``): label PNGs
  (palette or grey) of values 1..56, 0 unlabeled; class ``v`` becomes id ``v - 1``, 0 void.
- **DRAM** (its ``labels/**/<id>.png`` beside the paintings of the labelled test set): masks
  in the PASCAL VOC colours (palette PNG indices, or RGB colours) of its 12 classes; VOC's
  border index 255 and classes outside the 12 become void.

All samples with a mask are kept ("the entire dataset"); a mask that is missing, corrupt,
of another size than its image, or holding an unknown colour is reported by file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, need, read_image, read_label_png,
                                      same_size, sample_id)
from icl.data.dataset import VOID, DatasetMeta

IMAGE_TASKS = ("inpainting", "denoising", "colorization", "rotation", "flip")
IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp")
SUIM_CLASSES = ("waterbody", "human divers", "plants and sea-grass", "wrecks and ruins", "robots",
                "reefs and invertebrates", "fish and vertebrates", "sea-floor and rocks")
DRAM_CLASSES = ("background", "bird", "boat", "bottle", "cat", "chair", "cow", "dog", "horse", "person",
                "pottedplant", "sheep")
_DRAM_VOC_IDS = (0, 3, 4, 5, 8, 9, 10, 12, 13, 15, 16, 17)  # PASCAL VOC index of each DRAM class
ATLANTIS_CLASSES = 56


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


def _run(conv: Conversion, items: Iterable[tuple[str, Path, Path]], decode: Callable[[Path], np.ndarray]) -> Report:
    for sid, image_path, mask_path in items:
        try:
            image = read_image(image_path)
            labels = decode(mask_path)
            same_size(mask_path, labels.shape, image.shape, "mask")
        except RawError as err:
            conv.bad(err)
            continue
        conv.add(sid, image, raw=(image_path, mask_path), segmentation=labels.astype(np.uint8))
    return conv.finish()


def _by_stem(folder: Path, exts: tuple[str, ...]) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.iterdir()) if p.suffix.lower() in exts}


def _decode_suim(path: Path) -> np.ndarray:
    rgb = read_image(path).astype(np.int64) >= 128
    return rgb[:, :, 0] * 4 + rgb[:, :, 1] * 2 + rgb[:, :, 2]


def convert_suim(raw: Path, out: Path, global_seed: int) -> list[Report]:
    meta = DatasetMeta(name="suim", version="train_val+TEST", tasks=("segmentation",) + IMAGE_TASKS,
                       classes=SUIM_CLASSES, description="SUIM underwater segmentation, 8 colour-coded classes")
    conv = Conversion(out, meta, raw, "suim")
    items = []
    for part in ("train_val", "TEST"):
        images = _by_stem(need(raw / part / "images", f"SUIM {part} images"), IMAGE_EXTS)
        masks = _by_stem(need(raw / part / "masks", f"SUIM {part} masks"), IMAGE_EXTS)
        for stem, path in images.items():
            if stem not in masks:
                conv.bad(RawError(path, f"no mask {part}/masks/{stem}.bmp"))
                continue
            items.append((sample_id(stem), path, masks[stem]))
    return [_run(conv, items, _decode_suim)]


def _decode_atlantis(path: Path) -> np.ndarray:
    v = read_label_png(path)
    if v.max() > ATLANTIS_CLASSES:
        raise RawError(path, f"label {int(v.max())} outside 0..{ATLANTIS_CLASSES}")
    return np.where(v == 0, VOID, v - 1)


def convert_atlantis(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = raw / "atlantis" if (raw / "atlantis" / "images").is_dir() else raw
    images_dir, masks_dir = need(root / "images", "ATLANTIS images/"), need(root / "masks", "ATLANTIS masks/")
    meta = DatasetMeta(name="atlantis", version="v1", tasks=("segmentation",) + IMAGE_TASKS,
                       classes=tuple(f"atlantis-{k:02d}" for k in range(1, ATLANTIS_CLASSES + 1)),
                       description="ATLANTIS waterbody segmentation (56 labels; label k is class id k-1)")
    conv = Conversion(out, meta, raw, "atlantis")
    items = []
    for path in sorted(p for p in images_dir.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg")):
        mask = (masks_dir / path.relative_to(images_dir)).with_suffix(".png")
        if not mask.is_file():
            conv.bad(RawError(path, f"no mask {mask.relative_to(root)}"))
            continue
        items.append((sample_id(path.stem), path, mask))
    return [_run(conv, items, _decode_atlantis)]


def _decode_dram(path: Path) -> np.ndarray:
    lut = np.full(256, VOID, np.int64)
    lut[list(_DRAM_VOC_IDS)] = np.arange(len(_DRAM_VOC_IDS))
    from PIL import Image

    try:
        with Image.open(path) as im:
            mode = im.mode
    except OSError as exc:
        raise RawError(path, f"cannot decode label image ({exc})") from exc
    if mode in ("P", "L"):
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


def convert_dram(raw: Path, out: Path, global_seed: int) -> list[Report]:
    labels = sorted(p for p in raw.rglob("*.png") if "labels" in p.relative_to(raw).parts[:-1])
    if not labels:
        raise ConvertError(f"no labels/**/*.png under {raw}: expected the labelled test set of DRAM_processed")
    paintings: dict[str, list[Path]] = {}
    for p in raw.rglob("*"):
        if p.suffix.lower() in IMAGE_EXTS and "labels" not in p.relative_to(raw).parts[:-1]:
            paintings.setdefault(p.stem, []).append(p)
    meta = DatasetMeta(name="dram", version="labelled-test", tasks=("segmentation",) + IMAGE_TASKS,
                       classes=DRAM_CLASSES, description="DRAM art paintings, the labelled subset (12 classes)")
    conv = Conversion(out, meta, raw, "dram")
    items = []
    for mask in labels:
        found = paintings.get(mask.stem, [])
        if len(found) != 1:
            why = "no painting" if not found else f"{len(found)} paintings"
            conv.bad(RawError(mask, f"{why} named {mask.stem}.* outside labels/"))
            continue
        rel = mask.relative_to(raw).parts[:-1]
        group = [p for p in rel if p != "labels"][-1:]  # the art movement folder, when there is one
        items.append((sample_id(*group, mask.stem), found[0], mask))
    return [_run(conv, items, _decode_dram)]
