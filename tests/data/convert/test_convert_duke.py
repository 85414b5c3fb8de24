"""Duke OCT: MATLAB v5 subject files, 11 traced B-scans, NaN where untraced, fluid ids > 0."""

from __future__ import annotations

import numpy as np
import scipy.io

from icl.data import load_dataset
from icl.data.convert import convert
from icl.data.convert.duke import layer_edges
from tests.data.convert._convert_raw import report_of, rng


def test_layer_edges_top_and_bottom_boundaries():
    layers = np.full((8, 6), np.nan)
    layers[0] = [2, 2, 3, 3, 3, 3]  # 1-based rows
    layers[3] = 5  # a middle boundary: not drawn
    layers[7, :2] = 7
    layers[7, 4:] = 8  # a gap in the tracing stays open
    got = layer_edges(layers, (9, 6))
    want = np.zeros((9, 6), bool)
    want[[1, 1, 2, 2, 2, 2], range(6)] = True
    want[6, :2] = want[7, 4:] = True
    np.testing.assert_array_equal(got, want)


def test_convert_duke(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "2015_BOE_Chiu", tmp_path / "out"
    raw.mkdir(parents=True)
    h, w, n = 12, 10, 5
    images = gen.integers(0, 256, (h, w, n)).astype(np.uint8)
    layers = np.full((8, w, n), np.nan)
    fluid = np.full((h, w, n), np.nan)
    for k in (1, 3, 4):  # traced B-scans
        layers[0, :, k] = 3
        layers[7, :, k] = 10
        fluid[:, :, k] = 0
    fluid[5:7, 2:4, 1] = 1
    fluid[8, 5, 4] = 2  # a second cyst id
    scipy.io.savemat(raw / "Subject_01.mat", {"images": images, "manualLayers1": layers, "manualFluid1": fluid})
    (raw / "Subject_02.mat").write_bytes(b"MATLAB 5.0 MAT-file, broken")

    lay_rep, flu_rep = convert("duke", tmp_path / "raw", out)
    lay, flu = load_dataset(out / "duke-layers"), load_dataset(out / "duke-fluid")
    assert lay.ids() == ["subject01_b02", "subject01_b04", "subject01_b05"]
    assert flu.ids() == ["subject01_b02", "subject01_b05"]
    assert report_of(out, "duke-fluid")["dropped"] == {"subject01_b04": "no fluid annotated"}
    assert "cannot read MATLAB file" in report_of(out, "duke-layers")["bad_files"]["2015_BOE_Chiu/Subject_02.mat"]
    s = lay.load("subject01_b04")
    np.testing.assert_array_equal(s.image[:, :, 0], images[:, :, 3])
    assert np.flatnonzero(s.annotations["edges"].any(1)).tolist() == [2, 9]
    seg = flu.load("subject01_b02").annotations["segmentation"]
    assert seg.sum() == 4 and (seg[5:7, 2:4] == 1).all()
    assert flu.load("subject01_b05").annotations["segmentation"][8, 5] == 1
