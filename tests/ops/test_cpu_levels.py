"""Every instruction-set level of the native hot loops (x86-64-v4, -v3, baseline; see
``csrc/common.h``) gives the same results: exactly for integer inputs and outputs, to float
rounding for float inputs. ``ICL_CPU_LEVEL`` pins a level for a whole run
(``tests/run_isa_paths.sh`` runs the kernel tests once per level); here each level is pinned
in turn through ``icl._C.cpu_level``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from icl.ops._dispatch import backend_status

pytestmark = pytest.mark.skipif(not backend_status("cpu")[0], reason="native module not built")


@pytest.fixture
def native() -> Iterator[object]:
    import icl._C as C

    before = C.cpu_level()
    yield C
    C.cpu_level(before)


def _per_level(C: object, fn):  # type: ignore[no-untyped-def]
    out = {}
    for level in C.cpu_levels():  # type: ignore[attr-defined]
        C.cpu_level(level)  # type: ignore[attr-defined]
        out[level] = fn()
    return out


def test_levels_agree(native: object) -> None:
    import icl.ops as ops

    rng = np.random.default_rng(0)
    u = rng.integers(0, 256, (2, 67, 131, 3), dtype=np.uint8)  # odd sizes: vector tails
    v = rng.integers(0, 256, (2, 67, 131, 3), dtype=np.uint8)
    f, g = u.astype(np.float32) / 255, v.astype(np.float32) / 255
    mask = rng.random((2, 67, 131)) > 0.5
    vals = rng.random((2, 67, 131)).astype(np.float32)
    res = _per_level(native, lambda: (ops.psnr(u, v), ops.ssim(u, v), ops.psnr(f, g, 1.0), ops.ssim(f, g, 1.0),
                                      ops.psnr(f.astype(np.float64), g.astype(np.float64), 1.0),
                                      ops.connected_components(mask, 8, vals)))
    assert len(res) >= 1
    want = res[native.cpu_levels()[-1]]  # type: ignore[attr-defined]
    for level, got in res.items():
        np.testing.assert_array_equal(got[0], want[0], err_msg=level)  # uint8 MSE: exact integers
        for i in (1, 2, 3, 4):
            np.testing.assert_allclose(got[i], want[i], rtol=1e-12, atol=0, err_msg=f"{level} output {i}")
        for name in ("labels", "num", "area", "box", "argmax"):
            np.testing.assert_array_equal(getattr(got[5], name), getattr(want[5], name), err_msg=level)
        np.testing.assert_allclose(got[5].value_sum, want[5].value_sum, rtol=1e-6, err_msg=level)
    nan = vals.copy()
    nan[1, 66, 130] = np.nan  # the last element: the finite check's vector tail
    for level in native.cpu_levels():  # type: ignore[attr-defined]
        native.cpu_level(level)  # type: ignore[attr-defined]
        with pytest.raises(ValueError):
            ops.connected_components(mask, 8, nan)


def test_bad_levels_are_refused(native: object) -> None:
    with pytest.raises(ValueError, match="expected 'v4', 'v3' or 'baseline', got 'avx2'"):
        native.cpu_level("avx2")  # type: ignore[attr-defined]
    env = {**os.environ, "ICL_CPU_LEVEL": "sse"}
    out = subprocess.run([sys.executable, "-c", "import icl._C"], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "ICL_CPU_LEVEL: expected 'v4', 'v3' or 'baseline', got 'sse'" in out.stderr
    env["ICL_CPU_LEVEL"] = "baseline"
    out = subprocess.run([sys.executable, "-c", "import icl._C as C; print(C.cpu_level())"], capture_output=True,
                         text=True, env=env)
    assert out.stdout.strip() == "baseline", out.stderr
