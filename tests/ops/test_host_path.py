"""numpy calls run without torch's op machinery: no ``torch._dynamo`` import for any op, no
torch at all for ``psnr``, ``ssim``, ``box_iou``, ``greedy_match_counts``, ``greedy_match``,
``match_points``, ``connected_components``, ``redness``, ``nearest_palette``, the turbo ops and
``average_precision`` (``icl.ops._host``), and the same results as the torch front ends."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import icl.ops
from icl.ops.box_iou import box_iou as box_iou_torch
from icl.ops.components import connected_components as components_torch
from icl.ops.greedy_match import greedy_match as greedy_match_torch
from icl.ops.greedy_match import greedy_match_counts as counts_torch
from icl.ops.match_points import match_points as match_points_torch
from icl.ops.palette import nearest_palette as palette_torch
from icl.ops.psnr import psnr as psnr_torch
from icl.ops.redness import redness as redness_torch
from icl.ops.ssim import ssim as ssim_torch


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it prints one JSON line, returned here."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow  # a fresh interpreter importing torch
def test_host_ops_import_neither_torch_nor_dynamo() -> None:
    got = _fresh("""
        import json, sys, time
        import numpy as np
        import icl.ops
        rng = np.random.default_rng(0)
        a = rng.integers(0, 256, (72, 96, 3), dtype=np.uint8)
        b = rng.integers(0, 256, (72, 96, 3), dtype=np.uint8)
        boxes = rng.random((6, 4)) * 10
        boxes[:, 2:] += boxes[:, :2]
        t = time.perf_counter()
        icl.ops.greedy_match_counts(boxes, [0, 3, 6], boxes + 0.5, [0, 3, 6], [0.5, 0.75])
        first = time.perf_counter() - t
        icl.ops.psnr(a, b); icl.ops.ssim(a, b); icl.ops.box_iou(boxes, boxes)
        icl.ops.redness(a); icl.ops.greedy_match(np.eye(3) * 0.8); icl.ops.match_points(boxes[:, :2], boxes[:, 2:], 3.0)
        icl.ops.connected_components(a[..., 0] > 128, 4, a[..., 1].astype(np.float32))
        icl.ops.nearest_palette(a, [[0, 0, 0], [255, 0, 0]], np.array([True, True]))
        depth = rng.random((2, 9, 11)).astype(np.float32) * 10
        icl.ops.turbo_decode(icl.ops.turbo_encode(depth, 0.5, 10.0), 0.5, 10.0); icl.ops.turbo_bins(a)
        icl.ops.average_precision(boxes, rng.random(6), np.zeros(6, np.int64), boxes[:4], np.zeros(4, np.int64))
        print(json.dumps({"torch": "torch" in sys.modules, "first_counts_s": first,
                          "used": icl.ops.backends_used(), "table": icl.ops.TURBO_TABLE[:2].tolist(),
                          "matplotlib": "matplotlib" in sys.modules}))
    """)
    assert got["torch"] is False and got["matplotlib"] is False  # the turbo table is written out
    assert got["table"] == [[48, 18, 59], [50, 21, 67]]
    assert got["used"] == {op: "cpu" for op in ("average_precision", "box_iou", "connected_components", "greedy_match",
                                                "greedy_match_counts", "match_points", "nearest_palette", "psnr",
                                                "redness", "ssim", "turbo_bins", "turbo_decode", "turbo_encode")}
    assert float(got["first_counts_s"]) < 2.0  # 0.006 s quiet; 2.2 s when it imported torch._dynamo


@pytest.mark.slow  # a fresh interpreter importing torch
def test_no_op_imports_dynamo_outside_tracing() -> None:
    got = _fresh("""
        import json, sys
        import numpy as np
        import torch
        import icl.ops as ops
        rng = np.random.default_rng(0)
        img = rng.integers(0, 256, (2, 40, 40, 3), dtype=np.uint8)
        boxes = np.array([[0.0, 0.0, 4.0, 4.0], [1.0, 1.0, 5.0, 6.0]])
        for x in (img, torch.from_numpy(img)):
            ops.psnr(x, x[::-1].copy() if isinstance(x, np.ndarray) else x.flip(0))
            ops.ssim(x, x)
            ops.nearest_palette(x, [[0, 0, 0], [255, 255, 255]])
            ops.turbo_bins(x); ops.turbo_decode(x, 0.5, 10.0); ops.redness(x)
        ops.turbo_encode(np.ones((4, 4)), 0.5, 2.0)
        ops.connected_components(img[..., 0] > 128)
        ops.box_iou(torch.from_numpy(boxes), torch.from_numpy(boxes))
        ops.greedy_match(np.eye(2) * 0.9)
        ops.greedy_match_counts(torch.from_numpy(boxes), [0, 2], torch.from_numpy(boxes), [0, 2], [0.5])
        ops.match_points(np.zeros((2, 2)), np.ones((2, 2)), 2.0)
        ops.average_precision(boxes, np.array([0.9, 0.5]), np.array([0, 0]), boxes, np.array([0, 0]))
        ops.patch_match(img[0], img[1], patch_size=7, iterations=1)
        print(json.dumps({"dynamo": "torch._dynamo" in sys.modules}))
    """)
    assert got["dynamo"] is False


def test_gradients_still_go_through_the_op() -> None:
    x = torch.rand(1, 16, 16, 3, dtype=torch.float64, requires_grad=True)
    y = torch.rand(1, 16, 16, 3, dtype=torch.float64)
    icl.ops.psnr(x, y, 1.0).sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(72, 96, 3), (3, 40, 33, 1)])
def test_image_metrics_equal_the_torch_front_end(dtype: type, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    a = (rng.integers(0, 256, shape) if dtype == np.uint8 else rng.random(shape)).astype(dtype)
    b = (rng.integers(0, 256, shape) if dtype == np.uint8 else rng.random(shape)).astype(dtype)
    dr = None if dtype == np.uint8 else 1.0
    for host, front in ((icl.ops.psnr, psnr_torch), (icl.ops.ssim, ssim_torch)):
        got, want = host(a, b, dr), front(a, b, dr)
        assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
    assert (icl.ops.psnr(a, a, dr) == np.inf).all()


def test_boxes_equal_the_torch_front_end() -> None:
    rng = np.random.default_rng(2)
    boxes = rng.random((30, 4)) * 50
    boxes[:, 2:] += boxes[:, :2]
    for dt in (np.float32, np.float64):
        b = boxes.astype(dt)
        got, want = icl.ops.box_iou(b, b[::-1]), box_iou_torch(b, b[::-1])
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    off = np.array([0, 10, 10, 30])
    got = icl.ops.greedy_match_counts(boxes, off, boxes[::-1] + 1.0, off, [0.1, 0.5, 0.9])
    want = counts_torch(boxes, off, boxes[::-1] + 1.0, off, [0.1, 0.5, 0.9])
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def _same(got: tuple, want: tuple) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        w = w.numpy() if isinstance(w, torch.Tensor) else w
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_redness_equals_the_reference_on_every_level_pair() -> None:
    """S depends on R and max(G, B) only: all 65,536 pairs, at thresholds between float32 levels."""
    r, m = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    img = np.stack([r, m, m[::-1] * 0], -1).astype(np.uint8)
    img = np.concatenate([img, img[..., [0, 2, 1]]])  # the max from G, then from B
    level = float(np.float32(128) / np.float32(255))  # an S value: just below it, float32 and float64 differ
    for threshold in (0.5, level - 1e-12, np.float64(level - 1e-12), 0, 1.0, -3):
        got = icl.ops.redness(img, threshold)
        _same(got, redness_torch(img, threshold, backend="reference"))
        _same(icl.ops.redness(img[None], threshold), redness_torch(torch.from_numpy(img[None]), threshold))


def test_matching_and_components_equal_the_torch_front_end() -> None:
    rng = np.random.default_rng(4)
    iou = rng.random((9, 7)).round(2)  # ties
    for dt in (np.float32, np.float64):
        for threshold in (0.0, 0.5, 1):
            _same(icl.ops.greedy_match(iou.astype(dt), threshold), greedy_match_torch(iou.astype(dt), threshold))
    _same(icl.ops.greedy_match(np.zeros((0, 3)), 0.5), greedy_match_torch(np.zeros((0, 3)), 0.5))
    pts = rng.integers(0, 12, (10, 2))
    for pred in (pts, pts.astype(np.float32), pts.astype(np.uint8)):
        _same(icl.ops.match_points(pred, pts[::-1] + 1, 2.5), match_points_torch(pred, pts[::-1] + 1, 2.5))
    _same(icl.ops.match_points(np.zeros((0, 2)), pts, 1), match_points_torch(np.zeros((0, 2)), pts, 1))
    mask = rng.random((3, 17, 23)) > 0.55
    values = rng.random(mask.shape)
    for m in (mask, mask.astype(np.uint8) * 7, mask.astype(np.int64) - 2 * mask[::-1]):
        for connectivity in (4, 8):
            _same(icl.ops.connected_components(m, connectivity), components_torch(m, connectivity))
            for v in (values, values.astype(np.float32)):
                _same(icl.ops.connected_components(m, connectivity, v), components_torch(m, connectivity, v))
    _same(icl.ops.connected_components(mask[0], 8, values[0]), components_torch(mask[0], 8, values[0]))


def test_nearest_palette_equals_the_torch_front_end() -> None:
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (3, 21, 17, 3), dtype=np.uint8)
    pal = rng.integers(0, 256, (12, 3))
    pal[5] = pal[2]  # a tie: the lower index wins
    cand = rng.random((3, 12)) > 0.4
    cand[:, 0] = True
    for palette in (pal, pal.astype(np.uint8), pal.tolist()):
        for c in (None, cand, cand[1]):
            got, want = icl.ops.nearest_palette(img, palette, c), palette_torch(img, palette, c)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(icl.ops.nearest_palette(img[0], pal), palette_torch(img[0], pal))


def test_invalid_calls_get_the_front_end_errors() -> None:
    a = np.zeros((20, 20, 3), np.float32)
    with pytest.raises(ValueError, match="data_range: required"):
        icl.ops.psnr(a, a)
    with pytest.raises(ValueError, match="contains NaN"):
        icl.ops.ssim(np.full_like(a, np.nan), a, 1.0)
    with pytest.raises(ValueError, match="inverted"):
        icl.ops.box_iou(np.array([[2.0, 0, 1, 1]]), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="offsets"):
        icl.ops.greedy_match_counts(np.zeros((2, 4)), [0, 3], np.zeros((2, 4)), [0, 2], [0.5])
    with pytest.raises(ValueError, match="thresholds"):
        icl.ops.greedy_match_counts(np.zeros((2, 4)), [0, 2], np.zeros((2, 4)), [0, 2], [1.5])
    with pytest.raises(ValueError, match="threshold"):
        icl.ops.redness(np.zeros((2, 2, 3), np.uint8), float("nan"))
    with pytest.raises(ValueError, match=r"iou: expected values in \[0, 1\]"):
        icl.ops.greedy_match(np.full((2, 2), 1.5))
    with pytest.raises(ValueError, match="iou: contains NaN"):
        icl.ops.greedy_match(np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match="pred: contains NaN"):
        icl.ops.match_points(np.full((1, 2), np.inf), np.zeros((1, 2)), 1.0)
    with pytest.raises(ValueError, match="radius"):
        icl.ops.match_points(np.zeros((1, 2)), np.zeros((1, 2)), -1.0)
    with pytest.raises(ValueError, match="values: contains NaN"):
        icl.ops.connected_components(np.ones((3, 3), bool), 8, np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="connectivity"):
        icl.ops.connected_components(np.ones((3, 3), bool), 6)
    with pytest.raises(ValueError, match="palette: values must lie in 0..255"):
        icl.ops.nearest_palette(np.zeros((2, 2, 3), np.uint8), [[0, 0, 256]])
    with pytest.raises(ValueError, match="candidates: image 1 has no candidate"):
        icl.ops.nearest_palette(np.zeros((2, 2, 2, 3), np.uint8), [[0, 0, 0]], np.array([[True], [False]]))


def test_forced_backends_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    a = np.random.default_rng(3).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    monkeypatch.setenv("ICL_BACKEND", "reference")
    want = icl.ops.psnr(a, a[::-1].copy())  # the reference backend, through the front end
    monkeypatch.delenv("ICL_BACKEND")
    np.testing.assert_allclose(icl.ops.psnr(a, a[::-1].copy(), backend="reference"), want, rtol=0)
    assert "reference" in icl.ops.backends_used()["psnr"]


@pytest.mark.slow  # a fresh interpreter importing torch
def test_import_icl_and_benchmark_construction_import_no_torch() -> None:
    got = _fresh("""
        import json, sys
        import icl
        from icl.benchmarks.registry import get_benchmark
        seen = {"icl": "torch" in sys.modules}
        for name in ("vibe", "best50", "vlicl"):
            get_benchmark(name)()
            seen[name] = "torch" in sys.modules
        print(json.dumps(seen))
    """)
    assert got == {"icl": False, "vibe": False, "best50": False, "vlicl": False}


def test_turbo_equals_the_torch_front_end() -> None:
    from icl.ops.turbo import turbo_bins as bins_torch
    from icl.ops.turbo import turbo_decode as decode_torch
    from icl.ops.turbo import turbo_encode as encode_torch

    rng = np.random.default_rng(5)
    for dt in (np.float32, np.float64):
        depth = (rng.random((3, 17, 23)) * 12 - 1).astype(dt)  # some invalid (<= 0) and out of range
        depth[0, 0, 0] = np.nan
        got, want = icl.ops.turbo_encode(depth, 0.5, 10.0), encode_torch(depth, 0.5, 10.0)
        assert got.dtype == want.dtype == np.uint8 and got.shape == want.shape == (3, 17, 23, 3)
        np.testing.assert_array_equal(got, want)
    images = rng.integers(0, 256, (2, 13, 9, 3), dtype=np.uint8)
    for x in (images, images[0]):
        np.testing.assert_array_equal(icl.ops.turbo_bins(x), bins_torch(x))
        got, want = icl.ops.turbo_decode(x, 0.5, 10.0), decode_torch(x, 0.5, 10.0)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    # what the numpy path does not serve goes to the front end, which words the errors
    with pytest.raises(ValueError, match="d_max > d_min"):
        icl.ops.turbo_encode(np.ones((4, 4), np.float32), 2.0, 1.0)
    with pytest.raises(ValueError, match="depth"):
        icl.ops.turbo_encode(np.ones(4, np.float32), 0.5, 2.0)
    np.testing.assert_array_equal(icl.ops.turbo_bins(images.astype(np.float32) / 255), bins_torch(images / 255.0))


@pytest.mark.parametrize("interpolation", ["all", "coco101"])
@pytest.mark.parametrize("max_detections", [None, 2])
def test_average_precision_equals_the_torch_front_end(interpolation: str, max_detections: object) -> None:
    from icl.ops.average_precision import average_precision as ap_torch

    rng = np.random.default_rng(6)
    pb = rng.random((40, 4)) * 50
    pb[:, 2:] += pb[:, :2]
    gb = pb[::2] + rng.normal(0, 2, (20, 4))
    gb[:, 2:] = np.maximum(gb[:, 2:], gb[:, :2])
    scores = np.round(rng.random(40), 1)  # ties
    pi, gi = rng.integers(0, 4, 40), rng.integers(0, 4, 20)
    got = icl.ops.average_precision(pb, scores, pi, gb, gi, 0.5, interpolation, max_detections=max_detections)
    want = ap_torch(pb, scores, pi, gb, gi, 0.5, interpolation, max_detections=max_detections)
    assert isinstance(got, float) and got == want
    assert math.isnan(icl.ops.average_precision(pb, scores, pi, gb[:0], gi[:0]))
    with pytest.raises(ValueError, match="NaN"):
        bad = scores.copy()
        bad[3] = np.nan
        icl.ops.average_precision(pb, bad, pi, gb, gi)
