"""Sea-thru: D<n>/Raw images and D<n>/depth/depth<stem>.tif float depth maps (0 and NaN unknown)."""

from __future__ import annotations

import math

import numpy as np
import tifffile

from icl.data import load_dataset
from icl.data.contexts import split_ids
from icl.data.convert import convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb


def test_convert_seathru(tmp_path):
    gen, raw, out = rng(), tmp_path / "raw", tmp_path / "out"
    depths = {}
    for site, stems in (("D1", ["T_S03017", "T_S03020", "T_S03023"]), ("D3", ["T_S04856", "T_S04857", "T_S04901"])):
        for stem in stems:
            d = gen.uniform(0.5, 12.0, (6, 8)).astype(np.float32)
            d[0, :3] = 0.0
            d[1, 1] = np.nan
            (raw / site / "depth").mkdir(parents=True, exist_ok=True)
            tifffile.imwrite(raw / site / "depth" / f"depth{stem}.tif", d)
            # the image is twice the depth map's resolution: resized down to it
            write_rgb(raw / site / "Raw" / f"{stem}.png", gen.integers(0, 256, (12, 16, 3), dtype=np.uint8))
            (raw / site / "Raw" / f"{stem}.ARW").write_bytes(b"raw sensor data")  # the developed PNG wins
            depths[f"{site}_{stem}"] = d
    tifffile.imwrite(raw / "D3" / "depth" / "depthT_S04999.tif", np.zeros((6, 8), np.float32))
    write_rgb(raw / "D3" / "Raw" / "T_S04999.png", np.zeros((6, 8, 3), np.uint8))  # no valid depth: dropped
    tifffile.imwrite(raw / "D3" / "depth" / "depthT_S05000.tif", np.ones((6, 8), np.float32))
    (raw / "D3" / "Raw" / "T_S05000.ARW").write_bytes(b"raw sensor data")
    tifffile.imwrite(raw / "D3" / "depth" / "depthT_S05001.tif", np.ones((6, 8), np.float32))  # no image

    [report] = convert("seathru", raw, out)
    ds = load_dataset(out / "seathru")
    assert ds.ids() == sorted(depths)
    for sid, d in depths.items():
        s = ds.load(sid)
        assert s.image.shape == (6, 8, 3)
        want = np.where(np.isfinite(d) & (d > 0), d, -1.0).astype(np.float32)
        np.testing.assert_array_equal(s.annotations["depth"], want)
    train = split_ids(ds.ids(), 0, "seathru")["train"]
    valid = np.concatenate([depths[t][depths[t] > 0] for t in train])
    assert ds.meta.depth_range == (0.0, float(math.ceil(np.percentile(valid, 99.5))))
    rep = report_of(out, "seathru")
    assert rep["dropped"] == {"D3_T_S04999": "depth has no valid pixel"}
    assert "camera raw file" in rep["bad_files"]["D3/Raw/T_S05000.ARW"]
    assert "no image T_S05001" in rep["bad_files"]["D3/depth/depthT_S05001.tif"]


def test_seathru_depth_folder_names(tmp_path):
    """The three packagings' depth folders: ``depth/`` (the original release), ``depthMaps/`` and
    the Kaggle copy's ``depth_resized/`` (maps at a reduced size). No primary loader was reachable
    to confirm them; the names are the ones the independent check found in the copies it used.
    A site without any depth folder, and an image without a depth map, are reported."""
    raw, out = tmp_path / "raw", tmp_path / "out"
    for site, folder in (("D1", "depth"), ("D2", "depthMaps"), ("D3", "depth_resized")):
        (raw / site / folder).mkdir(parents=True)
        tifffile.imwrite(raw / site / folder / "depthT_1.tif", np.full((6, 8), 2.0, np.float32))
        write_rgb(raw / site / "Raw" / "T_1.png", np.zeros((12, 16, 3), np.uint8))
    write_rgb(raw / "D2" / "Raw" / "T_2.png", np.zeros((6, 8, 3), np.uint8))  # no depth map
    (raw / "D1" / "depth_resized").mkdir()  # a second packaging beside depth/: not used
    tifffile.imwrite(raw / "D1" / "depth_resized" / "depthT_1.tif", np.full((3, 4), 2.0, np.float32))
    write_rgb(raw / "D4" / "Raw" / "T_9.png", np.zeros((6, 8, 3), np.uint8))  # a site without depth

    [report] = convert("seathru", raw, out)
    assert load_dataset(out / "seathru").ids() == ["D1_T_1", "D2_T_1", "D3_T_1"]
    rep = report_of(out, "seathru")
    assert rep["dropped"] == {"D2_T_2": "no depth map in depthMaps/"}
    assert "site without a depth folder" in rep["bad_files"]["D4"]
    assert "not used" in rep["bad_files"]["D1/depth_resized"]
    assert set(rep["adjusted_files"]) == {"D1/Raw/T_1.png", "D2/Raw/T_1.png", "D3/Raw/T_1.png"}
