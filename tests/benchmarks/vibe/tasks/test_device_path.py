"""The tensor path of ``Task.evaluate`` (torch CPU tensors) against the numpy path.

Label-derived metrics (mIoU, edge and keypoint P/R/F1, AP) must be exactly equal; float metrics
within ``tests/tolerances.py``. Images resized on the device (bilinear, float32) may differ
from OpenCV's fixed-point resize by one level: those cases are compared with the numpy path
run on the device-resized images, and the resize itself against OpenCV.

``ICL_DEVICE_TESTS_DEVICE=cuda`` runs the same comparisons with CUDA tensors (``bench/gpu_check.py``
does); there LPIPS runs its convolutions in TF32 and is compared at half-precision tolerance.
"""

import math
import os
import re

import cv2
import numpy as np
import pytest
import torch

from icl.benchmarks.vibe.builtin import BUILTINS as BUILTIN_SPECS
from icl.data.registry import get_dataset
from icl.benchmarks.vibe.tasks import PredictionError, get_task, list_tasks
from icl.benchmarks.vibe.tasks._device import resize_bilinear_t, resize_nearest_t
from icl.benchmarks.vibe.tasks.base import resize_nearest
from tests.benchmarks.vibe.tasks.helpers import BUILTINS, HAND_META
from tests.tolerances import ATOL

LABEL_TASKS = ("segmentation", "edges", "keypoints", "detection")
CASES = [pytest.param(ds, t, id=f"{ds}-{t}") for ds in BUILTINS for t in list_tasks()
         if t in BUILTIN_SPECS[ds].meta(ds, "").tasks]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
N = 4  # samples per (dataset, task): keeps the file quick
DEVICE = os.environ.get("ICL_DEVICE_TESTS_DEVICE", "cpu")


def _t(x):
    """A numpy array as a tensor on the tested device."""
    return torch.from_numpy(np.ascontiguousarray(x)).to(DEVICE)


def _episodes(root, dataset, name):
    ds = get_dataset(dataset, root=root, fast=True)
    task = get_task(name)
    inputs, targets, encoded = [], [], []
    for sid in ds.ids():
        sample = ds.load(sid, parts=task.parts)
        if task.check_sample(sample, ds.meta) is None:
            x, t = task.make_pair(sample, 0)
            inputs.append(x)
            targets.append(t)
            encoded.append(task.encode(t, ds.meta))
        if len(targets) == N:
            break
    contexts = [[targets[(i + 1) % len(targets)]] for i in range(len(targets))]
    return task, ds.meta, inputs, targets, encoded, contexts


def _predictions(inputs, encoded, seed=0):
    """Same-size predictions of several kinds: the oracle, a noisy oracle, the query, another target."""
    gen = np.random.default_rng(seed)
    noisy = [np.clip(e + gen.normal(0, 40, e.shape), 0, 255).astype(np.uint8) for e in encoded]
    other = [encoded[(i + 1) % len(encoded)] for i in range(len(encoded))]
    out = {"oracle": encoded, "noisy": noisy, "other": other}
    if all(x.shape == e.shape for x, e in zip(inputs, encoded)):
        out["query"] = inputs
    return out


def _assert_same(task, ref, got):
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert a.keys() == b.keys() == set(task.metrics)
        for k in a:
            x, y = a[k], b[k]
            if math.isnan(x) or math.isnan(y):
                assert math.isnan(x) and math.isnan(y), k
            elif task.name in LABEL_TASKS or math.isinf(x):
                assert x == y, (k, x, y)
            elif task.name == "depth":
                assert y == pytest.approx(x, abs=ATOL[torch.float64]), k
            else:
                tol = ATOL[torch.float16 if k == "lpips" and DEVICE != "cpu" else torch.float32]
                assert y == pytest.approx(x, abs=tol), k


@pytest.mark.parametrize("dataset, name", CASES)
def test_tensor_path_matches_numpy(builtin_root, dataset, name):
    task, meta, inputs, targets, encoded, contexts = _episodes(builtin_root, dataset, name)
    gen = np.random.default_rng(1)
    for kind, preds in _predictions(inputs, encoded).items():
        ref = task.evaluate(preds, targets, contexts, meta)
        _assert_same(task, ref, task.evaluate([_t(p) for p in preds], targets, contexts, meta))
        for dt in DTYPES.values() if kind in ("oracle", "noisy") else ():
            half = [_t(p).to(dt) / 255 for p in preds]
            if kind == "noisy":  # values off the 1/255 grid: exercises round-half-even in float32
                half = [(h.float() + _t(gen.normal(0, 2e-3, h.shape)).float()).clamp(0, 1).to(dt)
                        for h in half]
                host_ref = task.evaluate([h.float().cpu().numpy() for h in half], targets, contexts, meta)
            else:  # every level survives x / 255 in half precision
                host_ref = ref
            _assert_same(task, host_ref, task.evaluate(half, targets, contexts, meta))


