"""LLVIP: visible/infrared JPEG pairs, VOC XML boxes, every 25th frame, frames whose boxes do not fit
three channels dropped (paper A.3: "more than three persons overlap").

Box convention from LLVIP's own scripts (bupt-ai-cz/LLVIP toolbox/voc2coco.py: bbox
``[xmin, ymin, xmax - xmin, ymax - ymin]``; toolbox/xml2txt_yolov5.py: width ``xmax - xmin``):
the VOC numbers are the box's edges, no 1-based shift."""

from __future__ import annotations

import numpy as np

from icl.benchmarks.vibe.tasks.registry import get_task
from icl.data import load_dataset
from icl.data.convert import convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb, write_text


def _voc(boxes, size=(12, 16)):
    objs = "".join(f"<object><name>person</name><pose>Unspecified</pose><bndbox><xmin>{b[0]}</xmin><ymin>{b[1]}"
                   f"</ymin><xmax>{b[2]}</xmax><ymax>{b[3]}</ymax></bndbox></object>" for b in boxes)
    return (f"<annotation><folder>LLVIP</folder><size><width>{size[1]}</width><height>{size[0]}</height>"
            f"<depth>3</depth></size>{objs}</annotation>")


def test_convert_llvip(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw" / "LLVIP", tmp_path / "out"
    frames = [f"{190001 + i:06d}" for i in range(155)]  # frames 0, 25, ..., 150 are used
    # 50: no person (kept); 75: four overlapping persons (dropped); 100: four persons apart (kept)
    plan = {0: [(2, 3, 6, 9)], 25: [(1, 1, 5, 5), (3, 3, 8, 8), (4, 2, 12, 7)], 50: [],
            75: [(1, 1, 3, 3)] * 4, 100: [(0, 0, 2, 2), (4, 0, 6, 2), (8, 0, 10, 2), (12, 0, 14, 2)],
            125: [(10, 4, 40, 40)], 150: "corrupt"}
    for i, stem in enumerate(frames):
        split = "train" if i < 120 else "test"
        write_rgb(raw / "visible" / split / f"{stem}.jpg", gen.integers(0, 256, (12, 16, 3), dtype=np.uint8))
        write_rgb(raw / "infrared" / split / f"{stem}.jpg", gen.integers(0, 256, (12, 16, 3), dtype=np.uint8))
        boxes = plan.get(i, [(1, 1, 3, 3)])
        write_text(raw / "Annotations" / f"{stem}.xml", "<annotation><size>" if boxes == "corrupt" else _voc(boxes))

    [report] = convert("llvip", tmp_path / "raw", out)
    ds = load_dataset(out / "llvip")
    assert ds.ids() == [frames[0], frames[25], frames[50], frames[100], frames[125]]
    rep = report_of(out, "llvip")
    assert rep["dropped"] == {frames[75]: "more than three person boxes overlap"}
    assert "cannot parse VOC XML" in rep["bad_files"][f"LLVIP/Annotations/{frames[150]}.xml"]
    np.testing.assert_array_equal(ds.load(frames[0]).annotations["boxes"], [[2, 3, 6, 9]])
    np.testing.assert_array_equal(ds.load(frames[125]).annotations["boxes"], [[10, 4, 16, 12]])  # clipped
    assert len(ds.load(frames[100]).annotations["boxes"]) == 4
    s = ds.load(frames[25])
    assert s.annotations["paired"]["infrared"].shape == (12, 16, 3)
    # three overlapping persons: one per channel of the encoding
    target = get_task("detection").make_pair(s, 0)[1]
    drawn = get_task("detection").encode(target, ds.meta)
    assert all((drawn[:, :, c] > 0).any() for c in range(3))
