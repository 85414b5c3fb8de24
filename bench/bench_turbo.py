"""turbo_decode on a 1024x1024 noisy turbo depth image, beside SciPy's cKDTree on the 256
turbo colours (tree built once, workers=-1) followed by the same bin-centre lookup."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from bench._peer import compare
from icl.ops import TURBO_TABLE, backend_status, turbo_decode, turbo_encode


def test_turbo_decode_1024(benchmark) -> None:
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:1024, 0:1024]
    depth = 5 + 4.9 * np.sin(yy / 90.0) * np.cos(xx / 70.0)
    image = np.clip(turbo_encode(depth, 0, 10) + rng.normal(0, 8, (1024, 1024, 3)), 0, 255).round().astype(np.uint8)
    tree = cKDTree(TURBO_TABLE.astype(np.float64))
    centres = (0 + (np.arange(256) + 0.5) / 256 * 10).astype(np.float32)
    pixels = image.reshape(-1, 3)

    def peer() -> np.ndarray:
        return centres[tree.query(pixels, workers=-1)[1]].reshape(1024, 1024)

    turbo_decode(image, 0, 10, backend="cpu")  # builds the lookup table once
    ratio = compare(benchmark, lambda: turbo_decode(image, 0, 10, backend="cpu"), peer,
                    peer_name="scipy cKDTree.query(workers=-1)", items=1, rounds=20, peer_rounds=3, warmup_s=0.3,
                    bytes_moved=image.size + 4 * image[..., 0].size)  # uint8 RGB in, float32 depth out
    assert ratio >= 20, f"{ratio:.1f}x cKDTree, floor 20x"
