"""The native thread policy: switchable, validated, and results never depend on it."""

from __future__ import annotations

import numpy as np
import pytest

import icl.ops as ops


@pytest.fixture
def native():
    ok, why = ops.backend_status("cpu")
    if not ok:
        pytest.skip(why)
    from icl import _C

    before = _C.thread_policy()
    yield _C
    _C.thread_policy(before)


def test_policy_get_set_and_team_size(native):
    assert native.thread_policy() in ("adaptive", "fixed", "single")
    assert native.thread_policy("single") == "single" and native.team_size() == 1
    assert native.thread_policy("fixed") == "fixed" and native.team_size() == native.max_threads()
    native.thread_policy("adaptive")
    assert 1 <= native.team_size() <= native.max_threads()
    with pytest.raises(ValueError, match="expected 'adaptive', 'fixed' or 'single', got 'many'"):
        native.thread_policy("many")


def test_results_do_not_depend_on_the_policy(native):
    rng = np.random.default_rng(4)
    img = rng.integers(0, 256, (2, 300, 200, 3), dtype=np.uint8)
    other = np.clip(img.astype(int) + rng.integers(-9, 10, img.shape), 0, 255).astype(np.uint8)
    mask = rng.random((2, 300, 200)) < 0.5
    values = rng.random((2, 300, 200), dtype=np.float32)
    palette = rng.integers(0, 256, (40, 3))
    results = []
    for policy in ("single", "fixed", "adaptive"):
        native.thread_policy(policy)
        comp = ops.connected_components(mask, 8, values, backend="cpu")
        results.append([ops.ssim(img, other, backend="cpu"), ops.psnr(img, other, backend="cpu"),
                        ops.nearest_palette(img, palette, backend="cpu"), ops.turbo_decode(img, 0.5, 9.0, backend="cpu"),
                        comp.labels, comp.value_sum, comp.argmax])
    for other_run in results[1:]:
        for got, want in zip(other_run, results[0], strict=True):
            np.testing.assert_array_equal(got, want)
