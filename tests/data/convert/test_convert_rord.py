"""RORD-mini val: img/ frames, gt/ clean scenes (shared per scene), seg/ object masks."""

from __future__ import annotations

import cv2
import numpy as np

from icl.data import load_dataset
from icl.data.convert import convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb


def test_convert_rord(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "val", tmp_path / "out"
    (raw / "seg").mkdir(parents=True)
    write_rgb(raw / "gt" / "000123.png", gen.integers(0, 256, (10, 12, 3), dtype=np.uint8))
    for stem, box in (("000123_00", (2, 3, 6, 8)), ("000123_05", (0, 0, 12, 4)), ("000123_09", None)):
        write_rgb(raw / "img" / f"{stem}.png", gen.integers(0, 256, (10, 12, 3), dtype=np.uint8))
        mask = np.zeros((10, 12), np.uint8)
        if box:
            mask[box[1]:box[3], box[0]:box[2]] = 255
        cv2.imwrite(str(raw / "seg" / f"{stem}.png"), mask)
    write_rgb(raw / "img" / "000777_00.png", np.zeros((10, 12, 3), np.uint8))  # no ground truth

    [report] = convert("rord", tmp_path / "raw", out)
    ds = load_dataset(out / "rord")
    assert ds.ids() == ["000123_00", "000123_05"]
    s = ds.load("000123_00")
    assert s.annotations["paired_info"]["removed"] == {"box": [2.0, 3.0, 6.0, 8.0]}
    np.testing.assert_array_equal(s.annotations["paired"]["removed"], cv2.imread(str(raw / "gt" / "000123.png"))[..., ::-1])
    assert ds.load("000123_05").annotations["paired_info"]["removed"]["box"] == [0.0, 0.0, 12.0, 4.0]
    rep = report_of(out, "rord")
    assert rep["dropped"] == {"000123_09": "empty object mask"}
    assert "no ground truth" in rep["bad_files"]["val/img/000777_00.png"]
