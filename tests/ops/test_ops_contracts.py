"""Contract edges found by the audit: flat images (SSIM), huge boxes (box_iou), inputs that
require grad (every op), float64 quantisation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

import icl.ops as ops


def _skimage_ssim(a: np.ndarray, b: np.ndarray, data_range: float) -> float:
    return float(structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                       data_range=data_range, channel_axis=-1))


def _hard_pairs() -> list[tuple[str, np.ndarray, np.ndarray, float]]:
    rng = np.random.default_rng(11)
    bright = rng.integers(250, 256, (24, 27, 3)).astype(np.uint8)
    shaded = (0.98 + 0.001 * rng.random((24, 24, 1))).astype(np.float32)
    half = np.zeros((24, 24, 3), np.uint8)
    half[:, 12:] = 200
    return [
        ("flat equal", np.full((16, 16, 3), 200, np.uint8), np.full((16, 16, 3), 200, np.uint8), 255.0),
        ("flat one level apart", np.full((16, 16, 3), 200, np.uint8), np.full((16, 16, 3), 201, np.uint8), 255.0),
        ("bright low variance", bright, np.clip(bright + rng.integers(-1, 2, bright.shape), 0, 255).astype(np.uint8),
         255.0),
        ("half flat, half bright", half, np.clip(half.astype(int) + 1, 0, 255).astype(np.uint8), 255.0),
        ("float32 bright shading", shaded, (shaded + np.float32(5e-4) * rng.random(shaded.shape, np.float32)), 1.0),
        ("float64 bright shading", shaded.astype(np.float64), shaded + 5e-4 * rng.random(shaded.shape), 1.0),
    ]


@pytest.mark.parametrize("case", _hard_pairs(), ids=lambda c: c[0])
def test_ssim_within_1e6_of_skimage_on_flat_and_bright_images(case, backend):
    _, a, b, dr = case
    b = b.astype(a.dtype)
    # skimage keeps float32 input in float32; the exact value is its float64 result
    wide = (a, b) if a.dtype == np.uint8 else (a.astype(np.float64), b.astype(np.float64))
    want = _skimage_ssim(*wide, dr)
    got = float(ops.ssim(a, b, None if a.dtype == np.uint8 else dr, backend=backend))
    assert abs(got - want) <= 1e-6, (got, want)


@pytest.mark.parametrize("coord", [1e20, 1e30, 3e38])
def test_box_iou_identical_huge_boxes_is_one(coord, backend):
    boxes = torch.tensor([[-coord, -coord, coord, coord], [0.0, 0.0, coord, coord / 2]], dtype=torch.float32)
    iou = ops.box_iou(boxes, boxes, backend=backend)
    assert iou.dtype == torch.float32
    assert torch.equal(iou.diagonal(), torch.ones(2))
    assert torch.isfinite(iou).all()
    # the off-diagonal value, exactly as float64 computes it and rounds once
    ref = ops.box_iou(boxes.double(), boxes.double(), backend=backend)
    assert torch.equal(iou, ref.float())


def test_every_op_accepts_inputs_that_require_grad():
    g = torch.Generator().manual_seed(3)
    img = torch.rand(1, 16, 16, 3, generator=g, requires_grad=True)
    boxes = torch.tensor([[0.0, 0, 4, 4], [1, 1, 5, 6]], requires_grad=True)
    ops.nearest_palette(img, torch.tensor([[0, 0, 0], [255, 255, 255]]))
    ops.turbo_bins(img)
    ops.turbo_decode(img, 0.5, 2.0)
    ops.turbo_encode(torch.rand(4, 4, requires_grad=True), 0.0, 1.0)
    s, mask = ops.redness(img)
    assert not s.requires_grad
    iou = ops.box_iou(boxes, boxes)
    assert not iou.requires_grad  # not differentiable: computed without grad, as documented
    comp = ops.connected_components(torch.ones(4, 4, dtype=torch.bool), 8, torch.rand(4, 4, requires_grad=True))
    assert not comp.value_sum.requires_grad
    ops.match_points(torch.rand(3, 2, requires_grad=True), torch.rand(2, 2, requires_grad=True), 0.5)
    ops.greedy_match(torch.rand(3, 2, requires_grad=True), 0.1)
    ops.greedy_match_counts(boxes, [0, 2], boxes, [0, 2], [0.5])
    scores = torch.rand(2, requires_grad=True)
    ids = torch.zeros(2, dtype=torch.int64)
    ops.average_precision(boxes, scores, ids, boxes, ids)
    ops.detection_matches(boxes, scores, ids, boxes, ids)
    for fn in (ops.ssim, ops.psnr):
        assert fn(img, img.detach() * 0.5, 1.0).requires_grad  # differentiable ones keep the graph


def test_float64_images_quantise_in_float64(backend):
    # values just above a half level: float32 would round them down to the level below
    levels = np.arange(256, dtype=np.float64)
    x = (levels + 0.5) / 255 + 1e-12
    lost = np.round(np.clip(x.astype(np.float32), 0, 1) * np.float32(255)) != np.round(np.clip(x, 0, 1) * 255)
    assert lost.any()  # the input really separates the two
    pixels = x[:, None].repeat(3, 1).reshape(1, 16, 16, 3)
    palette = np.stack([np.arange(256)] * 3, 1)
    got = ops.nearest_palette(pixels, palette, backend=backend)
    want = np.round(np.clip(pixels[..., 0], 0, 1) * 255).astype(np.int32)
    np.testing.assert_array_equal(got, want)
