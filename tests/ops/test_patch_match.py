"""patch_match: the cpu kernel equals the torch reference exactly (uint8) or to float64 rounding
(float32); its matches are checked against a numpy brute-force nearest-neighbour search."""

import numpy as np
import pytest
import torch

from icl.ops import patch_match
from icl.ops._dispatch import backend_status


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The reference's many small torch ops: a thread team only adds wake-ups on a loaded CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def padded_patches(img: np.ndarray, p: int) -> np.ndarray:
    """Every p x p patch (edges replicated) as rows [H * W, p * p * C], in int64/float64."""
    r = p // 2
    pad = np.pad(img, ((r, r), (r, r), (0, 0)), mode="edge")
    pad = pad.astype(np.int64 if img.dtype == np.uint8 else np.float64)
    h, w, c = img.shape
    win = np.lib.stride_tricks.sliding_window_view(pad, (p, p), axis=(0, 1))  # [h, w, c, p, p]
    return win.transpose(0, 1, 3, 4, 2).reshape(h * w, p * p * c)


def brute_force(source: np.ndarray, target: np.ndarray, p: int) -> np.ndarray:
    """Exact minimum patch SSD per target pixel, [Ht, Wt]."""
    s, t = padded_patches(source, p), padded_patches(target, p)
    d = (t * t).sum(1)[:, None] - 2 * t @ s.T + (s * s).sum(1)[None, :]
    return d.min(1).reshape(target.shape[:2])


