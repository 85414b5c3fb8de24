"""A sample whose file is missing is recorded as a failure and skipped; the rest of its dataset
and every other dataset run (issue 12: one missing file no longer drops a whole dataset)."""

from __future__ import annotations

import json
import shutil

from icl.data.registry import get_dataset
from icl.run.__main__ import main
from icl.store import Store
from tests.run.conftest import item_fields, score_rows


def _copy(src, root, name):
    """A copy of a built-in dataset as an on-disk dataset called ``name``."""
    dst = root / name
    shutil.copytree(src, dst)
    meta = json.loads((dst / "meta.json").read_text())
    meta["name"] = name
    (dst / "meta.json").write_text(json.dumps(meta))
    return dst


def test_missing_paired_file_skips_that_sample_only(fast_data, tmp_path, capsys):
    root = tmp_path / "data"
    mine = _copy(get_dataset("scenes-a", root=fast_data, fast=True).root, root, "mydata")
    missing = sorted((mine / "paired").rglob("*.png"))[0]
    missing.unlink()
    _copy(get_dataset("scenes-b", root=fast_data, fast=True).root, root, "otherdata")
    out = tmp_path / "out"
    code = main(["vibe", "--data-root", str(root), "--datasets", "mydata,otherdata", "--tasks", "artifact_removal",
                 "--models", "identity", "--out", str(out), "--no-plots", "--no-progress", "--qualitative", "0",
                 "--limit", "2", "--device", "cpu"])
    assert code == 1
    err = capsys.readouterr().err
    assert str(missing) in err and "mydata" in err and "1 data failures" in err
    rows = score_rows(out / "store.sqlite")
    assert {item_fields(r[0])[0] for r in rows} == {"mydata", "otherdata"} and {r[2] for r in rows} == {"ok"}
    assert missing.stem not in {item_fields(r[0])[2] for r in rows if item_fields(r[0])[0] == "mydata"}
    with Store(out / "store.sqlite") as store:
        failures = store.failures()
    assert [(f.stage, f.path) for f in failures] == [("data", str(missing))] and "'mydata'" in failures[0].message
    results = json.loads((out / "results.json").read_text())
    assert results["failures"]["count"] == 1
    assert set(results["fingerprints"]) == {"dataset:mydata", "dataset:otherdata", "lpips:alex"}
