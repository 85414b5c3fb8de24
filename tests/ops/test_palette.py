"""nearest_palette against an exact numpy brute force (argmin: ties to the lower index),
cross-checked with SciPy's cKDTree distances."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from skimage import data as skdata

from icl.ops import nearest_palette
from tests.ops.nearest_peer import check, tie_count

# The ADE20K palette (PROTOCOL §1.2), as shipped inside the package.
ADE20K = Path(__file__).parents[2] / "icl" / "data" / "ade20k_palette.json"


@pytest.fixture(scope="module")
def ade20k() -> np.ndarray:
    return np.array(json.loads(ADE20K.read_text())["palette"], dtype=np.uint8)


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (64, 37)])
@pytest.mark.parametrize("colours", [1, 2, 7, 150, 256])
def test_random_images(backend: str, shape: tuple[int, int], colours: int) -> None:
    rng = np.random.default_rng(colours * 1000 + shape[0])
    palette = rng.integers(0, 256, (colours, 3), dtype=np.uint8)
    images = rng.integers(0, 256, (2, *shape, 3), dtype=np.uint8)
    check(images, palette, nearest_palette(images, palette, backend=backend))


def test_large_noisy_prediction(backend: str, ade20k: np.ndarray) -> None:
    # 1023x769: a blocky label map drawn in the palette plus Gaussian noise, as a model
    # prediction looks; large enough for the finest grid.
    rng = np.random.default_rng(7)
    labels = rng.integers(0, len(ade20k), (1023 // 11 + 1, 769 // 11 + 1)).repeat(11, 0).repeat(11, 1)[:1023, :769]
    noisy = np.clip(ade20k[labels] + rng.normal(0, 8, (1023, 769, 3)), 0, 255).round().astype(np.uint8)
    got = nearest_palette(noisy, ade20k, backend=backend)
    assert got.shape == (1023, 769)
    check(noisy, ade20k, got)


def test_ties_go_to_lower_index(backend: str, ade20k: np.ndarray) -> None:
    # Midpoints of palette pairs with even coordinate sums are exactly halfway.
    rng = np.random.default_rng(3)
    a, b = ade20k[rng.integers(0, 150, 4000)].astype(int), ade20k[rng.integers(0, 150, 4000)].astype(int)
    even = ((a + b) % 2 == 0).all(1) & (a != b).any(1)
    mid = ((a + b)[even] // 2).astype(np.uint8)
    images = mid[: len(mid) // 16 * 16].reshape(1, 16, -1, 3)
    assert tie_count(images, ade20k) > 20
    check(images, ade20k, nearest_palette(images, ade20k, backend=backend))


def test_dense_ties_on_lattice(backend: str) -> None:
    # Colours on a coarse even lattice and every colour of a 64^3 block around them: ties on
    # whole planes, crossing the grid's cells, at every grid level (262144 pixels).
    rng = np.random.default_rng(11)
    palette = (rng.integers(24, 41, (40, 3)) * 4).astype(np.uint8)
    cube = np.stack(np.meshgrid(*[np.arange(96, 160)] * 3, indexing="ij"), -1).astype(np.uint8)
    images = cube.reshape(1, 512, 512, 3)
    assert tie_count(images[:, :64], palette) > 500
    check(images, palette, nearest_palette(images, palette, backend=backend))


def test_duplicate_colours_keep_first(backend: str) -> None:
    palette = np.array([[9, 9, 9], [200, 10, 10], [9, 9, 9], [200, 10, 10]], dtype=np.uint8)
    images = np.random.default_rng(5).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    got = nearest_palette(images, palette, backend=backend)
    assert set(np.unique(got).tolist()) == {0, 1}
    check(images, palette, got)


@pytest.mark.parametrize("name", ["astronaut", "chelsea", "coffee"])
def test_photos(backend: str, name: str, ade20k: np.ndarray) -> None:
    photo = getattr(skdata, name)()
    check(photo, ade20k, nearest_palette(photo, ade20k, backend=backend))


def test_batch_of_64_with_candidates(backend: str, ade20k: np.ndarray) -> None:
    rng = np.random.default_rng(64)
    images = np.clip(ade20k[rng.integers(0, 150, (64, 6, 9))] + rng.normal(0, 20, (64, 6, 9, 3)), 0, 255)
    images = images.round().astype(np.uint8)
    candidates = rng.random((64, 150)) < 0.1
    candidates[:, 0] = True
    candidates[5] = candidates[4]  # repeated sets share a grid
    candidates[9] = False
    candidates[9, 77] = True  # one candidate: every pixel gets it
    got = nearest_palette(images, ade20k, candidates, backend=backend)
    assert (got[9] == 77).all()
    check(images, ade20k, got, candidates)
    check(images, ade20k, nearest_palette(images, ade20k, backend=backend))


@pytest.mark.parametrize("same_set", [True, False])
def test_candidates_on_large_images(backend: str, ade20k: np.ndarray, same_set: bool) -> None:
    # Two 512x512 images: one set of 524288 pixels or two of 262144 (different grid levels).
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (2, 512, 512, 3), dtype=np.uint8)
    candidates = rng.random((2, 150)) < 0.2
    if same_set:
        candidates[1] = candidates[0]
    check(images, ade20k, nearest_palette(images, ade20k, candidates, backend=backend), candidates)


def test_shared_candidates_and_torch_io(backend: str, ade20k: np.ndarray) -> None:
    rng = np.random.default_rng(8)
    images = rng.integers(0, 256, (3, 20, 30, 3), dtype=np.uint8)
    shared = np.zeros(150, dtype=bool)
    shared[[3, 40, 41, 149]] = True
    got = nearest_palette(torch.from_numpy(images), torch.from_numpy(ade20k), torch.from_numpy(shared), backend=backend)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int32
    check(images, ade20k, got.numpy(), np.broadcast_to(shared, (3, 150)))
    assert set(np.unique(got.numpy()).tolist()) <= {3, 40, 41, 149}


def test_float_input_and_int_palette(backend: str, ade20k: np.ndarray) -> None:
    rng = np.random.default_rng(9)
    x = rng.uniform(-0.1, 1.1, (2, 17, 23, 3)).astype(np.float32)
    as_uint8 = np.round(255 * np.clip(x, 0, 1)).astype(np.uint8)
    got = nearest_palette(x, ade20k.astype(np.int64), backend=backend)
    np.testing.assert_array_equal(got, nearest_palette(as_uint8, ade20k, backend=backend))
    check(as_uint8, ade20k, got)
    single = nearest_palette(torch.from_numpy(x[0]).double(), ade20k.tolist(), backend=backend)
    assert single.shape == (17, 23)
    np.testing.assert_array_equal(single.numpy(), got[0])


def test_palette_changes_between_calls(backend: str) -> None:
    # Grids are cached by palette and candidate set; a different palette must not reuse one.
    rng = np.random.default_rng(10)
    images = rng.integers(0, 256, (1, 300, 300, 3), dtype=np.uint8)
    first, second = rng.integers(0, 256, (2, 30, 3), dtype=np.uint8)
    for palette in (first, second, first):
        check(images, palette, nearest_palette(images, palette, backend=backend))


def test_repeated_set_gets_finer_grids(backend: str) -> None:
    # The cpu backend refines a set's grid as the pixels it serves over calls add up (16^3,
    # then 32^3, then 64^3 cells); every stage must stay exact.
    rng = np.random.default_rng(13)
    palette = rng.integers(0, 256, (60, 3), dtype=np.uint8)
    images = np.clip(palette[rng.integers(0, 60, (512, 512))] + rng.normal(0, 6, (512, 512, 3)), 0, 255)
    images = images.round().astype(np.uint8)
    for _ in range(10 if backend == "cpu" else 1):  # 2.6 million pixels in all
        check(images, palette, nearest_palette(images, palette, backend=backend))


def test_concurrent_calls(backend: str) -> None:
    rng = np.random.default_rng(14)
    palettes = rng.integers(0, 256, (6, 25, 3), dtype=np.uint8)
    images = rng.integers(0, 256, (6, 200, 300, 3), dtype=np.uint8)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda i: nearest_palette(images[i], palettes[i], backend=backend), range(6)))
    for i, got in enumerate(results):
        check(images[i], palettes[i], got)


@pytest.mark.parametrize(
    "images, palette, candidates, error, match",
    [
        (np.zeros((4, 4, 3), np.int32), np.zeros((2, 3), np.uint8), None, TypeError, "images"),
        (np.zeros((4, 4), np.uint8), np.zeros((2, 3), np.uint8), None, ValueError, "images"),
        (np.zeros((4, 4, 4), np.uint8), np.zeros((2, 3), np.uint8), None, ValueError, "images"),
        (np.full((4, 4, 3), np.nan, np.float32), np.zeros((2, 3), np.uint8), None, ValueError, "NaN"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 3), np.float32), None, TypeError, "palette"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 4), np.uint8), None, ValueError, "palette"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((0, 3), np.uint8), None, ValueError, "palette"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((257, 3), np.uint8), None, ValueError, "palette"),
        (np.zeros((4, 4, 3), np.uint8), np.full((2, 3), 256, np.int64), None, ValueError, "0..255"),
        (np.zeros((4, 4, 3), np.uint8), np.full((2, 3), -1, np.int16), None, ValueError, "0..255"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 3), np.uint8), np.ones(2, np.uint8), TypeError, "candidates"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 3), np.uint8), np.ones(3, bool), ValueError, "candidates"),
        (np.zeros((2, 4, 4, 3), np.uint8), np.zeros((2, 3), np.uint8), np.ones((3, 2), bool), ValueError, "candidates"),
        (np.zeros((3, 4, 4, 3), np.uint8), np.zeros((2, 3), np.uint8), np.eye(3, 2, dtype=bool), ValueError, "image 2"),
    ],
)
def test_errors(backend: str, images, palette, candidates, error, match) -> None:
    with pytest.raises(error, match=match):
        nearest_palette(images, palette, candidates, backend=backend)
