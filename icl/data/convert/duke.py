"""Duke DME OCT (Chiu et al., BOE 2015): fluid segmentation and retinal-layer edges.

Raw files: ``Subject_01.mat`` .. ``Subject_10.mat`` (MATLAB v5, scipy.io): ``images`` [496,
768, 61] B-scans, ``manualLayers1`` [8, 768, 61] boundary rows (1-based, NaN where not
traced), ``manualFluid1`` [496, 768, 61] fluid regions (> 0; NaN or absent outside the
annotated B-scans) of the first grader. 11 B-scans per subject are annotated.

- ``duke-layers``: every B-scan with traced layers; the edge map is the topmost and the
  lowest boundary (paper A.3), each drawn as a 1 px polyline through its traced columns.
  It also carries the annotation-free tasks.
- ``duke-fluid``: the annotated B-scans with fluid; classes background / fluid. B-scans
  annotated without any fluid are dropped (the paper keeps those with cysts).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from icl.data.convert._common import Conversion, ConvertError, RawError, Report, check_declared, confined, describe
from icl.data.dataset import DatasetMeta


def layer_edges(layers: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """bool [H, W]: the first and last traced boundary of ``layers`` [L, W] (1-based rows, NaN
    untraced) as polylines joining consecutive traced columns."""
    edges = np.zeros(size, np.uint8)
    traced = [i for i in range(layers.shape[0]) if np.isfinite(layers[i]).any()]
    for i in sorted({traced[0], traced[-1]}) if traced else []:
        cols = np.flatnonzero(np.isfinite(layers[i]))
        rows = np.clip(np.floor(layers[i, cols] - 1 + 0.5), 0, size[0] - 1)
        pts = np.stack([cols, rows], 1).astype(np.int32)
        # a gap in the tracing stays a gap: split where columns are not consecutive
        for run in np.split(pts, np.flatnonzero(np.diff(cols) > 1) + 1):
            cv2.polylines(edges, [run.reshape(-1, 1, 2)], False, 1, thickness=1, lineType=cv2.LINE_8)
    return edges.astype(bool)


def _grey(bscan: np.ndarray) -> np.ndarray:
    b = np.asarray(bscan, np.float64)
    if np.issubdtype(np.asarray(bscan).dtype, np.floating) and np.nanmax(b) <= 1.0:  # doubles in [0, 1]
        b = b * 255.0
    grey = np.rint(np.clip(np.nan_to_num(b), 0, 255)).astype(np.uint8)
    return np.ascontiguousarray(np.repeat(grey[:, :, None], 3, axis=2))


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    import scipy.io

    files = sorted(raw.rglob("Subject_*.mat"))
    if not files:
        raise ConvertError(f"no Subject_*.mat under {raw}: unpack 2015_BOE_Chiu.zip there")
    layers_meta = DatasetMeta(name="duke-layers", version="BOE2015-grader1", tasks=(
        "edges", "inpainting", "denoising", "rotation", "flip"),
        description="Duke DME OCT: topmost and lowest traced retinal boundary as edges")
    fluid_meta = DatasetMeta(name="duke-fluid", version="BOE2015-grader1", tasks=("segmentation",),
                             classes=("background", "fluid"), description="Duke DME OCT: fluid (cyst) segmentation")
    lay, flu = Conversion(out, layers_meta, raw, "duke"), Conversion(out, fluid_meta, raw, "duke")
    for path in files:
        try:
            _subject(path, lay, flu)
        except Exception as exc:  # one subject file's failure is that file's
            lay.bad(exc, path)
            flu.bad(exc, path)
    return [lay.finish(), flu.finish()]


def _read_mat(path: Path) -> dict:
    """The three variables of a subject file, their declared sizes checked before loading."""
    import scipy.io

    real = confined(path)
    wanted = ("images", "manualLayers1", "manualFluid1")
    try:
        declared = scipy.io.whosmat(str(real))
    except Exception as exc:  # scipy fails on a truncated or foreign file with many types (v7.3: RuntimeError)
        raise RawError(path, f"cannot read MATLAB file ({describe(exc)})") from None
    for name, shape, _cls in declared:
        if name in wanted:
            check_declared(path, shape, 8, f"variable {name}")
    try:
        return scipy.io.loadmat(str(real), variable_names=wanted)
    except Exception as exc:
        raise RawError(path, f"cannot read MATLAB file ({describe(exc)})") from None


def _subject(path: Path, lay: Conversion, flu: Conversion) -> None:
    """Every annotated B-scan of one subject file; computed in full before anything is kept,
    so a file failing half-way adds no sample."""
    mat = _read_mat(path)
    if "images" not in mat or "manualLayers1" not in mat:
        raise RawError(path, "no images/manualLayers1 variables")
    images, layers = np.asarray(mat["images"]), np.asarray(mat["manualLayers1"], np.float64)
    fluid = mat.get("manualFluid1")
    if images.ndim != 3 or layers.ndim != 3 or layers.shape[2] != images.shape[2]:
        raise RawError(path, f"images {images.shape} and manualLayers1 {layers.shape} are not matching B-scan stacks")
    subject = path.stem.lower().replace("_", "")
    kept_layers, kept_fluid = [], []
    for k in range(images.shape[2]):
        traced = layers[:, :, k]
        if not np.isfinite(traced).any():
            continue  # not an annotated B-scan
        sid = f"{subject}_b{k + 1:02d}"
        image = _grey(images[:, :, k])
        kept_layers.append((sid, image, layer_edges(traced, image.shape[:2])))
        if fluid is None:
            continue
        f = np.asarray(fluid[:, :, k], np.float64)
        if f.shape != image.shape[:2]:
            raise RawError(path, f"manualFluid1 B-scan {k + 1} is {f.shape}, the image {image.shape[:2]}")
        kept_fluid.append((sid, image, (np.nan_to_num(f) > 0).astype(np.uint8)))
    for sid, image, edges in kept_layers:
        lay.add(sid, image, raw=(path,), edges=edges)
    for sid, image, seg in kept_fluid:
        if seg.any():
            flu.add(sid, image, raw=(path,), segmentation=seg)
        else:
            flu.drop(sid, "no fluid annotated", raw=(path,))
