"""The combination table against the paper: its per-dataset result tables (appendix A.10,
Tables 23-66) name, per task, the datasets evaluated; artifact removal is one CDD column there
and 11 degradation types in appendix A.3, which brings the total to the abstract's 106."""

from __future__ import annotations

import json

import pytest

from icl.benchmarks.vibe.combinations import CDD_TYPES, SPECS, combinations, kept_counts, present, spec
from icl.benchmarks.vibe.tasks.registry import list_tasks
from icl.data.dataset import TASK_PARTS

_BLOCK_A = ("AP-10K", "ATLANTIS", "Caltech Birds", "CDD", "DeepCrack", "DRAM", "Duke", "IXI (Axial)")
_BLOCK_B = ("IXI (Coronal)", "IXI (Sagittal)", "LLVIP", "NYU-D V2", "OTP", "RORD", "Sea-Thru", "SUIM")

# task -> column labels, transcribed from the paper's table headers (numbers: the tables)
PAPER_TABLES = {
    "segmentation": ("ATLANTIS", "DRAM", "Duke", "NYU-D V2", "SUIM"),  # 23
    "depth": ("NYU-D V2", "Sea-Thru"),  # 24
    "edges": ("DeepCrack", "Duke"),  # 25
    "detection": ("AP-10K", "Caltech Birds", "LLVIP"),  # 26
    "keypoints": ("AP-10K", "Caltech Birds", "OTP"),  # 27
    "artifact_removal": ("CDD",),  # 28-30
    "denoising": _BLOCK_A + _BLOCK_B,  # 31-36
    "inpainting": _BLOCK_A + _BLOCK_B,  # 37-42
    "colorization": ("AP-10K", "ATLANTIS", "Caltech Birds", "CDD", "DeepCrack", "DRAM", "LLVIP", "NYU-D V2",
                     "RORD", "Sea-Thru", "SUIM"),  # 43-48
    "modality_transfer": ("IXI (Axial)", "IXI (Coronal)", "IXI (Sagittal)", "LLVIP"),  # 49-51 ("style transfer")
    "flip": _BLOCK_A + _BLOCK_B,  # 52-57
    "rotation": _BLOCK_A + _BLOCK_B,  # 58-63
    "object_removal": ("RORD",),  # 64-66
}
# appendix A.3, CDD: haze, haze+rain, haze+snow, low+haze+rain, low+haze+snow, low+haze, low+rain,
# low, rain, snow, low+snow
PAPER_CDD_TYPES = {"haze", "haze+rain", "haze+snow", "low+haze+rain", "low+haze+snow", "low+haze", "low+rain",
                   "low", "rain", "snow", "low+snow"}


def test_106_combinations_match_the_paper_tables():
    combos = combinations()
    assert len(combos) == 106
    assert len({(c.dataset, c.task) for c in combos}) == 106
    paper = {(task, name) for task, names in PAPER_TABLES.items() for name in names}
    assert {(c.task, c.paper_name) for c in combos} == paper
    per_task = {t: sum(c.task == t for c in combos) for t in PAPER_TABLES}
    assert per_task == {t: len(n) for t, n in PAPER_TABLES.items()} | {"artifact_removal": 11}
    # one dataset per degradation type, each pairing with its own paired/<kind>
    ar = [spec(c.dataset) for c in combos if c.task == "artifact_removal"]
    assert {s.pairs["artifact_removal"].replace("_", "+") for s in ar} == PAPER_CDD_TYPES
    assert set(CDD_TYPES) == {s.pairs["artifact_removal"] for s in ar}


def test_specs_are_consistent_with_the_format():
    assert {c.task for c in combinations()} <= set(list_tasks())
    assert len({s.name for s in SPECS}) == len(SPECS)
    for s in SPECS:
        for task in s.annotated:
            if "paired" in TASK_PARTS[task]:
                assert task in s.pairs, s.name
        assert (s.classes is not None) == bool({"segmentation", "detection"} & set(s.annotated)), s.name
        assert (s.depth_range is not None) == ("depth" in s.annotated), s.name
    # the annotation-free tasks run once per paper dataset (Duke: on one of its two subsets)
    generic = [s.paper_name for s in SPECS if s.generic]
    assert len(generic) == len(set(generic)) == 16
    assert spec("nyuv2").depth_range == (0.0, 10.0)
    with pytest.raises(KeyError, match="unknown benchmark dataset"):
        spec("imagenet")


def test_present_reads_meta_under_the_root(tmp_path):
    assert present(tmp_path) == []
    (tmp_path / "suim").mkdir()
    (tmp_path / "suim" / "meta.json").write_text(json.dumps({"name": "suim", "version": "1",
                                                             "tasks": ["segmentation", "flip"]}))
    (tmp_path / "nyuv2").mkdir()  # meta.json and no completion manifest: a killed conversion
    (tmp_path / "nyuv2" / "meta.json").write_text(json.dumps({"name": "nyuv2", "version": "1", "tasks": ["flip"]}))
    assert present(tmp_path) == []
    (tmp_path / "suim" / "manifest.json").write_text(json.dumps({"complete": True, "dataset": "suim", "kept": 1}))
    assert kept_counts(tmp_path) == ["suim: 1/1635 samples (kept/paper) -- warning: 1634 short of the paper's count"]
    (tmp_path / "nyuv2" / "manifest.json").write_text(json.dumps({"complete": True, "dataset": "nyuv2"}))
    (tmp_path / "nyuv2" / "meta.json").write_text("{not json")  # unreadable: not present
    (tmp_path / "otp").mkdir()  # no meta.json
    assert [(c.dataset, c.task) for c in present(tmp_path)] == [("suim", "segmentation"), ("suim", "flip")]
