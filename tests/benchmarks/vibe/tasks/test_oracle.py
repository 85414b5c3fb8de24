"""Oracle round trip (PROTOCOL §1.4) of every task on every built-in dataset: encoding the
ground truth and scoring that image as the prediction gives back the ground truth."""

import math

import numpy as np
import pytest

from icl.benchmarks.vibe.builtin import BUILTINS as BUILTIN_SPECS
from icl.data.registry import get_dataset
from icl.benchmarks.vibe.tasks import get_task, list_tasks
from tests.benchmarks.vibe.tasks.helpers import BUILTINS, require_ops

KERNELS = {
    "segmentation": ("palette",),
    "depth": ("turbo",),
    "edges": (),
    "keypoints": ("components", "match_points"),
    "detection": ("components", "average_precision"),
}
IMAGE_KERNELS = ("psnr", "ssim", "lpips")
CASES = [
    pytest.param(ds, t, marks=require_ops(*KERNELS.get(t, IMAGE_KERNELS)), id=f"{ds}-{t}")
    for ds in BUILTINS
    for t in list_tasks()
    if t in BUILTIN_SPECS[ds].meta(ds, "").tasks
]


def depth_floor(gt: np.ndarray, d_min: float, d_max: float) -> float:
    """RMSE of the bin centres against the GT: the best any turbo-encoded prediction can do."""
    g = gt[gt > 0].astype(np.float64)
    bins = np.clip(np.floor((g - d_min) / (d_max - d_min) * 256), 0, 255)
    return float(np.sqrt(np.mean((g - (d_min + (bins + 0.5) / 256 * (d_max - d_min))) ** 2)))


def _episodes(ds, task):
    inputs, targets, encoded = [], [], []
    for sid in ds.ids():
        sample = ds.load(sid, parts=task.parts)
        assert task.check_sample(sample, ds.meta) is None
        x, target = task.make_pair(sample, 0)
        inputs.append(x)
        targets.append(target)
        encoded.append(task.encode(target, ds.meta))
    return inputs, targets, encoded


def _check_perfect(task, ds, targets, scores):
    for target, score in zip(targets, scores):
        assert set(score) == set(task.metrics)
        if task.name == "segmentation":
            assert score["miou"] == 1.0
        elif task.name == "depth":
            floor = depth_floor(target, *ds.meta.depth_range)
            assert 0 < floor < (ds.meta.depth_range[1] - ds.meta.depth_range[0]) / 256
            assert score["rmse"] == pytest.approx(floor, rel=1e-5, abs=1e-6)
        elif task.name == "detection":
            assert score["ap50"] == 1.0
        elif task.name in ("edges", "keypoints"):
            assert score["f1"] == score["precision"] == score["recall"] == 1.0
        else:
            assert score["psnr"] == math.inf
            assert score["ssim"] == pytest.approx(1.0, abs=1e-6)
            assert math.isnan(score["lpips"]) or score["lpips"] == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize("dataset, name", CASES)
def test_oracle_round_trip(builtin_root, dataset, name):
    ds = get_dataset(dataset, root=builtin_root, fast=True)
    task = get_task(name)
    assert task.applies_to(ds.meta)
    _, targets, encoded = _episodes(ds, task)
    for target, img in zip(targets, encoded):
        assert img.dtype == np.uint8 and img.shape == (*task.target_size(target), 3)
    # segmentation decodes among the classes of the context targets: the query's own target covers them
    scores = task.evaluate(encoded, targets, [[t] for t in targets], ds.meta)
    _check_perfect(task, ds, targets, scores)
    # the same predictions as floats in [0, 1] score the same (two samples keep this quick)
    as_float = [e.astype(np.float32) / 255 for e in encoded[:2]]
    assert task.evaluate(as_float, targets[:2], [[t] for t in targets[:2]], ds.meta) == scores[:2]


LABEL_TASKS = [pytest.param(t, marks=require_ops(*KERNELS[t]), id=t) for t in KERNELS]


@pytest.mark.parametrize("name", LABEL_TASKS)
def test_oracle_at_twice_the_resolution(builtin_root, name):
    """Label outputs are decoded at the prediction's size, then mapped to the target's."""
    ds = get_dataset("scenes-a", root=builtin_root, fast=True)
    task = get_task(name)
    _, targets, encoded = _episodes(ds, task)
    big = [np.repeat(np.repeat(e, 2, axis=0), 2, axis=1) for e in encoded]
    _check_perfect(task, ds, targets, task.evaluate(big, targets, [[t] for t in targets], ds.meta))
