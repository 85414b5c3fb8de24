"""IXI: gzipped NIfTI T2/PD volumes named IXI<nnn>-<site>-<nnnn>-<modality>, a non-RAS affine."""

from __future__ import annotations

import nibabel as nib
import numpy as np

from icl.data import load_dataset
from icl.data.convert import convert
from icl.data.convert.ixi import to_uint8
from tests.data.convert._convert_raw import report_of, rng


def _save(path, data, affine):
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(data.astype(np.int16), affine), str(path))


def test_convert_ixi(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw", tmp_path / "out"
    flip_x = np.diag([-1.0, 1.0, 1.0, 1.0])  # stored left-right mirrored (LAS): the converter reorients
    t2 = gen.integers(0, 100, (5, 6, 7))
    t2[3, :, :] += 400  # the brightest sagittal slice (in RAS: index 5 - 1 - 3 = 1)
    t2[:, 2, :] += 300
    t2[:, :, 4] += 200
    pd = gen.integers(0, 100, (5, 6, 7))
    _save(raw / "IXI-T2" / "IXI002-Guys-0828-T2.nii.gz", t2, flip_x)
    _save(raw / "IXI-PD" / "IXI002-Guys-0828-PD.nii.gz", pd, flip_x)
    _save(raw / "IXI-T2" / "IXI012-HH-1211-T2.nii.gz", t2, flip_x)  # no PD
    (raw / "IXI-T2" / "IXI013-HH-1212-T2.nii.gz").write_bytes(b"\x1f\x8b truncated")
    _save(raw / "IXI-PD" / "IXI013-HH-1212-PD.nii.gz", pd, flip_x)

    reports = convert("ixi", raw, out)
    assert [r.dataset for r in reports] == ["ixi-axial", "ixi-coronal", "ixi-sagittal"]
    ras_t2, ras_pd = t2[::-1], pd[::-1]
    for plane, axis, k in (("sagittal", 0, 1), ("coronal", 1, 2), ("axial", 2, 4)):
        ds = load_dataset(out / f"ixi-{plane}")
        assert ds.ids() == ["IXI002-Guys-0828"] and ds.meta.pair_kind("modality_transfer") == "pd"
        s = ds.load("IXI002-Guys-0828")
        np.testing.assert_array_equal(s.image, to_uint8(np.rot90(np.take(ras_t2.astype(float), k, axis=axis))))
        np.testing.assert_array_equal(s.annotations["paired"]["pd"],
                                      to_uint8(np.rot90(np.take(ras_pd.astype(float), k, axis=axis))))
        rep = report_of(out, f"ixi-{plane}")
        assert rep["dropped"] == {"IXI012-HH-1211": "only T2 was acquired"}
        assert "cannot read NIfTI" in rep["bad_files"]["IXI-T2/IXI013-HH-1212-T2.nii.gz"]


def test_to_uint8_percentile_scaling():
    s = np.arange(200, dtype=float).reshape(10, 20)
    got = to_uint8(s)
    assert got.shape == (10, 20, 3) and got[0, 0, 0] == 0 and got[-1, -1, 0] == 255
    assert to_uint8(np.zeros((3, 3))) is None
