"""The dataset registry (icl.data.registry): a dataset on disk is named by its meta.json, and its
folder carries that name (docs/data-format.md), else a DataError naming both; a vibe run records
such a folder as a data failure and runs the other datasets."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from icl.benchmarks.vibe.builtin import cache_path
from icl.data.dataset import DataError
from icl.data.registry import get_dataset, list_datasets
from icl.run.__main__ import main


def _copy(builtin_root, dst, name):
    shutil.copytree(cache_path("scenes-a", True), dst)
    meta = json.loads((dst / "meta.json").read_text())
    (dst / "meta.json").write_text(json.dumps({**meta, "name": name}))
    return dst


def test_folder_must_carry_the_meta_json_name(builtin_root, tmp_path):
    _copy(builtin_root, tmp_path / "mine", "mine")
    assert get_dataset("mine", root=tmp_path).meta.name == "mine"
    _copy(builtin_root, tmp_path / "renamed", "mine")  # a folder renamed by hand: its splits would change
    assert "renamed" in list_datasets(root=tmp_path)
    with pytest.raises(DataError, match=r"meta.json names the dataset 'mine', its folder is named 'renamed'.*"
                                        r"docs/data-format.md.*file '.*renamed/meta.json'"):
        get_dataset("renamed", root=tmp_path)
    with pytest.raises(DataError, match="its folder is named 'renamed'"):  # as a path too
        get_dataset(str(tmp_path / "renamed"))


def test_vibe_run_records_a_misnamed_folder_and_runs_the_rest(builtin_root, tmp_path, capsys):
    root = tmp_path / "data"
    _copy(builtin_root, root / "mine", "mine")
    _copy(builtin_root, root / os.fsdecode(b"bad\xff"), "other")  # a folder name that is not even UTF-8
    out = tmp_path / "out"
    code = main(["vibe", "--data-root", str(root), "--tasks", "edges", "--limit", "1", "--models", "identity",
                 "--out", str(out), "--no-plots", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err  # a data failure; the other dataset ran
    assert "meta.json names the dataset 'other', its folder is named 'bad\\xff'" in err
    results = json.loads((out / "results.json").read_text())
    assert list(results["data"]) == ["mine"]
