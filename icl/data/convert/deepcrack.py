"""DeepCrack (537 road and pavement images): edges from the crack masks.

Raw layout (the release's ``DeepCrack.zip``): ``train_img/*.jpg`` + ``train_lab/*.png`` and
``test_img/*.jpg`` + ``test_lab/*.png``, a label per image by file stem. A crack mask is a
one-to-few pixel wide curve; its pixels >= 128 are the edge map (the masks are saved with a
few grey levels along the curve). All images are kept.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, read_grey, read_image, same_size,
                                      sample_id)
from icl.data.dataset import DatasetMeta


def _root(raw: Path) -> Path:
    for cand in (raw, raw / "DeepCrack"):
        if (cand / "train_img").is_dir() or (cand / "test_img").is_dir():
            return cand
    raise ConvertError(f"no train_img/ or test_img/ under {raw} (or {raw / 'DeepCrack'}): unpack DeepCrack.zip there")


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    root = _root(raw)
    meta = DatasetMeta(name="deepcrack", version="537", tasks=(
        "edges", "inpainting", "denoising", "colorization", "rotation", "flip"),
        description="DeepCrack crack masks as edge maps (train + test)")
    conv = Conversion(out, meta, raw, "deepcrack")
    items = []
    for split in ("train", "test"):
        img_dir, lab_dir = root / f"{split}_img", root / f"{split}_lab"
        if img_dir.is_dir():
            items += [(p, lab_dir / f"{p.stem}.png") for p in sorted(img_dir.iterdir())
                      if p.suffix.lower() in (".jpg", ".jpeg", ".png")]

    def load(item: tuple[Path, Path]) -> tuple[np.ndarray, np.ndarray]:
        path, label = item
        image = read_image(path)
        if not label.is_file():
            raise RawError(path, f"no crack mask {label.name} in {label.parent.name}/")
        mask = read_grey(label)
        same_size(label, mask.shape, image.shape, "crack mask")
        return image, mask >= 128

    conv.expect(len(items))
    for (path, label), result in conv.map(load, items):
        if isinstance(result, BaseException):
            conv.bad(result, path)
            continue
        image, edges = result
        conv.add(sample_id(path.stem), image, raw=(path, label), source=path, edges=edges)
    return [conv.finish()]
