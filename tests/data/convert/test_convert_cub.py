"""CUB-200-2011: the text tables of ids, classes, boxes and part locations; 30 random per class."""

from __future__ import annotations

import numpy as np

from icl.data import load_dataset
from icl.data.convert import convert, cub
from icl.data.seeds import rng as seeded
from tests.data.convert._convert_raw import report_of, rng, write_rgb, write_text


def test_convert_cub(tmp_path, monkeypatch):
    monkeypatch.setattr(cub, "PER_CLASS", 2)  # 30 in the paper; 2 of 3 keep the test small
    gen, raw, out = rng(), tmp_path / "raw" / "CUB_200_2011", tmp_path / "out"
    folders = {1: "001.Black_footed_Albatross", 2: "002.Laysan_Albatross"}
    images, labels, boxes, locs = [], [], [], []
    for i in range(1, 7):
        c = 1 if i <= 3 else 2
        name = f"{folders[c]}/{folders[c].split('.')[1]}_{i:04d}_{100 + i}.jpg"
        images.append(f"{i} {name}")
        labels.append(f"{i} {c}")
        boxes.append(f"{i} 2.0 1.0 {30 if i == 2 else 8}.0 6.0")
        for part in range(1, 16):
            visible = int(part % 3 != 0)
            locs.append(f"{i} {part} {float(part) if visible else 0.0} {part / 2 if visible else 0.0} {visible}")
        if i != 5:
            write_rgb(raw / "images" / name, gen.integers(0, 256, (10, 16, 3), dtype=np.uint8))
    for name, lines in (("images.txt", images), ("image_class_labels.txt", labels), ("bounding_boxes.txt", boxes),
                        ("classes.txt", [f"{c} {f}" for c, f in folders.items()]), ("parts/part_locs.txt", locs),
                        ("parts/parts.txt", [f"{p} part{p}" for p in range(1, 16)])):
        write_text(raw / name, "\n".join(lines) + "\n")

    [report] = convert("cub", tmp_path / "raw", out)
    picked = {c: set(seeded(0, "cub", "*", folders[c], "subsample").choice(
        [1, 2, 3] if c == 1 else [4, 5, 6], 2, replace=False).tolist()) for c in folders}
    ds = load_dataset(out / "cub")
    assert ds.meta.classes == ("Black_footed_Albatross", "Laysan_Albatross")
    kept = {int(sid.split("_")[-2]) for sid in ds.ids()}
    assert kept == (picked[1] | picked[2]) - {5}
    rep = report_of(out, "cub")
    assert len(rep["dropped"]) == 2 and set(rep["dropped"].values()) == {"not among the 2 drawn for its class"}
    assert (5 in picked[2]) == any("Albatross_0005" in k for k in rep["bad_files"])
    for sid in ds.ids():
        i = int(sid.split("_")[-2])
        a = ds.load(sid).annotations
        np.testing.assert_array_equal(a["boxes"], [[2, 1, 16 if i == 2 else 10, 7]])  # image 2: clipped
        assert a["box_classes"].tolist() == [0 if i <= 3 else 1]
        kp = a["keypoints"]
        assert kp.shape == (15, 3) and kp[2, 2] == 0 and kp[0].tolist() == [1.0, 0.5, 2.0]
        assert kp[13].tolist() == [14.0, 7.0, 2.0] and kp[11, 2] == 0
