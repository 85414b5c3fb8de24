"""IXI brain MRI: T2 -> PD modality transfer on the most prominent slice, three planes.

Raw files: ``IXI-T2.tar`` and ``IXI-PD.tar`` unpacked anywhere under RAW_DIR:
``IXI<nnn>-<site>-<nnnn>-T2.nii.gz`` and ``...-PD.nii.gz`` (NIfTI, read with nibabel one
volume at a time). T2 and PD of a subject are one dual-echo acquisition on one voxel grid.
Each volume pair is reoriented to RAS (``nibabel.as_closest_canonical``); per plane (axis 0
sagittal, 1 coronal, 2 axial) the slice of highest total T2 intensity is taken, from both
modalities, shown with anterior/superior up (``numpy.rot90``) and scaled to 8 bits by its
own 99.5th percentile. Writes ``ixi-axial``, ``ixi-coronal``, ``ixi-sagittal``: T2 in
``images/``, PD in ``paired/pd``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from icl.data.convert._common import (Conversion, ConvertError, RawError, Report, check_declared, confined, describe,
                                      sample_id)
from icl.data.dataset import DatasetMeta

PLANES = {"sagittal": 0, "coronal": 1, "axial": 2}
_NAME = re.compile(r"^(IXI\d+-[A-Za-z]+-\d+)-(T2|PD)\.nii(\.gz)?$")


def to_uint8(slice_: np.ndarray) -> np.ndarray | None:
    """A 2-D slice scaled by its 99.5th percentile to uint8 [H, W, 3] grey; None when empty."""
    top = float(np.percentile(slice_, 99.5))
    if not np.isfinite(top) or top <= 0:
        return None
    grey = np.rint(np.clip(slice_ / top, 0.0, 1.0) * 255.0).astype(np.uint8)
    return np.ascontiguousarray(np.repeat(grey[:, :, None], 3, axis=2))


def prominent_slice(volume: np.ndarray, axis: int) -> int:
    """Index of the slice along ``axis`` with the highest total intensity (the first on ties)."""
    other = tuple(a for a in range(3) if a != axis)
    return int(np.argmax(volume.sum(axis=other)))


def _load(path: Path) -> np.ndarray:
    import nibabel as nib

    real = confined(path)
    try:
        img = nib.load(str(real))
        # the header's dims, checked before the voxels are read (decoded as float64)
        # nib.load is typed as returning the base image class; what it loads here (NIfTI) has a shape
        check_declared(path, img.shape, 8, "NIfTI volume")  # type: ignore[attr-defined]
        data = np.asarray(nib.as_closest_canonical(img).dataobj, dtype=np.float64)
    except RawError:
        raise
    except Exception as exc:  # nibabel/gzip/zlib raise many types on a hostile file
        raise RawError(path, f"cannot read NIfTI ({describe(exc)})") from None
    if data.ndim == 4 and data.shape[3] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise RawError(path, f"expected a 3-D volume, got shape {data.shape}")
    return np.nan_to_num(data, nan=0.0, posinf=0.0, neginf=0.0)


def convert(raw: Path, out: Path, global_seed: int) -> list[Report]:
    volumes: dict[str, dict[str, Path]] = {}
    for path in sorted(raw.rglob("IXI*.nii*")):
        m = _NAME.match(path.name)
        if m:
            volumes.setdefault(m.group(1), {})[m.group(2)] = path
    if not volumes:
        raise ConvertError(f"no IXI*-T2.nii.gz / IXI*-PD.nii.gz under {raw}: unpack IXI-T2.tar and IXI-PD.tar there")
    convs = {}
    for plane in PLANES:
        meta = DatasetMeta(name=f"ixi-{plane}", version="T2-PD-prominent-slice", tasks=(
            "modality_transfer", "inpainting", "denoising", "rotation", "flip"), pairs=(("modality_transfer", "pd"),),
            description=f"IXI T2 -> PD, the {plane} slice of highest T2 intensity per subject")
        convs[plane] = Conversion(out, meta, raw, "ixi", {"plane": plane})
    for subject, found in sorted(volumes.items()):
        sid = sample_id(subject)
        if set(found) != {"T2", "PD"}:
            have = next(iter(found.values()))
            for conv in convs.values():
                conv.drop(sid, f"only {', '.join(found)} was acquired", raw=(have,))
            continue
        try:
            t2, pd = _load(found["T2"]), _load(found["PD"])
            if t2.shape != pd.shape:
                raise RawError(found["PD"], f"PD volume {pd.shape} is not on the T2 grid {t2.shape}")
        except Exception as err:  # one subject's failure is that subject's
            for conv in convs.values():
                conv.bad(err, found["T2"])
            continue
        for plane, axis in PLANES.items():
            k = prominent_slice(t2, axis)
            image = to_uint8(np.rot90(np.take(t2, k, axis=axis)))
            pair = to_uint8(np.rot90(np.take(pd, k, axis=axis)))
            if image is None or pair is None:
                convs[plane].drop(sid, "the slice is empty in T2 or PD", raw=(found["T2"], found["PD"]))
                continue
            convs[plane].add(sid, image, raw=(found["T2"], found["PD"]), paired={"pd": pair})
    return [convs[p].finish() for p in ("axial", "coronal", "sagittal")]
