"""Sea-thru (Akkaynak and Treibitz): underwater images with metric depth maps.

Raw layout: dive sites ``D1`` .. ``D5``, each with its images in ``Raw/`` (PNG, JPEG or TIFF;
camera raw ``.ARW``/``.NEF`` must be developed first, e.g. with dcraw to 16-bit TIFF) and its
depth maps as float TIFFs named ``depth<image stem>.tif`` (read with tifffile; metres, 0 or NaN
where unknown) in a folder named ``depth/`` (the original release), ``depthMaps/`` (its later
packaging) or ``depth_resized/`` (the Kaggle copy, maps at a reduced size); a site holding
several uses the first of ``depth``, ``depthMaps``, ``depth_resized`` and reports the others as
unused. A depth map of another size than its image, with the same aspect ratio, gets the image
resized to it (area interpolation; listed under ``adjusted_files``); any other disagreement is
reported. Every image with a depth map is kept ("all images with the associated depth maps");
an image without one is dropped with that reason, and a site folder without any depth folder is
reported, so nothing is skipped silently.

Depth range (PROTOCOL §1.4): 0 to the 99.5th percentile of the valid depths of the train split
(``icl.data.contexts.split_ids`` with ``global_seed``), rounded up to the next whole metre;
computed after writing, from a centimetre histogram (bounded memory), and stored in meta.json.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

from icl.data.contexts import split_ids
from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, check_declared, confined, describe,
                                      read_image, sample_id)
from icl.data.dataset import DatasetMeta

IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
RAW_EXTS = (".arw", ".nef", ".cr2", ".dng")
DEPTH_DIRS = ("depth", "depthMaps", "depth_resized")  # in order of preference
PERCENTILE = 99.5
BIN = 0.01  # metres per histogram bin
MAX_DEPTH = 1000.0


def _read_depth(path: Path) -> np.ndarray:
    import tifffile

    real = confined(path)
    try:
        with tifffile.TiffFile(real) as tif:
            page = tif.pages.first
            check_declared(path, page.shape, 8, "depth TIFF (as float64)")
            depth = np.asarray(page.asarray(), np.float64)
    except RawError:
        raise
    except Exception as exc:  # tifffile raises many types on a hostile file
        raise RawError(path, f"cannot read depth TIFF ({describe(exc)})") from None
    if depth.ndim == 3 and depth.shape[2] == 1:
        depth = depth[:, :, 0]
    if depth.ndim != 2:
        raise RawError(path, f"expected a single-channel depth map, got shape {depth.shape}")
    return np.where(np.isfinite(depth) & (depth > 0), depth, -1.0)


def _fit(image: np.ndarray, depth_shape: tuple[int, int], depth_path: Path) -> np.ndarray:
    (h, w), (dh, dw) = image.shape[:2], depth_shape
    if (h, w) == (dh, dw):
        return image
    if abs(h / w - dh / dw) > 0.01:
        raise RawError(depth_path, f"depth map is {dw}x{dh} but its image is {w}x{h} (another aspect ratio)")
    return cv2.resize(image, (dw, dh), interpolation=cv2.INTER_AREA)


def depth_max(histogram: np.ndarray) -> float:
    """The 99.5th percentile (by histogram bin) of the counted depths, rounded up to a metre."""
    total = int(histogram.sum())
    rank = int(math.ceil(PERCENTILE / 100.0 * total))
    k = int(np.searchsorted(np.cumsum(histogram), max(rank, 1)))
    return float(max(1, math.ceil((k + 1) * BIN - 1e-9)))


def _sites(raw: Path) -> list[tuple[Path, Path, list[Path]]]:
    """(site, depth folder used, other depth folders) for every site holding a depth folder."""
    by_site: dict[Path, list[Path]] = {}
    for name in DEPTH_DIRS:
        for p in raw.rglob(name):
            if p.is_dir() and not p.is_symlink():
                by_site.setdefault(p.parent, []).append(p)
    out = []
    for site, found in sorted(by_site.items()):
        found.sort(key=lambda p: DEPTH_DIRS.index(p.name))
        out.append((site, found[0], found[1:]))
    return out


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    sites = _sites(raw)
    if not sites:
        raise ConvertError(f"no <site>/depth/ (or depthMaps/, depth_resized/) folders under {raw}: expected D1..D5 "
                           "with Raw/ and their depth maps")
    meta = DatasetMeta(name="seathru", version="D1-D5", tasks=(
        "depth", "inpainting", "denoising", "colorization", "rotation", "flip"), depth_range=(0.0, 1.0),
        description="Sea-thru underwater images with depth maps (m)")
    conv = Conversion(out, meta, raw, "seathru", {"percentile": PERCENTILE, "global_seed": global_seed})
    site_dirs = {s for s, _, _ in sites}
    for top in sorted(p for p in raw.iterdir() if p.is_dir()):
        if top not in site_dirs and not any(top in s.parents for s in site_dirs) and any(
                q.suffix.lower() in IMAGE_EXTS + RAW_EXTS for q in top.rglob("*")):
            conv.bad(RawError(top, f"site without a depth folder ({', '.join(DEPTH_DIRS)}): its images are not used"))
    for site, depth_dir, unused in sites:
        for other in unused:
            conv.bad(RawError(other, f"not used: {site.name} also has {depth_dir.name}/, which is preferred"))
        depth_dirs = [depth_dir] + unused
        images: dict[str, Path] = {}
        # a developed image wins over the camera raw file of the same stem
        for p in sorted(site.rglob("*"), key=lambda q: (q.suffix.lower() in IMAGE_EXTS, str(q))):
            if p.suffix.lower() in IMAGE_EXTS + RAW_EXTS and not any(d in p.parents for d in depth_dirs):
                images[p.stem] = p
        used: set[str] = set()
        for depth_path in sorted(depth_dir.glob("*.tif*")):
            stem = depth_path.stem[len("depth"):] if depth_path.stem.startswith("depth") else depth_path.stem
            image_path = images.get(stem)
            used.add(stem)
            try:
                if image_path is None:
                    raise RawError(depth_path, f"no image {stem}.* in {site.name}")
                if image_path.suffix.lower() in RAW_EXTS:
                    raise RawError(image_path, "camera raw file: develop it to PNG/TIFF first (docs/datasets.md)")
                depth = _read_depth(depth_path)
                decoded = read_image(image_path)
                image = _fit(decoded, depth.shape, depth_path)
            except Exception as err:  # one sample's failure is that sample's
                conv.bad(err, depth_path)
                continue
            sid = sample_id(site.name, stem)
            if not (depth > 0).any():
                conv.drop(sid, "depth has no valid pixel", raw=(image_path, depth_path))
                continue
            if image is not decoded:
                conv.adjusted(image_path, f"image {decoded.shape[1]}x{decoded.shape[0]} resized to its depth map "
                                          f"{image.shape[1]}x{image.shape[0]} (area)")
            conv.add(sid, image, raw=(image_path, depth_path), source=image_path if image is decoded else None,
                     depth=depth)
        for stem, path in sorted(images.items()):
            if stem not in used:
                conv.drop(sample_id(site.name, stem), f"no depth map in {depth_dir.name}/")
    conv.flush()
    # the range needs the train split, which needs every kept id: a second pass over what was written
    train = split_ids(conv.ids(), global_seed, meta.name)["train"] or conv.ids()
    histogram = np.zeros(int(MAX_DEPTH / BIN) + 1, np.int64)
    for sid in train:
        d = np.load(conv.root / "depth" / f"{sid}.npy")
        valid = d[d > 0].astype(np.float64)
        histogram += np.bincount(np.minimum(np.floor(valid / BIN), len(histogram) - 1).astype(np.int64),
                                 minlength=len(histogram))
    conv.set_meta(depth_range=(0.0, depth_max(histogram)))
    return [conv.finish()]
