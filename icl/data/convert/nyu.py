"""NYU Depth V2, labeled subset (1449 RGB-D frames): depth and 40-class segmentation.

Raw files (docs/datasets.md): ``nyu_depth_v2_labeled.mat`` (MATLAB v7.3, i.e. HDF5; read with
h5py one frame at a time: ``images`` [N, 3, W, H] uint8, ``depths`` [N, W, H] float metres,
``labels`` [N, W, H] of the 894 raw classes, 0 unlabeled; MATLAB's column-major arrays appear
transposed) and ``classMapping40.mat`` (MATLAB v5, scipy.io: ``mapClass`` 894 -> 1..40 and
``className``, the 40 names). Unlabeled pixels become void (255); class ``k`` of the 40 is id
``k - 1``. Depth range 0-10 m (PROTOCOL §1.4).

The HDF5 file is opened as data only: each of the three datasets must be a hard link to a
dataset stored in the file itself (no soft or external link, no external storage, no virtual
dataset: those would read other files), with a per-frame size under the image pixel cap,
checked before any frame is read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, check_declared, confined, describe,
                                      need)
from icl.data.images import max_pixels_default
from icl.data.dataset import VOID, DatasetMeta

MAT = "nyu_depth_v2_labeled.mat"
MAPPING = "classMapping40.mat"


def _mapping(path: Path) -> tuple[np.ndarray, list[str]]:
    """Lookup raw class (0..894) -> canonical id (0..39, 255 for unlabeled), and the 40 names."""
    import scipy.io

    try:
        real = confined(path)
        for name, shape, _cls in scipy.io.whosmat(str(real)):
            check_declared(path, shape, 8, f"variable {name}", cap=64 << 20)
        mat = scipy.io.loadmat(str(real), variable_names=("mapClass", "className"))
    except RawError as exc:
        raise ConvertError(str(exc)) from None
    except Exception as exc:  # RuntimeError: scipy refuses MATLAB v7.3 files; many types on a hostile file
        raise ConvertError(f"cannot read {path} ({describe(exc)})") from None
    if "mapClass" not in mat or "className" not in mat:
        raise ConvertError(f"{path} has no mapClass/className variables")
    mapping = np.asarray(mat["mapClass"]).reshape(-1).astype(np.int64)
    names = [str(np.asarray(n).reshape(-1)[0]) for n in np.asarray(mat["className"]).reshape(-1)]
    if len(names) != 40 or mapping.min() < 1 or mapping.max() > 40:
        raise ConvertError(f"{path}: expected 40 class names and mapClass values in 1..40")
    lut = np.concatenate([[VOID], mapping - 1]).astype(np.int64)
    return lut, names


def _dataset(f, key: str, path: Path):
    """``f[key]`` when it is a plain dataset stored in this file with a sane per-frame size."""
    import h5py

    link = f.get(key, getlink=True)
    if link is None:
        raise ConvertError(f"{path} has no dataset {key!r}")
    if not isinstance(link, h5py.HardLink):
        raise ConvertError(f"{path}: {key!r} is a {type(link).__name__} (reads another object or file): refused")
    obj = f[key]
    if not isinstance(obj, h5py.Dataset):
        raise ConvertError(f"{path}: {key!r} is not a dataset")
    if obj.is_virtual or obj.external:
        raise ConvertError(f"{path}: {key!r} is stored outside the file (virtual or external storage): refused")
    if len(obj.shape) < 3 or obj.shape[0] > 100_000:
        raise ConvertError(f"{path}: {key!r} has shape {obj.shape}, expected [N <= 100000, ...] frames")
    frame = 1
    for d in obj.shape[1:]:
        frame *= int(d)
    if frame > 3 * max_pixels_default():
        raise ConvertError(f"{path}: {key!r} declares {frame:,} values per frame, over the image pixel cap")
    return obj


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    import h5py

    mat_path = need(raw / MAT, "the labeled subset (HDF5 .mat)")
    lut, names = _mapping(need(raw / MAPPING, "the 894 -> 40 class mapping"))
    meta = DatasetMeta(name="nyuv2", version="labeled-1449/40-classes", tasks=(
        "depth", "segmentation", "inpainting", "denoising", "colorization", "rotation", "flip"),
        classes=tuple(names), depth_range=(0.0, 10.0),
        description="NYU Depth V2 labeled subset: depth (m) and the 40-class segmentation")
    conv = Conversion(out, meta, raw, "nyuv2", {"mapping": MAPPING})
    try:
        f = h5py.File(confined(mat_path), "r")
    except RawError as exc:
        raise ConvertError(str(exc)) from None
    except Exception as exc:
        raise ConvertError(f"cannot open {mat_path} as MATLAB v7.3/HDF5 ({describe(exc)})") from None
    with f:
        images, depths, labels = (_dataset(f, key, mat_path) for key in ("images", "depths", "labels"))
        n = images.shape[0]
        if depths.shape[0] != n or labels.shape[0] != n:
            raise ConvertError(f"{mat_path}: {n} images but {depths.shape[0]} depths and {labels.shape[0]} labels")
        for i in range(n):
            sid = f"{i + 1:04d}"
            where = f"{mat_path}#{i + 1}"
            try:
                image = np.ascontiguousarray(np.asarray(images[i]).transpose(2, 1, 0))
                depth = np.asarray(depths[i], np.float64).T
                raw_labels = np.asarray(labels[i]).T.astype(np.int64)
                if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                    raise RawError(where, f"image is {image.dtype} {image.shape}, expected uint8 RGB")
                if depth.shape != image.shape[:2] or raw_labels.shape != image.shape[:2]:
                    raise RawError(where, f"depth {depth.shape} / labels {raw_labels.shape} differ from the "
                                          f"image {image.shape[:2]}")
                if raw_labels.min() < 0 or raw_labels.max() >= len(lut):
                    raise RawError(where, f"label {int(raw_labels.max())} outside the 894 classes")
            except Exception as err:  # one frame's failure is that frame's
                conv.bad(err, Path(where))
                continue
            depth = np.where(np.isfinite(depth) & (depth > 0), depth, -1.0)
            if not (depth > 0).any():
                conv.drop(sid, "depth has no valid pixel")
                continue
            conv.add(sid, image, depth=depth, segmentation=lut[raw_labels].astype(np.uint8))
    conv.use(mat_path, raw / MAPPING)
    return [conv.finish()]
