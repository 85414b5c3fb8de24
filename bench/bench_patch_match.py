"""patch_match (C++/OpenMP) beside exact nearest-neighbour peers: a numpy brute force (one
matrix product over all patch pairs) and scikit-learn's ``NearestNeighbors`` (KD-tree), on
natural images from scikit-image. Reports time, the ratio, and how close PatchMatch's patch
distances come to the exact minimum (mean SSD ratio, share of pixels at the exact minimum)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data as skdata

from bench._peer import compare
from icl.ops import backend_status, patch_match

PATCH = 7
INTERACTIVE_S = 1.0  # 256^2 search must answer within a second on this CPU


def pair(size: int) -> tuple[np.ndarray, np.ndarray]:
    src = cv2.resize(skdata.astronaut(), (size, size), interpolation=cv2.INTER_AREA)
    tgt = cv2.resize(skdata.chelsea(), (size, size), interpolation=cv2.INTER_AREA)
    return src, tgt


def patch_rows(img: np.ndarray, p: int = PATCH) -> np.ndarray:
    r = p // 2
    pad = np.pad(img, ((r, r), (r, r), (0, 0)), mode="edge").astype(np.float32)
    win = np.lib.stride_tricks.sliding_window_view(pad, (p, p), axis=(0, 1))
    return np.ascontiguousarray(win.transpose(0, 1, 3, 4, 2).reshape(img.shape[0] * img.shape[1], -1))


def brute_force(src_rows: np.ndarray, tgt_rows: np.ndarray) -> np.ndarray:
    """Exact minimum SSD per target patch (float64 sums), by blocks of target rows."""
    s64 = src_rows.astype(np.float64)
    s2 = (s64 * s64).sum(1)
    out = np.empty(len(tgt_rows))
    for i in range(0, len(tgt_rows), 1024):
        t = tgt_rows[i:i + 1024].astype(np.float64)
        d = (t * t).sum(1)[:, None] - 2 * t @ s64.T + s2[None]
        out[i:i + 1024] = np.maximum(d.min(1), 0)
    return out


def quality(ours: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    exact = exact.reshape(ours.shape)
    return float(ours.mean() / max(exact.mean(), 1e-9)), float(np.mean(ours <= exact + 0.5))


@pytest.mark.parametrize("size", [40, 64])
def test_patch_match_vs_numpy_brute_force(benchmark, size):
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    src, tgt = pair(size)
    sr, tr = patch_rows(src), patch_rows(tgt)
    exact = brute_force(sr, tr)
    _, d = patch_match(src, tgt, patch_size=PATCH, iterations=5, backend="cpu")
    mean_ratio, at_min = quality(d, exact)
    print(f"\n[patch_match {size}^2] mean SSD / exact {mean_ratio:.3f}, exact at {100 * at_min:.1f}% of pixels")
    assert mean_ratio < 1.5
    compare(benchmark, lambda: patch_match(src, tgt, patch_size=PATCH, iterations=5, backend="cpu"),
            lambda: brute_force(sr, tr), peer_name="numpy brute force", items=1, rounds=3, peer_rounds=1)


def test_patch_match_vs_sklearn_kdtree(benchmark):
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    from sklearn.neighbors import NearestNeighbors

    src, tgt = pair(40)
    sr, tr = patch_rows(src), patch_rows(tgt)

    def peer() -> np.ndarray:
        dist, _ = NearestNeighbors(n_neighbors=1, algorithm="kd_tree").fit(sr).kneighbors(tr)
        return dist[:, 0] ** 2

    compare(benchmark, lambda: patch_match(src, tgt, patch_size=PATCH, iterations=5, backend="cpu"), peer,
            peer_name="sklearn NearestNeighbors(kd_tree)", items=1, rounds=3, peer_rounds=1)


def test_patch_match_256_interactive(benchmark):
    ok, why = backend_status("cpu")
    if not ok:
        pytest.skip(why)
    src, tgt = pair(256)
    benchmark.pedantic(lambda: patch_match(src, tgt, patch_size=PATCH, iterations=5, backend="cpu"),
                       rounds=3, iterations=1, warmup_rounds=1)
    median = benchmark.stats.stats.median
    print(f"\n[patch_match 256^2, 7x7, 5 iterations] {median * 1e3:.0f} ms")
    assert median < INTERACTIVE_S, f"patch_match 256^2 took {median:.2f} s (interactive: < {INTERACTIVE_S} s)"
