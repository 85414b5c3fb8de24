"""connected_components against OpenCV and scikit-image labels and numpy per-component statistics."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from skimage import data as skdata
from skimage.measure import label as sk_label

from icl.ops import Components, connected_components
from icl.ops._dispatch import backend_status
from tests.tolerances import ATOL

BACKENDS = ["reference", "cpu"]


def _need(backend: str) -> None:
    ok, why = backend_status(backend)
    if not ok:
        pytest.skip(f"{backend} backend unavailable: {why}")


def canonical(labels: np.ndarray) -> np.ndarray:
    """Renumber a peer's labels 1..n by the raster order of each component's first pixel."""
    flat = labels.ravel()
    ids, first = np.unique(flat, return_index=True)
    keep = ids != 0
    ids, first = ids[keep], first[keep]
    remap = np.zeros(int(flat.max()) + 1, dtype=np.int64)
    remap[ids[np.argsort(first)]] = np.arange(1, len(ids) + 1)
    return remap[flat].reshape(labels.shape)


def peer_labels(mask: np.ndarray, connectivity: int, peer: str) -> np.ndarray:
    m = (mask != 0).astype(np.uint8)
    if peer == "opencv":
        return canonical(cv2.connectedComponents(m, connectivity=connectivity, ltype=cv2.CV_32S)[1])
    return canonical(sk_label(m, connectivity=1 if connectivity == 4 else 2, background=0))


def numpy_stats(labels: np.ndarray, values: np.ndarray | None) -> dict[str, np.ndarray]:
    """Per-component statistics of canonical labels [H, W], components in label order."""
    w = labels.shape[1]
    flat = labels.ravel()
    order = np.argsort(flat, kind="stable")  # stable: raster order within each component
    order = order[np.count_nonzero(flat == 0):]
    lab = flat[order]
    n = int(lab[-1]) if len(lab) else 0
    starts = np.searchsorted(lab, np.arange(1, n + 1))
    area = np.diff(np.r_[starts, len(lab)])
    ys, xs = np.divmod(order, w)
    out = {"area": area.astype(np.int64)}
    if n == 0:
        out["box"] = np.zeros((0, 4), np.int32)
    else:
        out["box"] = np.stack([np.minimum.reduceat(xs, starts), np.minimum.reduceat(ys, starts),
                               np.maximum.reduceat(xs, starts) + 1, np.maximum.reduceat(ys, starts) + 1], 1)
    if values is not None:
        v = values.ravel()[order].astype(np.float64)
        sums = np.add.reduceat(v, starts) if n else np.zeros(0)
        vmax = np.maximum.reduceat(v, starts) if n else np.zeros(0)
        hit = np.flatnonzero(v == np.repeat(vmax, area))
        _, first = np.unique(np.repeat(np.arange(n), area)[hit], return_index=True)
        out["value_sum"] = sums
        out["value_mean"] = (sums / np.maximum(area, 1)).astype(np.float32)
        out["argmax"] = np.stack(np.divmod(order[hit[first]], w), 1) if n else np.zeros((0, 2), np.int64)
    return out


def check(res: Components, masks: np.ndarray, values: np.ndarray | None, connectivity: int,
          peer: str = "opencv") -> None:
    """Compare a result for masks [B, H, W] with the peer's labels and numpy's statistics."""
    labels = np.asarray(res.labels)
    assert labels.dtype == np.int32 and labels.shape == masks.shape
    want = [peer_labels(m, connectivity, peer) for m in masks]
    np.testing.assert_array_equal(labels, np.stack(want) if len(want) else labels)
    stats = [numpy_stats(lab, None if values is None else v) for lab, v in
             zip(want, values if values is not None else [None] * len(want))]
    num = np.array([len(s["area"]) for s in stats], dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(res.num), num)
    np.testing.assert_array_equal(np.asarray(res.image), np.repeat(np.arange(len(num)), num))
    for key, dtype in (("area", np.int64), ("box", np.int32)):
        got = np.asarray(getattr(res, key))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, np.concatenate([s[key] for s in stats]).astype(dtype))
    if values is None:
        assert res.value_sum is None and res.value_mean is None and res.argmax is None
        return
    area = np.concatenate([s["area"] for s in stats])
    sums = np.concatenate([s["value_sum"] for s in stats])
    got_sum = np.asarray(res.value_sum)
    assert got_sum.dtype == np.float32 and np.asarray(res.value_mean).dtype == np.float32
    bound = ATOL[torch.float32] * np.maximum(area, 1) + 1e-7 * np.abs(sums)  # per-value tolerance, summed
    np.testing.assert_array_less(np.abs(got_sum - sums), bound)
    np.testing.assert_allclose(np.asarray(res.value_mean), np.concatenate([s["value_mean"] for s in stats]),
                               rtol=0, atol=ATOL[torch.float32])
    np.testing.assert_array_equal(np.asarray(res.argmax), np.concatenate([s["argmax"] for s in stats]))
    assert np.asarray(res.argmax).dtype == np.int64


def ties(rng: np.random.Generator, shape: tuple[int, ...], top: int = 4) -> np.ndarray:
    """Integer-valued floats: many ties for the argmax, exact sums and means."""
    return rng.integers(0, top, shape).astype(np.float32)


def spiral(n: int) -> np.ndarray:
    """A square spiral of 1-pixel walls: one component whose rows join only through the centre."""
    m = np.zeros((n, n), np.uint8)
    y = x = d = 0
    m[0, 0] = 1
    steps = ((0, 1), (1, 0), (0, -1), (-1, 0))

    def inside(yy: int, xx: int) -> bool:
        return 0 <= yy < n and 0 <= xx < n

    def free(yy: int, xx: int) -> bool:
        return inside(yy, xx) and not m[yy, xx]

    moved = True
    while moved:
        moved = False
        dy, dx = steps[d]
        # advance while the next cell is free and the one after it is not a wall (keep a gap)
        while free(y + dy, x + dx) and (free(y + 2 * dy, x + 2 * dx) or not inside(y + 2 * dy, x + 2 * dx)):
            y, x = y + dy, x + dx
            m[y, x] = 1
            moved = True
        d = (d + 1) % 4
    return m


def shapes_zoo() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    comb = np.zeros((19, 23), np.uint8)
    comb[:, ::2] = 1
    comb[-1] = 1  # every tooth joins the others only in the last row
    stairs = np.zeros((12, 12), np.uint8)
    stairs[np.arange(12), np.arange(12)] = 1  # diagonal: one 8-component, twelve 4-components
    stairs[np.arange(11), np.arange(1, 12)[::-1]] = 1
    cheq = (np.indices((9, 14)).sum(0) % 2).astype(np.uint8)
    snake = np.zeros((21, 17), np.uint8)
    snake[::2] = 1
    snake[1::4, -1] = 1
    snake[3::4, 0] = 1
    return {
        "one_fg": np.ones((1, 1), np.uint8), "one_bg": np.zeros((1, 1), np.uint8),
        "empty": np.zeros((7, 13), np.uint8), "full": np.ones((7, 13), np.uint8),
        "checkerboard": cheq, "comb": comb, "stairs": stairs, "snake": snake, "spiral": spiral(29),
        "row": (rng.random((1, 37)) < 0.5).astype(np.uint8), "col": (rng.random((41, 1)) < 0.5).astype(np.uint8),
        "sparse": (rng.random((7, 13)) < 0.1).astype(np.uint8), "half": (rng.random((16, 31)) < 0.5).astype(np.uint8),
        "dense": (rng.random((33, 17)) < 0.85).astype(np.uint8),
    }


ZOO = shapes_zoo()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_against_opencv(name, connectivity, backend):
    _need(backend)
    m = ZOO[name]
    v = ties(np.random.default_rng(len(name)), m.shape)
    res = connected_components(m, connectivity, v, backend=backend)
    check(res, m[None], v[None], connectivity)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("connectivity", [4, 8])
def test_checkerboard_connectivity_differs(connectivity, backend):
    _need(backend)
    m = ZOO["checkerboard"]
    res = connected_components(torch.from_numpy(m), connectivity, backend=backend)
    assert int(res.num[0]) == (int(m.sum()) if connectivity == 4 else 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("density", [0.05, 0.3, 0.5, 0.7, 0.95])
def test_random_masks_against_skimage(density, connectivity, backend):
    _need(backend)
    rng = np.random.default_rng(int(density * 100) + connectivity)
    m = rng.random((3, 29, 37)) < density
    v = rng.standard_normal(m.shape).astype(np.float32)
    check(connected_components(m, connectivity, v, backend=backend), m, v, connectivity, peer="skimage")


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_64_mixed(backend):
    _need(backend)
    rng = np.random.default_rng(64)
    m = rng.random((64, 9, 11)) < rng.random((64, 1, 1))
    m[0] = False
    m[1] = True
    v = ties(rng, m.shape, top=3).astype(np.float64)
    for connectivity in (4, 8):
        check(connected_components(m, connectivity, v, backend=backend), m, v, connectivity)
    check(connected_components(m, 8, backend=backend), m, None, 8)


def test_large_image_cpu():
    _need("cpu")
    rng = np.random.default_rng(1023)
    m = (rng.random((1023, 769)) < 0.55).astype(np.uint8) * rng.integers(1, 256, (1023, 769)).astype(np.uint8)
    v = ties(rng, m.shape, top=50)
    for connectivity in (4, 8):
        check(connected_components(m, connectivity, v, backend="cpu"), m[None], v[None], connectivity)


@pytest.mark.parametrize("name", ["camera", "coins", "moon", "text", "page"])
def test_thresholded_photos_cpu(name):
    _need("cpu")
    img = getattr(skdata, name)()
    v = img.astype(np.float32) / 255.0
    for thr, connectivity in ((img.mean(), 8), (np.median(img), 4)):
        m = img > thr
        check(connected_components(m, connectivity, v, backend="cpu"), m[None], v[None], connectivity,
              peer="skimage" if connectivity == 4 else "opencv")


def test_photo_reference_matches_cpu():
    _need("cpu")
    img = skdata.coins()[::6, ::6]
    m, v = img > 110, torch.from_numpy(img.astype(np.float64) / 255.0)
    for connectivity in (4, 8):
        a = connected_components(torch.from_numpy(m), connectivity, v, backend="reference")
        b = connected_components(torch.from_numpy(m), connectivity, v, backend="cpu")
        for field, x, y in zip(Components._fields, a, b):
            assert x.dtype == y.dtype, field
            if field in ("value_sum", "value_mean"):
                torch.testing.assert_close(x, y, rtol=0, atol=ATOL[torch.float32])
            else:
                assert torch.equal(x, y), field


@pytest.mark.parametrize("stripes", [2, 3, 7, 64])
def test_cpu_stripes_change_nothing(stripes, monkeypatch):
    """Images cut into row stripes (as for one large image on many threads) label the same."""
    _need("cpu")
    monkeypatch.setenv("OMP_DYNAMIC", "false")  # full teams even on a busy machine: real concurrency
    from icl import _C

    rng = np.random.default_rng(stripes)
    cases = [spiral(64), ZOO["comb"], ZOO["snake"], (rng.random((64, 50)) < 0.6).astype(np.uint8),
             np.ones((64, 3), np.uint8), (skdata.text() > 100)[:64].astype(np.uint8)]
    for m in cases:
        v = ties(rng, m.shape, top=3)
        for connectivity in (4, 8):
            got = _C.connected_components(m[None], connectivity, v[None], stripes=stripes)
            res = Components(*got)
            check(res, m[None], v[None], connectivity)
            whole = _C.connected_components(m[None], connectivity, v[None], stripes=1)
            for x, y in zip(got[5:], whole[5:]):
                np.testing.assert_array_equal(x, y)  # bitwise: sums run in the same order
    v = np.ones((64, 50), np.float32)
    v[63, 49] = np.nan  # in the last stripe
    with pytest.raises(ValueError, match="values"):
        _C.connected_components(cases[3][None], 8, v[None], stripes=stripes)


def test_io_kinds_and_shapes():
    m = np.array([[0, 3, 0], [0, 0, 255]], np.uint8)
    res = connected_components(m)
    assert isinstance(res, Components) and isinstance(res.labels, np.ndarray)
    assert res.labels.shape == (1, 2, 3) and res.num.tolist() == [1]
    assert connected_components(m, 4).num.tolist() == [2]
    t = connected_components(torch.tensor(m.astype(np.int64) - 1))  # -1 is nonzero: foreground
    assert isinstance(t.labels, torch.Tensor) and t.labels.dtype == torch.int32 and t.num.tolist() == [1]
    half = connected_components(m, values=torch.ones(2, 3, dtype=torch.float16).numpy())
    assert half.value_sum.tolist() == [2.0] and half.argmax.tolist() == [[0, 1]]
    rng = np.random.default_rng(3)
    big = rng.random((2, 40, 60)) < 0.5
    vals = torch.from_numpy(rng.integers(0, 3, (2, 60, 40)).astype(np.float32)).transpose(1, 2)
    strided = connected_components(torch.from_numpy(big)[:, ::2, ::3], 4, vals[:, ::2, ::3])  # not contiguous
    check(strided, big[:, ::2, ::3], vals[:, ::2, ::3].numpy(), 4)
    empty = connected_components(np.zeros((0, 4, 5), bool), values=np.zeros((0, 4, 5)))
    assert empty.labels.shape == (0, 4, 5) and empty.area.shape == (0,) and empty.argmax.shape == (0, 2)


def test_validation():
    m = np.ones((3, 4), bool)
    with pytest.raises(TypeError, match="mask"):
        connected_components(m.astype(np.float32))
    with pytest.raises(TypeError, match="mask"):
        connected_components(m.tolist())
    with pytest.raises(ValueError, match="mask"):
        connected_components(np.ones(5, bool))
    with pytest.raises(ValueError, match="mask"):
        connected_components(np.ones((1, 2, 3, 4), bool))
    for bad in (6, 0, True, "8"):
        with pytest.raises(ValueError, match="connectivity"):
            connected_components(m, bad)
    with pytest.raises(ValueError, match="values"):
        connected_components(m, values=np.ones((4, 3), np.float32))
    with pytest.raises(TypeError, match="values"):
        connected_components(m, values=np.ones((3, 4), np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_values(backend):
    _need(backend)
    m = np.zeros((70, 90), bool)
    m[10:20, 5:9] = True
    cases = ((np.nan, np.float32, (12, 6)), (-np.inf, np.float64, (0, 0)), (np.inf, np.float16, (69, 89)))
    for bad, dtype, where in cases:
        v = np.ones(m.shape, dtype)
        v[where] = bad  # inside a component or in the background alike
        with pytest.raises(ValueError, match="values"):
            connected_components(m, values=v, backend=backend)
    big = np.full(m.shape, 6e4, np.float16)  # its float16 sum overflows, yet every value is finite
    assert connected_components(m, values=big, backend=backend).value_mean.tolist() == [60000.0]
