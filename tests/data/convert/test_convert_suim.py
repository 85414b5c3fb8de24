"""SUIM: RGB bit-coded BMP masks with near-binary noise, train_val/ and TEST/ folders.

Published layout (xahidbuffon/SUIM, data/test/masks/): ``TEST/masks/`` holds the combined masks
and one sub-folder of per-class binary masks (``FV/``, ``HD/``, ``RI/``, ``RO/``, ``WR/``), which
are not samples; about 80 masks of the release differ in size from their image: resized (nearest)."""

from __future__ import annotations

import cv2
import numpy as np

from icl.data import load_dataset
from icl.data.convert import convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb


def test_convert_suim(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw", tmp_path / "out"
    truth = {}
    for part, stems in (("train_val", ["d_r_122_", "f_r_1058_"]), ("TEST", ["n_l_5_"])):
        for stem in stems:
            classes = gen.integers(0, 8, (7, 9))
            bits = np.stack([(classes >> 2) & 1, (classes >> 1) & 1, classes & 1], -1)
            # colours as saved by the annotation tool: not exactly 0/255
            colour = np.where(bits == 1, gen.integers(200, 256, bits.shape), gen.integers(0, 60, bits.shape))
            write_rgb(raw / part / "masks" / f"{stem}.bmp", colour.astype(np.uint8))
            write_rgb(raw / part / "images" / f"{stem}.jpg", gen.integers(0, 256, (7, 9, 3), dtype=np.uint8))
            truth[stem] = classes
    write_rgb(raw / "TEST" / "images" / "lonely.jpg", np.zeros((7, 9, 3), np.uint8))  # no mask
    write_rgb(raw / "TEST" / "images" / "small.jpg", np.zeros((8, 6, 3), np.uint8))
    small = np.zeros((4, 3, 3), np.uint8)
    small[:2, :, 0] = 255  # robots (4) in the top half
    write_rgb(raw / "TEST" / "masks" / "small.bmp", small)  # half the image's size: resized
    for cls in ("FV", "HD", "RI", "RO", "WR"):  # the per-class binary masks of the test split
        write_rgb(raw / "TEST" / "masks" / cls / "n_l_5_.bmp", np.full((7, 9, 3), 255, np.uint8))
    (raw / "TEST" / "images" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    write_rgb(raw / "TEST" / "masks" / "broken.bmp", np.zeros((7, 9, 3), np.uint8))

    [report] = convert("suim", raw, out)
    assert report.kept == 4
    ds = load_dataset(out / "suim")
    assert len(ds.meta.classes) == 8 and ds.meta.classes[0] == "waterbody"
    assert ds.ids() == sorted([*truth, "small"])
    want_small = np.zeros((8, 6), np.uint8)
    want_small[:4] = 4
    np.testing.assert_array_equal(ds.load("small").annotations["segmentation"], want_small)
    for stem, classes in truth.items():
        s = ds.load(stem)
        np.testing.assert_array_equal(s.annotations["segmentation"], classes)
        jpeg = cv2.cvtColor(cv2.imread(str(next(raw.rglob(f"{stem}.jpg")))), cv2.COLOR_BGR2RGB)
        np.testing.assert_array_equal(s.image, jpeg)
    bad = report_of(out, "suim")["bad_files"]
    assert set(bad) == {"TEST/images/lonely.jpg", "TEST/images/broken.jpg"}
    assert "JPEG" in bad["TEST/images/broken.jpg"]
    adjusted = report_of(out, "suim")["adjusted_files"]
    assert adjusted == {"TEST/masks/small.bmp": "mask 3x4 resized to its 6x8 image (nearest)"}
