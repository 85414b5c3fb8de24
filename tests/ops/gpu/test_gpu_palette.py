"""Triton nearest palette, turbo decoding, box IoU and redness equal the CPU/reference backends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl.ops import box_iou, nearest_palette, redness, turbo_bins, turbo_decode, turbo_encode


def _palette(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice(256 ** 3, n, replace=False).reshape(-1, 1) // np.array([65536, 256, 1]) % 256


@pytest.mark.parametrize("colours", [1, 7, 150, 256])
def test_triton_palette_equals_cpu(colours, device, triton_backend, cpu_backend):
    rng = np.random.default_rng(colours)
    pal = _palette(rng, colours).astype(np.uint8)
    img = rng.integers(0, 256, (3, 9, 17, 3), dtype=np.uint8)
    if colours > 1:  # exact midpoints between two colours: ties go to the lower index
        mid = (pal[0].astype(int) + pal[1].astype(int))
        if (mid % 2 == 0).all():
            img[0, 0, 0] = mid // 2
    cand = rng.random((3, colours)) < 0.4
    cand[:, 0] = True
    for c in (None, cand):
        ref = nearest_palette(img, pal, c, backend="cpu")
        got = nearest_palette(torch.from_numpy(img).to(device), torch.from_numpy(pal).to(device),
                              None if c is None else torch.from_numpy(c).to(device), backend="triton")
        np.testing.assert_array_equal(got.cpu().numpy(), ref)


def test_triton_palette_float_and_single(device, triton_backend, cpu_backend):
    rng = np.random.default_rng(1)
    pal = _palette(rng, 20).astype(np.uint8)
    img = rng.random((1, 1, 3), dtype=np.float32)
    ref = nearest_palette(img, pal, backend="cpu")
    got = nearest_palette(torch.from_numpy(img).to(device), torch.from_numpy(pal).to(device), backend="triton")
    np.testing.assert_array_equal(got.cpu().numpy(), ref)


def test_triton_turbo_equals_cpu(device, triton_backend, cpu_backend):
    rng = np.random.default_rng(2)
    depth = rng.uniform(-1, 12, (2, 7, 11)).astype(np.float32)
    enc = turbo_encode(depth, 0.0, 10.0)
    noisy = np.clip(enc.astype(int) + rng.integers(-6, 7, enc.shape), 0, 255).astype(np.uint8)
    for img in (enc, noisy):
        t = torch.from_numpy(img).to(device)
        np.testing.assert_array_equal(turbo_bins(t, backend="triton").cpu().numpy(), turbo_bins(img, backend="cpu"))
        np.testing.assert_array_equal(turbo_decode(t, 0.0, 10.0, backend="triton").cpu().numpy(),
                                      turbo_decode(img, 0.0, 10.0, backend="cpu"))


def test_triton_box_iou_equals_cpu(device, triton_backend, cpu_backend):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 40, (37, 2)).astype(np.float32)
    a = np.concatenate([a, a + rng.integers(0, 20, (37, 2))], 1).astype(np.float32)  # some zero-area boxes
    b = np.concatenate([a[:5], a[5:29] + 3], 0)
    ref = box_iou(a, b, backend="cpu")
    got = box_iou(torch.from_numpy(a).to(device), torch.from_numpy(b).to(device), backend="triton")
    np.testing.assert_allclose(got.cpu().numpy(), ref, atol=1e-6)
    assert box_iou(torch.zeros((0, 4), device=device), torch.from_numpy(b).to(device), backend="triton").shape == (0, 29)


def test_triton_redness_equals_reference(device, triton_backend):
    img = np.random.default_rng(4).integers(0, 256, (2, 5, 33, 3), dtype=np.uint8)
    s_ref, m_ref = redness(img, backend="reference")
    s, m = redness(torch.from_numpy(img).to(device), backend="triton")
    np.testing.assert_array_equal(s.cpu().numpy(), s_ref)
    np.testing.assert_array_equal(m.cpu().numpy(), m_ref)
