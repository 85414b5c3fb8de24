"""RORD-mini (real-world object removal), its ``val`` split of 343 pairs.

Raw layout: a split folder holding ``img/`` (frames with the object, JPEG), ``gt/`` (the
same scene without it) and ``seg/`` (the object masks, PNG, nonzero = object), matched by file
stem; a ground truth may be shared by the frames of one scene, named by their stem up to its
last ``_``. The object's box (its mask's pixel extent, exclusive ends) goes into the sidecar
``paired/removed/<id>.json`` that the object-removal task outlines in red. Give RAW_DIR as the
split folder or its parent (``val/`` is then used).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, read_grey, read_image, same_size,
                                      sample_id)
from icl.data.dataset import DatasetMeta

IMAGE_EXTS = (".jpg", ".jpeg", ".png")
MASK_DIRS = ("seg", "mask", "masks")


def _split(raw: Path) -> Path:
    for cand in (raw, raw / "val", raw / "RORD" / "val"):
        if (cand / "img").is_dir() and (cand / "gt").is_dir():
            return cand
    raise ConvertError(f"no img/ and gt/ folders in {raw} or {raw / 'val'}: give the RORD-mini val split")


def mask_box(mask: np.ndarray) -> list[float] | None:
    """[x0, y0, x1, y1] (exclusive ends) of the nonzero pixels, or None when there are none."""
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return None
    return [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    split = _split(raw)
    mask_dir = next((split / d for d in MASK_DIRS if (split / d).is_dir()), None)
    if mask_dir is None:
        raise ConvertError(f"no object-mask folder ({', '.join(MASK_DIRS)}) in {split}")
    gts = {p.stem: p for p in (split / "gt").iterdir() if p.suffix.lower() in IMAGE_EXTS}
    meta = DatasetMeta(name="rord", version="mini-val", tasks=(
        "object_removal", "inpainting", "denoising", "colorization", "rotation", "flip"),
        pairs=(("object_removal", "removed"),), description="RORD-mini val: frame with object -> scene without it")
    conv = Conversion(out, meta, raw, "rord")
    for path in sorted(p for p in (split / "img").iterdir() if p.suffix.lower() in IMAGE_EXTS):
        stem = path.stem
        gt = gts.get(stem) or gts.get(stem.rsplit("_", 1)[0])
        mask_path = mask_dir / f"{stem}.png"
        sid = sample_id(stem)
        try:
            if gt is None:
                raise RawError(path, f"no ground truth gt/{stem}.* (or of its scene)")
            image, clean = read_image(path), read_image(gt)
            same_size(gt, clean.shape, image.shape, "ground truth")
            mask = read_grey(mask_path)
            same_size(mask_path, mask.shape, image.shape, "object mask")
        except Exception as err:  # one frame's failure is that frame's
            conv.bad(err, path)
            continue
        box = mask_box(mask)
        if box is None:
            conv.drop(sid, "empty object mask", raw=(path, mask_path))
            continue
        conv.add(sid, image, raw=(path, gt, mask_path), source=path, paired={"removed": clean}, paired_info={"removed": {"box": box}})
    return [conv.finish()]