@pytest.mark.parametrize("name", list_tasks())
def test_batched_equals_one_by_one_and_mixed_sizes(builtin_root, name):
    task, meta, inputs, targets, encoded, contexts = _episodes(builtin_root, "scenes-a", name)
    preds = _predictions(inputs, encoded, seed=2)["noisy"]
    # every other prediction at another size: two groups, each decoded in one call
    mixed = [p if i % 2 else cv2.resize(p, (p.shape[1] * 3 // 2 + 1, p.shape[0] * 3 // 2),
                                        interpolation=cv2.INTER_NEAREST) for i, p in enumerate(preds)]
    for batch in (preds, mixed):
        tensors = [_t(p) for p in batch]
        together = task.evaluate(tensors, targets, contexts, meta)
        alone = [task.evaluate([t], [g], [c], meta)[0] for t, g, c in zip(tensors, targets, contexts)]
        _assert_same(task, alone, together)  # LPIPS may round differently in another batch size
    # one [B, H, W, 3] tensor is a batch, as the list of its images
    stacked = _t(np.stack(preds))
    _assert_same(task, task.evaluate(list(stacked), targets, contexts, meta),
                 task.evaluate(stacked, targets, contexts, meta))
    # numpy predictions sent to a device take the tensor path too
    _assert_same(task, task.evaluate([_t(p) for p in preds], targets, contexts, meta),
                 task.evaluate(preds, targets, contexts, meta, device=DEVICE))
    # label outputs at another size: nearest on the device is exactly the host's rule
    if name in LABEL_TASKS + ("depth",):
        _assert_same(task, task.evaluate(mixed, targets, contexts, meta),
                     task.evaluate([_t(p) for p in mixed], targets, contexts, meta))
    else:  # images: the host path on the device-resized images gives the same scores
        resized = [resize_bilinear_t(_t(p)[None], t.shape[:2])[0].cpu().numpy() for p, t in zip(mixed, targets)]
        _assert_same(task, task.evaluate(resized, targets, contexts, meta),
                     task.evaluate([_t(p) for p in mixed], targets, contexts, meta))


@pytest.mark.parametrize("src, dst", [((1, 1), (5, 3)), ((7, 9), (3, 4)), ((13, 11), (29, 31)), ((64, 88), (88, 64)),
                                      ((40, 40), (20, 20)), ((33, 47), (47, 33))])
def test_device_resizes(src, dst):
    gen = np.random.default_rng(3)
    labels = gen.integers(0, 255, (2, *src), dtype=np.uint8)
    got = resize_nearest_t(_t(labels), dst).cpu().numpy()
    for g, x in zip(got, labels):
        np.testing.assert_array_equal(g, resize_nearest(x, dst))
    img = cv2.GaussianBlur(gen.integers(0, 256, (*src, 3), dtype=np.uint8), (3, 3), 1)
    ours = resize_bilinear_t(_t(img)[None], dst)[0].cpu().numpy().astype(int)
    cv = cv2.resize(img, (dst[1], dst[0]), interpolation=cv2.INTER_LINEAR).astype(int)
    assert ours.shape == cv.shape and np.abs(ours - cv).max() <= 1  # the documented bound


def test_half_precision_levels_round_trip():
    levels = torch.arange(256, dtype=torch.uint8).view(1, 16, 16).expand(3, 16, 16).permute(1, 2, 0).contiguous()
    task = get_task("flip")
    for dt in DTYPES.values():
        s = task.evaluate([levels.to(DEVICE, dt) / 255], [levels.numpy()], [[]], HAND_META)[0]
        assert s["psnr"] == math.inf  # decoded back to every level exactly
    # the detection decoder's float32 level / 255 is numpy's float64 division rounded to float32
    levels32 = (torch.arange(256, device=DEVICE).float() / 255.0).cpu().numpy()
    assert np.array_equal(levels32, (np.arange(256) / 255.0).astype(np.float32))


def _z(shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype, device=DEVICE)


def _f(shape, value, dtype=torch.float32):
    return torch.full(shape, value, dtype=dtype, device=DEVICE)


def _bad_batches():
    ok = _z((4, 5, 3), torch.uint8)
    yield [ok, _z((4, 5), torch.uint8)], 1, "expected shape [h, w, 3], got (4, 5)"
    yield [ok, ok, _z((4, 5, 4))], 2, "expected shape [h, w, 3], got (4, 5, 4)"
    yield [_z((0, 5, 3)), ok], 0, "empty image"
    yield [ok, _z((4, 5, 3), torch.int32)], 1, "expected uint8 or float, got dtype int32"
    yield [ok, _z((4, 5, 3), torch.bool)], 1, "got dtype bool"
    yield [ok, _f((4, 5, 3), float("nan"), torch.float16)], 1, "NaN or infinite"
    yield [_f((4, 5, 3), float("inf")), ok], 0, "NaN or infinite"
    yield [ok, "not an image"], 1, "expected a numpy array or torch tensor, got str"
    # the lowest invalid index is reported, whatever the kind of fault
    yield [ok, _f((4, 5, 3), float("nan")), _z((4, 5))], 1, "NaN or infinite"
    yield [ok, _f((6, 5, 3), 2.0, torch.float16), _z((4, 5)), _f((4, 5, 3), float("-inf"))], 2, "expected shape"


@pytest.mark.parametrize("name", ["edges", "segmentation", "flip"])
def test_invalid_tensors_raise_prediction_error_naming_the_index(name):
    task = get_task(name)
    for preds, index, message in _bad_batches():
        targets = [np.zeros((4, 5, 3) if name == "flip" else (4, 5), np.uint8) for _ in preds]
        with pytest.raises(PredictionError, match=re.escape(message)) as info:
            task.evaluate(preds, targets, [[t] for t in targets], HAND_META, device=DEVICE)
        assert info.value.index == index and str(info.value).startswith(f"prediction {index}: ")
        # the numpy path names the same index with the same message, where it can take the input
        host = [p.cpu().float().numpy() if isinstance(p, torch.Tensor) and p.dtype == torch.bfloat16 else
                p.cpu().numpy() if isinstance(p, torch.Tensor) else p for p in preds]
        with pytest.raises(PredictionError) as host_info:
            task.evaluate(host, targets, [[t] for t in targets], HAND_META)
        assert (host_info.value.index, host_info.value.message) == (index, info.value.message)


@pytest.mark.parametrize("dtype", list(DTYPES.values()) + [torch.float64])
def test_out_of_range_floats_are_clipped_like_the_host(dtype):
    from icl.benchmarks.vibe.tasks._device import validate_tensors
    from icl.benchmarks.vibe.tasks.base import validate_prediction

    gen = np.random.default_rng(5)
    preds = [torch.from_numpy(gen.uniform(-0.7, 1.6, (4, 5, 3))).to(dtype).to(DEVICE) for _ in range(3)]
    batch = validate_tensors(preds, DEVICE)
    for got, p in zip(batch.host(), preds):
        want = validate_prediction(0, p.double().cpu().numpy())
        np.testing.assert_array_equal(got, want)
        assert want.min() == 0 and want.max() == 255


def test_unknown_segmentation_class_fails_on_both_paths():
    task = get_task("segmentation")
    gt = np.zeros((4, 5), np.uint8)
    gt[0, 0] = 7  # HAND_META has 4 classes
    pred = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError):
        task.evaluate([pred], [gt], [[gt]], HAND_META)
    with pytest.raises(ValueError, match="class ids >= 4"):
        task.evaluate([_t(pred)], [gt], [[gt]], HAND_META)


def test_segmentation_candidates_are_the_context_classes():
    from icl.benchmarks.vibe.tasks.segmentation import candidates

    gen = np.random.default_rng(4)
    for n in (1, 4, 37, 149):
        for _ in range(20):
            maps = [gen.integers(0, gen.integers(1, 256), (gen.integers(1, 40), gen.integers(1, 40)), dtype=np.uint8)
                    for _ in range(gen.integers(0, 3))]
            maps += [m[::2, ::-1] for m in maps[:1]]  # a non-contiguous view
            maps += [m.astype(np.int64) for m in maps[:1]]  # another dtype: the np.unique route
            ref = np.zeros(n, bool)
            for m in maps:
                ids = np.unique(m)
                ref[ids[ids < n]] = True
            np.testing.assert_array_equal(candidates(maps, n), ref if ref.any() else np.ones(n, bool))