def smooth_image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A natural-ish uint8 image: blurred noise plus gradients (nearest neighbours are meaningful)."""
    import cv2

    noise = rng.normal(0, 1, (h, w, 3)).astype(np.float32)
    blur = cv2.GaussianBlur(noise, (0, 0), 2.0)
    yy, xx = np.mgrid[0:h, 0:w]
    img = 128 + 300 * blur + 40 * np.sin(xx / 7.0)[..., None] + 30 * np.cos(yy / 5.0)[..., None]
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("kappa", [0.0, 0.7])
@pytest.mark.parametrize("shape_s, shape_t, patch", [((23, 31), (17, 19), 5), ((9, 1), (1, 12), 3), ((16, 16), (16, 16), 7)])
def test_cpu_equals_reference_uint8(kappa, shape_s, shape_t, patch):
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    rng = np.random.default_rng(3)
    s = rng.integers(0, 256, (*shape_s, 3), dtype=np.uint8)
    t = rng.integers(0, 256, (*shape_t, 3), dtype=np.uint8)
    ref = patch_match(s, t, patch_size=patch, iterations=3, kappa=kappa, seed=2**63 + 12345, backend="reference")
    cpu = patch_match(s, t, patch_size=patch, iterations=3, kappa=kappa, seed=2**63 + 12345, backend="cpu")
    assert cpu[0].dtype == np.int32 and cpu[0].shape == (*shape_t, 2) and cpu[1].dtype == np.float64
    np.testing.assert_array_equal(cpu[0], ref[0])
    np.testing.assert_array_equal(cpu[1], ref[1])


def test_cpu_equals_reference_float_with_init():
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    rng = np.random.default_rng(4)
    s = rng.random((21, 18, 6), dtype=np.float32)
    t = rng.random((13, 15, 6), dtype=np.float32)
    init = np.stack([rng.integers(0, 21, (13, 15)), rng.integers(0, 18, (13, 15))], -1).astype(np.int32)
    ref = patch_match(torch.from_numpy(s), torch.from_numpy(t), init=init, iterations=2, kappa=0.3, backend="reference")
    cpu = patch_match(torch.from_numpy(s), torch.from_numpy(t), init=init, iterations=2, kappa=0.3, backend="cpu")
    assert isinstance(cpu[0], torch.Tensor)
    # float64 sums in a different order can flip an exact tie only; none occur in random data
    np.testing.assert_array_equal(cpu[0].numpy(), ref[0].numpy())
    np.testing.assert_allclose(cpu[1].numpy(), ref[1].numpy(), rtol=1e-12)


def test_zero_iterations_keeps_init_and_reports_its_distance(backend):
    rng = np.random.default_rng(5)
    s = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    t = rng.integers(0, 256, (7, 8, 3), dtype=np.uint8)
    init = np.stack([rng.integers(0, 10, (7, 8)), rng.integers(0, 12, (7, 8))], -1).astype(np.int32)
    nnf, d = patch_match(s, t, patch_size=3, iterations=0, init=init, backend=backend)
    np.testing.assert_array_equal(nnf, init)
    sp, tp = padded_patches(s, 3), padded_patches(t, 3)
    idx = (init[..., 0] * 12 + init[..., 1]).reshape(-1)
    np.testing.assert_array_equal(d.reshape(-1), ((tp - sp[idx]) ** 2).sum(1))


def test_matches_against_brute_force(backend):
    rng = np.random.default_rng(6)
    s, t = smooth_image(rng, 40, 48), smooth_image(rng, 32, 36)
    t[8:24, 10:30] = s[12:28, 20:40]  # a copied region has exact matches
    nnf, d = patch_match(s, t, patch_size=5, iterations=4, seed=7, backend=backend)
    exact = brute_force(s, t, 5)
    # every reported distance is the true SSD of the reported match, hence >= the exact minimum
    sp, tp = padded_patches(s, 5), padded_patches(t, 5)
    idx = (nnf[..., 0].astype(np.int64) * s.shape[1] + nnf[..., 1]).reshape(-1)
    np.testing.assert_array_equal(d.reshape(-1), ((tp - sp[idx]) ** 2).sum(1))
    assert (d >= exact).all()
    # the copied region's interior is found exactly; overall within 15% of the exact minimum
    inner = (slice(10, 22), slice(12, 28))
    assert (d[inner] == 0).mean() > 0.95
    assert d.mean() <= 1.15 * exact.mean()


def test_more_iterations_never_worse_and_kappa_zero_is_plain(backend):
    rng = np.random.default_rng(8)
    s, t = smooth_image(rng, 30, 30), smooth_image(rng, 24, 26)
    d_prev = None
    for iters in (1, 2, 4):
        _, d = patch_match(s, t, patch_size=5, iterations=iters, seed=1, backend=backend)
        if d_prev is not None:
            assert (d <= d_prev).all()  # kappa 0: a pixel's cost only ever decreases
        d_prev = d


def test_deterministic_and_seeded(backend):
    rng = np.random.default_rng(9)
    s, t = smooth_image(rng, 20, 20), smooth_image(rng, 18, 22)
    a = patch_match(s, t, iterations=1, seed=11, backend=backend)
    b = patch_match(s, t, iterations=1, seed=11, backend=backend)
    c = patch_match(s, t, iterations=1, seed=12, backend=backend)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])


def test_bad_arguments():
    s = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="patch_size: expected an odd"):
        patch_match(s, s, patch_size=4)
    with pytest.raises(TypeError, match="both be uint8 or both float"):
        patch_match(s, s.astype(np.float32))
    with pytest.raises(ValueError, match="same channels"):
        patch_match(s, np.zeros((8, 8, 1), np.uint8))
    with pytest.raises(ValueError, match="init: positions must lie inside"):
        patch_match(s, s, init=np.full((8, 8, 2), 8, np.int32))
    with pytest.raises(ValueError, match="init: expected shape"):
        patch_match(s, s, init=np.zeros((8, 7, 2), np.int32))
    with pytest.raises(ValueError, match="kappa"):
        patch_match(s, s, kappa=-1.0)
    with pytest.raises(ValueError, match="seed"):
        patch_match(s, s, seed=2**64)
    with pytest.raises(ValueError, match="NaN"):
        patch_match(np.full((4, 4, 3), np.nan, np.float32), np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match=r"\[H, W, C\]"):
        patch_match(np.zeros((0, 4, 3), np.uint8), s)
