"""The spread ADE20K palette (PROTOCOL §1.2)."""

import json
from pathlib import Path

import numpy as np
import pytest

from icl.benchmarks.vibe.tasks.palette import (
    ade20k_palette,
    class_colours,
    lightness,
    max_classes,
    spread_order,
)

# An independent copy of mmsegmentation's palette, vendored with its checksum (tests/reference/README.md)
REFERENCE = Path(__file__).resolve().parents[3] / "reference" / "ade20k_palette.json"


def test_spread_order_starts_with_the_protocol_colours():
    first8 = [[80, 50, 50], [7, 255, 255], [255, 0, 255], [255, 255, 0], [230, 230, 230], [0, 0, 255], [0, 255, 10], [255, 0, 0]]
    assert class_colours(8).tolist() == first8


def test_spread_is_a_permutation_of_the_deduplicated_pool():
    pal = ade20k_palette()
    spread = spread_order(pal)
    unique = {tuple(c) for c in pal.tolist()}
    assert len(pal) == 150 and len(unique) == 149 == len(spread) == max_classes()
    assert {tuple(c) for c in spread.tolist()} == unique


def test_first_colour_is_darkest_and_then_farthest_point():
    pal = ade20k_palette()
    spread = spread_order(pal).astype(np.int64)
    # L* is float: numpy computes one colour and the whole palette on different paths (scalar
    # and SIMD; AVX2 and AVX-512 differ by 1.4e-14), so compare with a tolerance, and check that
    # no other colour is within it (the darkest is unique, the choice is not a near-tie)
    levels = lightness(pal.astype(np.int64))
    assert float(lightness(spread[0])) == pytest.approx(levels.min(), rel=0, abs=1e-9)
    assert np.sort(levels)[1] - levels.min() > 1e-6
    # brute force the farthest-point rule for the first steps
    pool = np.unique(pal.astype(np.int64), axis=0)
    chosen = [spread[0]]
    for step in range(1, 12):
        d = np.min([((pool - c) ** 2).sum(axis=1) for c in chosen], axis=0)
        assert ((spread[step] - chosen[0]) ** 2).sum() > 0
        assert ((pool - spread[step]) ** 2).sum(axis=1).min() == 0
        assert d.max() == np.min([((spread[step] - c) ** 2).sum() for c in chosen])
        chosen.append(spread[step])


def test_class_colours_bounds():
    with pytest.raises(ValueError):
        class_colours(0)
    with pytest.raises(ValueError):
        class_colours(150)


def test_packaged_palette_matches_the_reference_copy():
    assert json.loads(REFERENCE.read_text())["palette"] == ade20k_palette().tolist()
