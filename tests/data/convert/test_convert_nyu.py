"""NYU Depth V2: the labeled .mat (MATLAB v7.3 = HDF5, column-major, 512-byte header) and the
894 -> 40 class mapping (MATLAB v5)."""

from __future__ import annotations

import json

import h5py
import numpy as np
import scipy.io

from icl.data import load_dataset
from icl.data.__main__ import main
from tests.data.convert._convert_raw import report_of, rng


def _fabricate(raw, gen):
    h, w, n = 6, 8, 4
    images = gen.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    depths = gen.uniform(0.5, 9.0, (n, h, w)).astype(np.float32)
    depths[0, 0, 0], depths[0, 1, 1] = 0.0, np.nan  # holes of the Kinect
    depths[1] = 0.0  # no valid pixel: dropped
    labels = gen.integers(0, 895, (n, h, w)).astype(np.uint16)
    labels[0, 2, :] = 0  # unlabeled
    labels[2, 3, 3] = 900  # outside the 894 classes: a bad frame
    path = raw / "nyu_depth_v2_labeled.mat"
    with h5py.File(path, "w", userblock_size=512) as f:
        # MATLAB stores [H, W, 3, N] column-major: h5py sees the axes reversed
        f["images"] = images.transpose(0, 3, 2, 1)
        f["depths"] = depths.transpose(0, 2, 1)
        f["labels"] = labels.transpose(0, 2, 1)
    with open(path, "r+b") as f:
        f.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64".ljust(116, b" "))
    map_class = gen.integers(1, 41, 894).astype(np.float64)
    names = np.empty((1, 40), dtype=object)
    for i in range(40):
        names[0, i] = f"class{i + 1}"
    scipy.io.savemat(raw / "classMapping40.mat", {"mapClass": map_class[None, :], "className": names})
    return images, depths, labels, map_class.astype(np.int64)


def test_convert_nyu(tmp_path, capsys):
    gen = rng()
    raw, out = tmp_path / "raw", tmp_path / "out"
    raw.mkdir()
    images, depths, labels, map_class = _fabricate(raw, gen)
    assert main(["convert", "nyuv2", str(raw), str(out)]) == 0
    printed = capsys.readouterr()
    assert "nyuv2: 2/1449 (paper) samples kept" in printed.out and "1 dropped: depth has no valid pixel" in printed.out
    assert "outside the 894 classes" in printed.err

    ds = load_dataset(out / "nyuv2")
    assert ds.ids() == ["0001", "0004"]
    assert ds.meta.depth_range == (0.0, 10.0) and ds.meta.classes[0] == "class1" and len(ds.meta.classes) == 40
    for sid in ds.ids():
        i = int(sid) - 1
        s = ds.load(sid)
        np.testing.assert_array_equal(s.image, images[i])
        want = np.where(np.isfinite(depths[i]) & (depths[i] > 0), depths[i], -1.0)
        np.testing.assert_array_equal(s.annotations["depth"], want.astype(np.float32))
        lut = np.concatenate([[255], map_class - 1])
        np.testing.assert_array_equal(s.annotations["segmentation"], lut[labels[i]])
    assert (ds.load("0001").annotations["segmentation"][2] == 255).all()

    report = report_of(out, "nyuv2")
    assert report["dropped"] == {"0002": "depth has no valid pixel"}
    assert list(report["bad_files"]) == ["nyu_depth_v2_labeled.mat#3"]
    manifest = json.loads((out / "nyuv2" / "manifest.json").read_text())
    assert set(manifest["raw_files"]) == {"nyu_depth_v2_labeled.mat", "classMapping40.mat"}
    assert "images/0001.png" in manifest["files"] and "meta.json" in manifest["files"]


def test_convert_nyu_missing_mapping(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    with h5py.File(raw / "nyu_depth_v2_labeled.mat", "w"):
        pass
    assert main(["convert", "nyuv2", str(raw), str(tmp_path / "out")]) == 1
    assert "missing the 894 -> 40 class mapping" in capsys.readouterr().err
