"""DeepCrack: train_img/test_img JPEGs with train_lab/test_lab crack masks (grey levels along the curve)."""

from __future__ import annotations

import cv2
import numpy as np

from icl.data import load_dataset
from icl.data.convert import convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb


def test_convert_deepcrack(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "DeepCrack", tmp_path / "out"
    truth = {}
    for split, stem in (("train", "11125-1"), ("train", "11215-5"), ("test", "IMG15-1")):
        mask = np.zeros((9, 11), np.uint8)
        mask[4, 1:10] = 255
        mask[3, 5] = 140  # anti-aliased border pixels
        mask[5, 5] = 100
        (raw / f"{split}_lab").mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(raw / f"{split}_lab" / f"{stem}.png"), mask)
        write_rgb(raw / f"{split}_img" / f"{stem}.jpg", gen.integers(0, 256, (9, 11, 3), dtype=np.uint8))
        truth[stem] = mask >= 128
    write_rgb(raw / "test_img" / "nolabel.jpg", np.zeros((9, 11, 3), np.uint8))
    write_rgb(raw / "test_img" / "wrong.jpg", np.zeros((9, 11, 3), np.uint8))
    cv2.imwrite(str(raw / "test_lab" / "wrong.png"), np.zeros((11, 9), np.uint8))

    [report] = convert("deepcrack", tmp_path / "raw", out)
    ds = load_dataset(out / "deepcrack")
    assert report.kept == 3 and ds.ids() == sorted(truth)
    for stem, edges in truth.items():
        got = ds.load(stem).annotations["edges"]
        np.testing.assert_array_equal(got, edges)
        assert got[3, 5] and not got[5, 5]
    bad = report_of(out, "deepcrack")["bad_files"]
    assert "no crack mask nolabel.png" in bad["DeepCrack/test_img/nolabel.jpg"]
    assert "crack mask is 9x11 but its image is 11x9" in bad["DeepCrack/test_lab/wrong.png"]
