"""Built-in datasets: deterministic, valid canonical data with exact, consistent annotations."""

import filecmp
import os
from pathlib import Path

import numpy as np
import pytest

from icl.benchmarks.vibe.builtin import BUILTINS, cache_path
from icl.benchmarks.vibe.builtin.scenes import KEYPOINT_SEPARATION
from icl.data.dataset import TASK_PARTS
from icl.data.registry import get_dataset, list_datasets
from icl.benchmarks.vibe.tasks.registry import list_tasks

NAMES = ("scenes-a", "scenes-b", "photos")


@pytest.mark.parametrize("name", NAMES)
def test_fast_builtin_is_small_non_square_and_valid(builtin_root, name):
    ds = get_dataset(name, root=builtin_root, fast=True)
    assert ds.meta.name == name
    assert len(ds) == 12
    assert ds.validate() == 12
    for sid in ds.ids():
        h, w = ds.load(sid).image.shape[:2]
        assert h != w and 64 <= min(h, w) and max(h, w) <= 96


def test_every_task_has_at_least_two_builtin_datasets(builtin_root):
    counts = {t: 0 for t in list_tasks()}
    for name in NAMES:
        for t in get_dataset(name, root=builtin_root, fast=True).meta.tasks:
            counts[t] += 1
    assert set(counts) == set(TASK_PARTS)
    assert min(counts.values()) >= 2, counts


def test_registry_lists_builtins(builtin_root):
    assert set(NAMES) <= set(list_datasets(root=builtin_root))


def test_generation_is_byte_identical(builtin_root, tmp_path, monkeypatch):
    for name in ("scenes-a", "photos"):
        a = cache_path(name, True)
        monkeypatch.setenv("ICL_CACHE", str(tmp_path / name))  # a second, fresh cache
        get_dataset(name, root=builtin_root, fast=True)
        b = cache_path(name, True)
        monkeypatch.undo()
        assert a != b
        files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
        match, mismatch, errors = filecmp.cmpfiles(a, b, [str(f) for f in files], shallow=False)
        assert not mismatch and not errors


def test_cached_dataset_is_reused(builtin_root):
    path = cache_path("scenes-b", True)
    stamp = (path / "meta.json").stat().st_mtime_ns
    get_dataset("scenes-b", root=builtin_root, fast=True)
    assert (path / "meta.json").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("name", ("scenes-a", "scenes-b"))
def test_scene_annotations_are_consistent(builtin_root, name):
    ds = get_dataset(name, root=builtin_root, fast=True)
    d_min, d_max = ds.meta.depth_range
    overlapping = 0
    for sid in ds.ids():
        s = ds.load(sid)
        ann = s.annotations
        seg, depth, boxes = ann["segmentation"], ann["depth"], ann["boxes"]
        classes = set(np.unique(seg)) - {255}
        assert {0, 1} <= classes and len(classes) >= 3  # background, ground and an object
        valid = depth > 0
        assert valid.any() and (depth[valid] > d_min).all() and (depth[valid] < d_max).all()
        assert ((depth == -1.0) | valid).all()
        if name == "scenes-b":  # sky is invalid depth, interior boundaries void
            assert (~valid).any() and (seg == 255).any()
            assert (seg[~valid & (seg != 255)] == 0).all()
        assert 1 <= len(boxes) <= 3
        for b, c in zip(boxes, ann["box_classes"]):
            x0, y0, x1, y1 = b.astype(int)
            assert (seg[y0:y1, x0:x1] == c).any()  # the box holds its object's class
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                bi, bj = boxes[i], boxes[j]
                overlapping += bool(min(bi[2], bj[2]) > max(bi[0], bj[0]) and min(bi[3], bj[3]) > max(bi[1], bj[1]))
        vis = ann["keypoints"][ann["keypoints"][:, 2] == 2, :2]
        rounded = np.floor(vis + 0.5)
        dist = np.hypot(*(rounded[:, None, :] - rounded[None, :, :]).transpose(2, 0, 1))
        assert (dist[np.triu_indices(len(vis), 1)] >= KEYPOINT_SEPARATION).all()
        # edges are instance boundaries: every class boundary is an edge
        change = seg[:, :-1] != seg[:, 1:]
        both_valid = (seg[:, :-1] != 255) & (seg[:, 1:] != 255)
        assert ann["edges"][:, :-1][change & both_valid].all()
        # object removal: the clean image differs from the input only inside the removed box
        removed, box = ann["paired"]["removed"], ann["paired_info"]["removed"]["box"]
        outside = np.ones(seg.shape, bool)
        outside[box[1] : box[3], box[0] : box[2]] = False
        diff = (removed != s.image).any(axis=2)
        assert diff.any() and not diff[outside].any()
        for kind in ann["paired"]:
            assert ann["paired"][kind].shape == s.image.shape
    assert overlapping >= 1  # some scenes have overlapping boxes


def test_unknown_dataset_error(tmp_path):
    from icl.data.dataset import DataError

    with pytest.raises(DataError, match="unknown dataset"):
        get_dataset("no-such-data", root=tmp_path)


def test_dataset_on_disk_is_found_by_name(builtin_root, tmp_path):
    import shutil

    import json

    shutil.copytree(cache_path("photos", True), tmp_path / "myphotos")
    meta = json.loads((tmp_path / "myphotos" / "meta.json").read_text())
    (tmp_path / "myphotos" / "meta.json").write_text(json.dumps({**meta, "name": "myphotos"}))
    ds = get_dataset("myphotos", root=tmp_path)
    assert ds.meta.name == "myphotos" and len(ds) == 12  # the folder carries meta.json's name (test_registry.py)
    assert "myphotos" in list_datasets(root=tmp_path)
    assert get_dataset(str(tmp_path / "myphotos")).root == Path(tmp_path / "myphotos")


def test_builtins_live_in_the_cache_never_in_the_data_root(builtin_root, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    ds = get_dataset("photos", root=data, fast=True)
    assert list(data.iterdir()) == [] and ds.root == cache_path("photos", True)
    assert ds.root.parent.parent == Path(os.environ["ICL_CACHE"])


def test_builtin_specs_have_fast_and_full_sizes():
    for spec in BUILTINS.values():
        assert spec.fast_size[0] != spec.fast_size[1] and spec.full_size[0] != spec.full_size[1]
        assert spec.fast_count <= spec.full_count
