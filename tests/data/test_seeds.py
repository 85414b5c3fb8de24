"""derive_seed against SHA-256 digests computed by hand (``printf ... | sha256sum``)."""

import numpy as np

from icl.data.seeds import derive_seed, rng, seed_string


def test_seed_string_layout():
    assert seed_string(7, "scenes-a", "*", "s0003", "inpaint") == "7/scenes-a/*/s0003/inpaint"


def test_derive_seed_matches_hand_computed_sha256():
    # sha256("7/scenes-a/*/s0003/inpaint") = 34153b4aaa44d64c...; first 8 bytes little endian
    assert derive_seed(7, "scenes-a", "*", "s0003", "inpaint") == 0x4CD644AA4A3B1534
    # sha256("0/photos/*/*/split") = 5b63852763842fe4...
    assert derive_seed(0, "photos", "*", "*", "split") == 0xE42F84632785635B


def test_derive_seed_range_and_sensitivity():
    seeds = {derive_seed(0, "d", "test", f"id{i}", p) for i in range(50) for p in ("a", "b")}
    assert len(seeds) == 100
    assert all(0 <= s < 2**64 for s in seeds)
    assert derive_seed(0, "d", "test", "x", "a") != derive_seed(1, "d", "test", "x", "a")


def test_rng_is_default_rng_of_the_seed():
    a = rng(3, "d", "*", "q", "context").integers(0, 1 << 30, 8)
    b = np.random.default_rng(derive_seed(3, "d", "*", "q", "context")).integers(0, 1 << 30, 8)
    np.testing.assert_array_equal(a, b)
