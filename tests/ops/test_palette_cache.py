"""nearest_palette's per-palette cache on the cpu backend: a candidate set that earlier calls
used for 2^22 pixels gets a full 2^24-entry table; it must equal the grid on every colour, be
keyed by content (a palette changed in place is a new key), stay bounded, and be safe to
share between threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from icl.data.seeds import derive_seed
from icl.ops import backend_status, nearest_palette
from icl.ops._dispatch import native
from tests.ops.nearest_peer import check

# Every RGB colour once: pixel i is (i & 255, i >> 8 & 255, i >> 16). A set gets its full
# table once earlier calls served 2^26 pixels (csrc/palette.cpp, kLutAfterPixels): four
# calls on every colour.
ALL_COLOURS = np.arange(1 << 24, dtype=np.uint32).view(np.uint8).reshape(1, 4096, 4096, 4)[..., :3]
PRIMING = np.ascontiguousarray(ALL_COLOURS)
PRIMING_CALLS = 4


@pytest.fixture(autouse=True)
def _native() -> None:
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)


def _rng(purpose: str) -> np.random.Generator:
    return np.random.default_rng(derive_seed(0, "ops", "test", "palette_cache", purpose))


def _palette(rng: np.random.Generator, colours: int) -> np.ndarray:
    """Colours on a coarse lattice (many exact ties between neighbours) plus duplicates."""
    pal = (rng.integers(0, 8, (colours, 3)) * 36 + rng.integers(0, 2, (colours, 3))).astype(np.uint8)
    pal[-3:] = pal[:3]
    return pal


def _cached_tables() -> tuple[int, int]:
    sets, tables = native()._palette_cache_info()
    return int(sets), int(tables)


def _prime(palette: np.ndarray) -> None:
    for _ in range(PRIMING_CALLS):
        nearest_palette(PRIMING, palette, backend="cpu")
    nearest_palette(PRIMING[:, :8], palette, backend="cpu")  # served 2^26 pixels before: builds it


def test_full_table_equals_grid_on_every_colour() -> None:
    rng = _rng("every colour")
    palette = _palette(rng, 70)
    images = np.ascontiguousarray(ALL_COLOURS)
    by_grid = nearest_palette(images, palette, backend="cpu")  # the first call: the 64^3 grid
    for _ in range(PRIMING_CALLS - 1):
        nearest_palette(images, palette, backend="cpu")
    by_table = nearest_palette(images, palette, backend="cpu")  # 2^26 pixels served: the full table
    assert _cached_tables()[1] >= 1
    np.testing.assert_array_equal(by_table, by_grid)
    sample = rng.integers(0, 256, (1, 64, 64, 3), dtype=np.uint8)
    check(sample, palette, nearest_palette(sample, palette, backend="cpu"))


def test_palette_changed_in_place_gets_a_new_table() -> None:
    rng = _rng("in place")
    palette = _palette(rng, 40)
    _prime(palette)
    sample = rng.integers(0, 256, (2, 96, 96, 3), dtype=np.uint8)
    check(sample, palette, nearest_palette(sample, palette, backend="cpu"))
    palette[5] = (255 - palette[5]) // 2 + 1  # same array object, new colour
    palette[-1] = palette[0]
    check(sample, palette, nearest_palette(sample, palette, backend="cpu"))
    _prime(palette)
    check(sample, palette, nearest_palette(sample, palette, backend="cpu"))


def test_cache_is_bounded_and_evicted_palettes_stay_exact() -> None:
    rng = _rng("eviction")
    palettes = [_palette(rng, 30 + k) for k in range(3)]
    sample = rng.integers(0, 256, (1, 80, 80, 3), dtype=np.uint8)
    for palette in palettes:
        _prime(palette)
        assert _cached_tables()[1] <= 2
    for k in range(20):
        nearest_palette(sample, _palette(rng, 10 + k), backend="cpu")
    sets, tables = _cached_tables()
    assert sets <= 16 and tables <= 2
    for palette in palettes:  # the first one's table was dropped: the grid serves it again
        check(sample, palette, nearest_palette(sample, palette, backend="cpu"))


def test_threads_share_and_build_tables_concurrently() -> None:
    rng = _rng("threads")
    palettes = [_palette(rng, 50 + k) for k in range(3)]
    samples = rng.integers(0, 256, (6, 1, 64, 64, 3), dtype=np.uint8)

    def job(i: int) -> np.ndarray:
        palette = palettes[i % 3]
        _prime(palette)
        return nearest_palette(samples[i], palette, backend="cpu")

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(job, range(6)))
    for i, got in enumerate(results):
        check(samples[i], palettes[i % 3], got)
    assert _cached_tables()[1] <= 2
