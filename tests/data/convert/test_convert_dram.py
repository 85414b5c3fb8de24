"""DRAM: VOC-coloured label masks (palette PNG and RGB PNG) of the labelled test paintings."""

from __future__ import annotations

import numpy as np
from PIL import Image

from icl.data import load_dataset
from icl.data.convert import convert
from icl.data.convert.segmentation import voc_colormap
from tests.data.convert._convert_raw import report_of, rng, write_rgb

VOC_IDS = np.array([0, 3, 4, 5, 8, 9, 10, 12, 13, 15, 16, 17])


def test_voc_colormap_known_colours():
    cmap = voc_colormap()
    assert cmap[1].tolist() == [128, 0, 0] and cmap[15].tolist() == [192, 128, 128]  # aeroplane, person
    assert cmap[255].tolist() == [224, 224, 192]  # the border colour


def test_convert_dram(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "DRAM_processed" / "test", tmp_path / "out"
    cmap = voc_colormap()
    truth = {}
    for movement, stem, as_rgb in (("realism", "r1", False), ("impressionism", "i7", True)):
        ids = gen.integers(0, 12, (8, 5))
        voc = VOC_IDS[ids]
        voc[0, 0] = 255  # the VOC border: void
        path = raw / "labels" / movement / f"{stem}.png"
        if as_rgb:
            write_rgb(path, cmap[voc])
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            im = Image.fromarray(voc.astype(np.uint8), mode="P")
            im.putpalette(cmap.reshape(-1).tolist())
            im.save(path)
        write_rgb(raw / movement / f"{stem}.jpg", gen.integers(0, 256, (8, 5, 3), dtype=np.uint8))
        want = ids.copy()
        want[0, 0] = 255
        truth[f"{movement}_{stem}"] = want
    write_rgb(raw / "labels" / "realism" / "odd.png", np.full((8, 5, 3), 7, np.uint8))  # not a VOC colour
    write_rgb(raw / "realism" / "odd.jpg", np.zeros((8, 5, 3), np.uint8))
    write_rgb(raw / "labels" / "realism" / "orphan.png", np.zeros((8, 5, 3), np.uint8))  # no painting
    write_rgb(raw / "unlabelled" / "u1.jpg", np.zeros((8, 5, 3), np.uint8))  # not in the labelled subset

    [report] = convert("dram", tmp_path / "raw", out)
    ds = load_dataset(out / "dram")
    assert report.kept == 2 and ds.ids() == sorted(truth)
    for sid, want in truth.items():
        np.testing.assert_array_equal(ds.load(sid).annotations["segmentation"], want)
    bad = report_of(out, "dram")["bad_files"]
    assert "is not a PASCAL VOC colour" in bad["DRAM_processed/test/labels/realism/odd.png"]
    assert "no painting" in bad["DRAM_processed/test/labels/realism/orphan.png"]
