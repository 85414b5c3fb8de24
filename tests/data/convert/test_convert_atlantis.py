"""ATLANTIS: palette PNG masks (indices are the labels, 0 unlabeled) in per-waterbody folders.

Layout and pairing from the official loader (smhassanerfani/atlantis, AtlantisLoader.py:
``images/<split>/<waterbody>/<id>.jpg`` with ``masks/<split>/<waterbody>/<id>.png``, label - 1,
0 -> 255); class names from the release's list (adk/images_analyser/labels_info.json: id 1
bicycle, 2 boat, ..., 56 wetland; 0 background)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from icl.data import load_dataset
from icl.data.convert import convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb


def _palette_png(path, labels):
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.fromarray(labels.astype(np.uint8), mode="P")
    im.putpalette([(i * 37) % 256 for i in range(768)])  # colours unrelated to the labels
    im.save(path)


def test_convert_atlantis(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "atlantis", tmp_path / "out"
    truth = {}
    for split, folder, stem in (("train", "lake", "2917"), ("val", "river", "3302"), ("test", "sea", "4410")):
        labels = gen.integers(0, 57, (6, 10))
        _palette_png(raw / "masks" / split / folder / f"{stem}.png", labels)
        write_rgb(raw / "images" / split / folder / f"{stem}.jpg", gen.integers(0, 256, (6, 10, 3), dtype=np.uint8))
        truth[stem] = labels
    _palette_png(raw / "masks" / "test" / "sea" / "77.png", np.full((6, 10), 60))  # label 60 > 56
    write_rgb(raw / "images" / "test" / "sea" / "77.jpg", np.zeros((6, 10, 3), np.uint8))
    write_rgb(raw / "images" / "test" / "sea" / "78.jpg", np.zeros((6, 10, 3), np.uint8))  # no mask

    [report] = convert("atlantis", tmp_path / "raw", out)
    ds = load_dataset(out / "atlantis")
    assert report.kept == 3 and ds.ids() == sorted(truth) and len(ds.meta.classes) == 56
    # labels_info.json: 1 bicycle, 2 boat, 3 breakwater, 35 river, 38 sea, 56 wetland -> ids 0, 1, 2, 34, 37, 55
    names = ds.meta.classes
    assert (names[0], names[1], names[2], names[34], names[37], names[55]) == (
        "bicycle", "boat", "breakwater", "river", "sea", "wetland")
    # images kept as their JPEG bytes
    assert (out / "atlantis" / "images" / "2917.jpg").read_bytes() == (raw / "images" / "train" / "lake" / "2917.jpg").read_bytes()
    for stem, labels in truth.items():
        want = np.where(labels == 0, 255, labels - 1)
        np.testing.assert_array_equal(ds.load(stem).annotations["segmentation"], want)
    bad = report_of(out, "atlantis")["bad_files"]
    assert set(bad) == {"atlantis/masks/test/sea/77.png", "atlantis/images/test/sea/78.jpg"}
    assert "label 60 outside 0..56" in bad["atlantis/masks/test/sea/77.png"]
