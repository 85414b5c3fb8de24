"""A sample whose file is missing is recorded as a failure and skipped; the rest of its dataset
and every other dataset run (issue 12: one missing file no longer drops a whole dataset)."""

from __future__ import annotations

import json
import shutil

from icl.data.registry import get_dataset
from icl.run.__main__ import main
from icl.store import Store


def test_missing_paired_file_skips_that_sample_only(fast_data, tmp_path, capsys):
    src = get_dataset("scenes-a", root=fast_data, fast=True).root
    root = tmp_path / "data"
    mine = root / "mydata"
    shutil.copytree(src, mine)
    meta = json.loads((mine / "meta.json").read_text())
    meta["name"] = "mydata"
    (mine / "meta.json").write_text(json.dumps(meta))
    missing = sorted((mine / "paired").rglob("*.png"))[0]
    missing.unlink()
    shutil.copytree(get_dataset("scenes-b", root=fast_data, fast=True).root, root / "scenes-b")
    out = tmp_path / "out"
    code = main(["--data-root", str(root), "--datasets", "mydata,scenes-b", "--tasks", "artifact_removal",
                 "--models", "identity", "--out", str(out), "--no-plots", "--no-progress", "--qualitative", "0"])
    assert code == 1
    err = capsys.readouterr().err
    assert str(missing) in err and "mydata" in err
    with Store(out / "store.sqlite") as store:
        rows, failures = store.results(), store.failures()
    assert {r.key.dataset for r in rows} == {"mydata", "scenes-b"}
    assert missing.stem not in {r.key.query_id for r in rows if r.key.dataset == "mydata"}
    assert any(f.path == str(missing) for f in failures)
