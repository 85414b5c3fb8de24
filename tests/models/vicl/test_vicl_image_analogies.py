"""image-analogies: shapes, determinism, batch invariance, precisions, the K-shot mosaic layout,
and analogies whose answer is known exactly (B is a translated A)."""

import numpy as np
import pytest
import torch

from icl.models import get_model
from icl.models.requests import AnalogyRequest
from icl.models.vicl.image_analogies import ImageAnalogies, pyramid, upsample_field


def noise(rng, h, w):
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def request(rng, h, w, shots=1, qid="q", seed=0):
    ins = [noise(rng, h + 3 * k, w) for k in range(shots)]
    outs = [255 - x for x in ins]
    return AnalogyRequest("colorization", "d", qid, ins, outs, noise(rng, h, w), (h, w), seed=seed)


def textured(rng, h, w):
    """Blurred noise with gradients: structure at every pyramid level, unique patches."""
    import cv2

    base = cv2.GaussianBlur(rng.normal(0, 1, (h, w, 3)).astype(np.float32), (0, 0), 1.5)
    yy, xx = np.mgrid[0:h, 0:w]
    img = 128 + 250 * base + 30 * np.sin(xx / 5.0)[..., None] + 30 * np.cos(yy / 4.0)[..., None]
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("kind", ["noise, arbitrary A'", "texture, a colour filter"])
def test_translated_query_gives_the_translated_output(kind):
    rng = np.random.default_rng(0)
    if kind.startswith("noise"):
        a = noise(rng, 48, 56)
        a_out = rng.integers(0, 256, a.shape, dtype=np.uint8)  # any per-pixel A -> A' mapping
    else:
        a = textured(rng, 48, 56)
        a_out = np.ascontiguousarray(255 - a[..., ::-1])  # invert and swap channels
    b = np.roll(a, (5, -7), axis=(0, 1))
    req = AnalogyRequest("t", "d", "q", [a], [a_out], b, b.shape[:2], seed=3)
    out = get_model("image-analogies").predict([req])[0]
    want = np.roll(a_out, (5, -7), axis=(0, 1))
    inner = (slice(8, -8), slice(10, -10))  # away from the wrapped border
    assert (out[inner] == want[inner]).all(axis=-1).mean() > 0.95


def test_output_pixels_come_from_the_context_output():
    rng = np.random.default_rng(1)
    palette = np.array([[80, 50, 50], [7, 255, 255], [255, 0, 255]], np.uint8)
    a = noise(rng, 40, 40)
    a_out = palette[rng.integers(0, 3, (40, 40))]
    req = AnalogyRequest("segmentation", "d", "q", [a], [a_out], noise(rng, 36, 44), (36, 44))
    out = ImageAnalogies().predict([req])[0]
    assert out.shape == (36, 44, 3) and out.dtype == np.uint8
    assert {tuple(p) for p in out.reshape(-1, 3)} <= {tuple(p) for p in palette}


def test_batch_of_four_two_sizes_equals_singles_and_is_deterministic():
    rng = np.random.default_rng(2)
    reqs = [request(rng, 32, 40, qid="a", seed=1), request(rng, 24, 20, qid="b", seed=2),
            request(rng, 32, 40, shots=2, qid="c", seed=3), request(rng, 24, 20, qid="d", seed=4)]
    model = ImageAnalogies(levels=2, iterations=2)
    batch = model.predict(reqs)
    singles = [model.predict([r])[0] for r in reqs]
    again = model.predict(reqs)
    for b, s, g, r in zip(batch, singles, again, reqs):
        assert b.shape == (*r.query.shape[:2], 3) and b.dtype == np.uint8
        np.testing.assert_array_equal(b, s)  # tolerance: exact (integer outputs)
        np.testing.assert_array_equal(b, g)


@pytest.mark.parametrize("precision, dtype", [("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_half_precisions_decode_to_the_fp32_answer(precision, dtype):
    rng = np.random.default_rng(3)
    req = request(rng, 20, 24)
    ref = ImageAnalogies(levels=1).predict([req])[0]
    model = ImageAnalogies(levels=1)
    model.precision = precision
    out = model.predict([req])[0]
    assert out.dtype == dtype
    np.testing.assert_array_equal(torch.round(out.float() * 255).to(torch.uint8).numpy(), ref)


def test_k_shot_mosaic_layout():
    rng = np.random.default_rng(4)
    ins = [noise(rng, 10, 12), noise(rng, 20, 24)]
    outs = [noise(rng, 10, 12), noise(rng, 5, 6)]
    req = AnalogyRequest("t", "d", "q", ins, outs, noise(rng, 10, 12), (10, 12))
    a, a_out = ImageAnalogies().source_mosaic(req, (10, 12))
    assert a.shape == (10, 24, 3) and a_out.shape == (10, 24, 3)
    np.testing.assert_array_equal(a[:, :12], ins[0])
    # area 2x2 means (OpenCV's fixed-point rounding is within 1 level)
    np.testing.assert_allclose(a[:, 12:], ins[1].reshape(10, 2, 12, 2, 3).mean((1, 3)), atol=1)
    np.testing.assert_array_equal(a_out[:, :12], outs[0])
    np.testing.assert_array_equal(a_out[:, 12:], outs[1].repeat(2, 0).repeat(2, 1))  # nearest 2x


def test_working_size_caps_the_longer_side():
    rng = np.random.default_rng(5)
    req = request(rng, 30, 60)
    out = ImageAnalogies(max_side=20, levels=1).predict([req])[0]
    assert out.shape == (10, 20, 3)


def test_pyramid_and_field_upsampling_layout():
    img = np.arange(7 * 5 * 3, dtype=np.uint8).reshape(7, 5, 3)
    sizes = [p.shape[:2] for p in pyramid(img, 3, nearest=True)]
    assert sizes == [(7, 5), (4, 3), (2, 2)]
    coarse = np.array([[[0, 0], [1, 2]], [[3, 1], [2, 2]]], np.int32)
    fine = upsample_field(coarse, (4, 3), (5, 5))
    assert fine.shape == (4, 3, 2) and fine.dtype == np.int32
    np.testing.assert_array_equal(fine[0, 0], [0, 0])
    np.testing.assert_array_equal(fine[1, 1], [1, 1])
    np.testing.assert_array_equal(fine[0, 2], [2, 4])
    np.testing.assert_array_equal(fine[3, 1], [4, 3])  # 2 * (3, 1) + (1, 1), clipped to 4
    np.testing.assert_array_equal(fine[2, 2], [4, 4])


def test_bad_requests_and_arguments():
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="patch_size"):
        ImageAnalogies(patch_size=4)
    bad = AnalogyRequest("t", "d", "q7", [], [], noise(rng, 8, 8), (8, 8))
    with pytest.raises(ValueError, match="t/d/q7 needs at least one context pair"):
        ImageAnalogies().predict([bad])
    bad = AnalogyRequest("t", "d", "q8", [noise(rng, 8, 8)], [noise(rng, 8, 8)[..., 0]], noise(rng, 8, 8), (8, 8))
    with pytest.raises(ValueError, match="context output 0 of request t/d/q8"):
        ImageAnalogies().predict([bad])
