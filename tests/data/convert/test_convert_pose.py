"""AP-10K (COCO keypoint JSON, v flags, split files) and OpenThermalPose (YOLO pose labels)."""

from __future__ import annotations

import json

import numpy as np

from icl.data import load_dataset
from icl.data.convert import convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb, write_text


def _kp(n_visible, gen, w=20, h=14):
    kp = np.zeros((17, 3))
    kp[:n_visible, 0] = gen.uniform(0, w - 1, n_visible)
    kp[:n_visible, 1] = gen.uniform(0, h - 1, n_visible)
    kp[:n_visible, 2] = 2
    return kp


def test_convert_ap10k(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "ap-10k", tmp_path / "out"
    cats = [{"id": 1, "name": "antelope", "supercategory": "Bovidae"}, {"id": 7, "name": "bison"}]
    kp_a, kp_b = _kp(9, gen), _kp(7, gen)
    kp_a[0, :2] = [25.0, -3.0]  # a visible keypoint outside the image: clipped
    images = [{"id": i, "file_name": f"0000000{i}.jpg", "width": 20, "height": 14} for i in range(1, 8)]
    images[4]["width"] = 40  # disagrees with its image
    anns = [
        {"id": 10, "image_id": 1, "category_id": 7, "bbox": [2, 3, 30, 5], "keypoints": kp_a.reshape(-1).tolist()},
        {"id": 11, "image_id": 2, "category_id": 1, "bbox": [0, 0, 5, 5], "keypoints": kp_b.reshape(-1).tolist()},
        {"id": 12, "image_id": 3, "category_id": 1, "bbox": [0, 0, 5, 5], "keypoints": _kp(6, gen).reshape(-1).tolist()},
        {"id": 13, "image_id": 4, "category_id": 1, "bbox": [0, 0, 5, 5], "keypoints": _kp(9, gen).reshape(-1).tolist()},
        {"id": 14, "image_id": 4, "category_id": 1, "bbox": [5, 5, 5, 5], "keypoints": _kp(9, gen).reshape(-1).tolist()},
        {"id": 15, "image_id": 5, "category_id": 1, "bbox": [0, 0, 5, 5], "keypoints": _kp(9, gen).reshape(-1).tolist()},
        {"id": 16, "image_id": 7, "category_id": 1, "bbox": [0, 0, 5, 5], "keypoints": [1, 2, 2, 3]},  # malformed
        {"image_id": "x"},  # no usable image id
    ]
    split_of = {1: "train", 2: "val", 3: "test", 4: "train", 5: "test", 6: "val", 7: "val"}
    for split in ("train", "val", "test"):
        mine = [im for im in images if split_of[im["id"]] == split]
        ids = {im["id"] for im in mine}
        mine_anns = [a for a in anns if a["image_id"] in ids or (split == "test" and a["image_id"] == "x")]
        write_text(raw / "annotations" / f"ap10k-{split}-split1.json", json.dumps(
            {"images": mine, "annotations": mine_anns, "categories": cats}))
    for im in images:
        write_rgb(raw / "data" / im["file_name"], gen.integers(0, 256, (14, 20, 3), dtype=np.uint8))

    [report] = convert("ap10k", tmp_path / "raw", out)
    ds = load_dataset(out / "ap10k")
    assert ds.ids() == ["00000001", "00000002"] and ds.meta.classes == ("antelope", "bison")
    a = ds.load("00000001").annotations
    assert a["keypoints"][0].tolist() == [19.0, 0.0, 2.0]
    np.testing.assert_allclose(a["keypoints"][1:9, :2], kp_a[1:9, :2])
    np.testing.assert_array_equal(a["boxes"], [[2, 3, 20, 8]])
    assert a["box_classes"].tolist() == [1]
    assert (ds.load("00000002").annotations["keypoints"][:, 2] == 2).sum() == 7
    rep = report_of(out, "ap10k")
    assert rep["dropped"] == {"00000003": "fewer than 7 annotated keypoints", "00000004": "more than one animal",
                              "00000006": "no animal annotated"}
    assert "the annotation says 40x14, the image is 20x14" in rep["bad_files"]["ap-10k/data/00000005.jpg"]
    assert "not x, y, v triples" in rep["bad_files"]["ap-10k/data/00000007.jpg"]
    assert "has no integer image_id" in rep["bad_files"]["ap-10k/annotations/ap10k-test-split1.json"]


def test_convert_otp(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "OpenThermalPose", tmp_path / "out"

    def line(kp):
        norm = kp / np.array([20, 14, 1.0])
        return " ".join(f"{v:.6f}" for v in [0, 0.5, 0.5, 0.4, 0.8, *norm.reshape(-1)])

    kp = _kp(12, gen)
    kp[3, 2] = 1  # labelled, hidden: kept but not drawn
    for split, stem, lines in (("train", "1_5_1_16_frame517", [line(kp)]), ("val", "3370", [line(kp)] * 2),
                               ("test", "3471", []), ("test", "bad", ["0 0.5 0.5"])):
        write_rgb(raw / split / "images" / f"{stem}.png", np.repeat(gen.integers(0, 256, (14, 20, 1), dtype=np.uint8), 3, 2))
        if lines:
            write_text(raw / split / "labels" / f"{stem}.txt", "\n".join(lines) + "\n")

    [report] = convert("otp", tmp_path / "raw", out)
    ds = load_dataset(out / "otp")
    assert ds.ids() == ["train_1_5_1_16_frame517"]
    got = ds.load("train_1_5_1_16_frame517").annotations["keypoints"]
    np.testing.assert_allclose(got, kp, atol=1e-4)
    rep = report_of(out, "otp")
    assert rep["dropped"] == {"val_3370": "more than one person", "test_3471": "no person"}
    assert "expected 5 + 17 x 3" in rep["bad_files"]["OpenThermalPose/test/labels/bad.txt"]
