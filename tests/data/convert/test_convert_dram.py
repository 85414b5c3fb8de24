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
    """Published layout (Nadavc220/SemanticSegmentationInArtPaintings, core/datasets/dram.py): the
    painting of ``labels/<movement>/<artist>/<name>.png`` is ``test/<movement>/<artist>/<name>.jpg``;
    the same name by two artists, and an unlabelled ``train/`` painting of that name, must not
    collide (pairing by stem lost 3 of 6 labelled paintings)."""
    gen, root, out = rng(), tmp_path / "raw" / "DRAM_processed", tmp_path / "out"
    cmap = voc_colormap()
    truth = {}
    for movement, artist, stem, as_rgb in (("realism", "courbet", "r1", False), ("realism", "millet", "r1", True),
                                           ("impressionism", "monet", "i7", True),
                                           ("impressionism", "renoir", "i7", False)):
        ids = gen.integers(0, 12, (8, 5))
        voc = VOC_IDS[ids]
        voc[0, 0] = 255  # the VOC border: void
        path = root / "labels" / movement / artist / f"{stem}.png"
        if as_rgb:
            write_rgb(path, cmap[voc])
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            im = Image.fromarray(voc.astype(np.uint8), mode="P")
            im.putpalette(cmap.reshape(-1).tolist())
            im.save(path)
        write_rgb(root / "test" / movement / artist / f"{stem}.jpg", gen.integers(0, 256, (8, 5, 3), dtype=np.uint8))
        # an unlabelled training painting of the same name
        write_rgb(root / "train" / movement / artist / f"{stem}.jpg", np.zeros((8, 5, 3), np.uint8))
        want = ids.copy()
        want[0, 0] = 255
        truth[f"{movement}_{artist}_{stem}"] = want
    write_rgb(root / "labels" / "realism" / "courbet" / "odd.png", np.full((8, 5, 3), 7, np.uint8))  # not VOC
    write_rgb(root / "test" / "realism" / "courbet" / "odd.jpg", np.zeros((8, 5, 3), np.uint8))
    write_rgb(root / "labels" / "realism" / "courbet" / "orphan.png", np.zeros((8, 5, 3), np.uint8))  # no painting

    [report] = convert("dram", tmp_path / "raw", out)
    ds = load_dataset(out / "dram")
    assert report.kept == 4 and ds.ids() == sorted(truth)
    for sid, want in truth.items():
        np.testing.assert_array_equal(ds.load(sid).annotations["segmentation"], want)
    bad = report_of(out, "dram")["bad_files"]
    assert set(bad) == {"DRAM_processed/labels/realism/courbet/odd.png", "DRAM_processed/labels/realism/courbet/orphan.png"}
    assert "is not a PASCAL VOC colour" in bad["DRAM_processed/labels/realism/courbet/odd.png"]
    assert "no painting" in bad["DRAM_processed/labels/realism/courbet/orphan.png"]
