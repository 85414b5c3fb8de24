"""CDD-11: clear/ and one folder per degradation type of the test split, names shared."""

from __future__ import annotations

import numpy as np

from icl.data import load_dataset
from icl.data.convert import cdd, convert
from tests.data.convert._convert_raw import report_of, rng, write_rgb


def test_convert_cdd(tmp_path, monkeypatch):
    monkeypatch.setattr(cdd, "PER_TYPE", 3)  # the release has 200 per type; 3 keep the test small
    gen, raw, out = rng(), tmp_path / "raw" / "CDD-11_test", tmp_path / "out"
    names = ["000001", "000002", "000003", "000004"]
    clear = {n: gen.integers(0, 256, (6, 7, 3), dtype=np.uint8) for n in names}
    degraded = {}
    for n in names:
        write_rgb(raw / "clear" / f"{n}.png", clear[n])
        for kind in cdd.TYPES:
            if kind == "snow" and n == "000002":
                continue  # a missing degraded image
            degraded[kind, n] = gen.integers(0, 256, (6, 7, 3), dtype=np.uint8)
            write_rgb(raw / kind / f"{n}.png", degraded[kind, n])

    reports = convert("cdd", tmp_path / "raw", out)
    assert [r.dataset for r in reports] == ["cdd", *(f"cdd-{k}" for k in cdd.TYPES)]
    base = load_dataset(out / "cdd")
    assert base.ids() == names[:3]
    assert report_of(out, "cdd")["dropped"] == {"000004": "beyond the first 3 test images"}
    for kind in cdd.TYPES:
        ds = load_dataset(out / f"cdd-{kind}")
        assert ds.meta.tasks == ("artifact_removal",) and ds.meta.pair_kind("artifact_removal") == kind
        for sid in ds.ids():
            s = ds.load(sid)
            np.testing.assert_array_equal(s.image, clear[sid])
            np.testing.assert_array_equal(s.annotations["paired"][kind], degraded[kind, sid])
    assert load_dataset(out / "cdd-snow").ids() == ["000001", "000003"]
    assert "no snow/000002.* degraded image" in report_of(out, "cdd-snow")["bad_files"]["CDD-11_test/clear/000002.png"]
