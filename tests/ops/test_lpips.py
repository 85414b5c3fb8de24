"""LPIPS against the published calibration values and an independently written network."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from icl.ops import _lpips_weights as lw
from icl.ops._dispatch import BackendError
from icl.ops.lpips import LPIPSWeightsNotFound
from icl.ops.lpips import lpips as lpips_fn
from tests.tolerances import ATOL

REPO = Path(__file__).resolve().parents[2]
# IQA-PyTorch's published calibration pairs, vendored with checksums (tests/reference/README.md)
CALIBRATION = REPO / "tests" / "reference" / "lpips-calibration"


def _weights_or_skip(net: str) -> dict[str, np.ndarray]:
    try:
        return lw.find(net)[0]
    except LPIPSWeightsNotFound as exc:
        if os.environ.get("CI"):  # CI installs the weights (make lpips-weights): missing is a failure
            raise
        pytest.skip(f"LPIPS {net} weights not installed (run `make lpips-weights`): {exc}")


@pytest.fixture(scope="module")
def alex() -> dict[str, np.ndarray]:
    return _weights_or_skip("alex")


@pytest.fixture(scope="module")
def vgg() -> dict[str, np.ndarray]:
    return _weights_or_skip("vgg")


def _pair(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    # a smooth-ish image and a noisy copy: LPIPS values in a realistic range
    base = rng.integers(0, 256, shape).astype(np.float32)
    base = (base + np.roll(base, 1, -2) + np.roll(base, 1, -3)) / 3
    noisy = base + rng.normal(0, 25, shape)
    return base.round().astype(np.uint8), noisy.clip(0, 255).round().astype(np.uint8)


# --- calibration --------------------------------------------------------------------------

def test_alex_matches_published_calibration_values(alex):
    import cv2

    rows = list(csv.DictReader(open(CALIBRATION / "values.csv")))
    assert len(rows) == 5

    def load(folder: str) -> np.ndarray:
        return np.stack([cv2.cvtColor(cv2.imread(str(CALIBRATION / folder / f"{r['pair']}.png")), cv2.COLOR_BGR2RGB)
                         for r in rows])

    got = lpips_fn(load("ref"), load("dist"), "alex", backend="reference")
    want = np.array([float(r["lpips_alex_v0.1"]) for r in rows])
    assert got.dtype == np.float32 and got.shape == (5,)
    # the README: the official metric reproduces each published value within 1e-4
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


# --- an independent VGG/AlexNet LPIPS (nn.Sequential with torchvision's layer indices) ------

def _sequential(net: str) -> tuple[nn.Sequential, list[int]]:
    if net == "alex":
        layers = [nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
                  nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
                  nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
                  nn.Conv2d(256, 256, 3, padding=1), nn.ReLU()]
        return nn.Sequential(*layers), [2, 5, 8, 10, 12]
    layers, cin = [], 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512]:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
            cin = v
    return nn.Sequential(*layers), [4, 9, 16, 23, 30]  # relu1_2, relu2_2, relu3_3, relu4_3, relu5_3


def _peer_lpips(a: np.ndarray, b: np.ndarray, net: str, params: dict[str, np.ndarray]) -> np.ndarray:
    """Float64 LPIPS written from the paper's description, on [B, H, W, 3] uint8."""
    seq, cuts = _sequential(net)
    convs = [m for m in seq if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        for i, m in enumerate(convs):
            m.weight.copy_(torch.from_numpy(params[f"conv{i}.weight"]))
            m.bias.copy_(torch.from_numpy(params[f"conv{i}.bias"]))
        seq = seq.double()
        heads = []
        for k in range(5):
            w = torch.from_numpy(params[f"lin{k}.weight"]).double()
            head = nn.Conv2d(w.numel(), 1, 1, bias=False).double()
            head.weight.copy_(w.view(1, -1, 1, 1))
            heads.append(head)
        shift = torch.tensor([-0.030, -0.088, -0.188], dtype=torch.float64)[:, None, None]
        scale = torch.tensor([0.458, 0.448, 0.450], dtype=torch.float64)[:, None, None]

        def taps(x: np.ndarray) -> list[torch.Tensor]:
            h = (torch.from_numpy(x).double().permute(0, 3, 1, 2) / 127.5 - 1 - shift) / scale
            out, start = [], 0
            for end in cuts:
                h = seq[start:end](h)
                out.append(h)
                start = end
            return out

        total = torch.zeros(a.shape[0], dtype=torch.float64)
        for head, fa, fb in zip(heads, taps(a), taps(b)):
            na = fa / (torch.linalg.vector_norm(fa, dim=1, keepdim=True) + 1e-10)
            nb = fb / (torch.linalg.vector_norm(fb, dim=1, keepdim=True) + 1e-10)
            total += head((na - nb) ** 2).mean(dim=(1, 2, 3))
    return total.numpy()


@pytest.mark.parametrize("net,shape", [("vgg", (2, 21, 27, 3)), ("vgg", (1, 16, 16, 3)),
                                       ("alex", (2, 47, 63, 3)), ("alex", (1, 31, 31, 3))])
def test_matches_independent_network(net, shape, request):
    params = request.getfixturevalue(net)
    a, b = _pair(np.random.default_rng(7), shape)
    got = lpips_fn(a, b, net, backend="reference")
    want = _peer_lpips(a, b, net, params)
    assert got.dtype == np.float32 and got.shape == (shape[0],)
    assert (want > 1e-3).all()  # the comparison is not vacuous
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL[torch.float32])


# --- properties ---------------------------------------------------------------------------

@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_identity_symmetry_and_batching(net, request):
    request.getfixturevalue(net)
    a, b = _pair(np.random.default_rng(3), (3, 33, 37, 3))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    d = lpips_fn(ta, tb, net)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float32 and d.shape == (3,)
    assert (d > 0).all()
    lpips_fn(ta[:1], tb[:1], net).add_(1)  # an ordinary tensor: not an inference-mode one, which refuses in-place updates
    assert lpips_fn(ta, ta, net).abs().max() <= 1e-6
    torch.testing.assert_close(lpips_fn(tb, ta, net), d, rtol=0, atol=1e-6)
    one_by_one = torch.stack([lpips_fn(ta[i], tb[i], net) for i in range(3)])
    torch.testing.assert_close(one_by_one, d, rtol=0, atol=1e-5)
    torch.testing.assert_close(lpips_fn(ta, tb, net, batch_size=2), d, rtol=0, atol=1e-5)


def test_layouts_and_dtypes_agree(alex):
    a, b = _pair(np.random.default_rng(5), (2, 33, 41, 3))
    d = lpips_fn(a, b)
    assert isinstance(d, np.ndarray) and d.dtype == np.float32
    # channels-first input, float in [0, 1], single images
    np.testing.assert_allclose(lpips_fn(a.transpose(0, 3, 1, 2), b.transpose(0, 3, 1, 2)), d, atol=1e-6)
    np.testing.assert_allclose(lpips_fn(a / 255.0, b.astype(np.float32) / 255), d, atol=1e-5)
    empty = lpips_fn(a[:0], b[:0])
    assert empty.shape == (0,) and empty.dtype == np.float32
    single = lpips_fn(a[1], b[1])
    assert single.shape == () and abs(float(single) - d[1]) <= 1e-5
    # [B, 3, H, 3] is read as channels-last (documented rule): here that is a 3x3 image, too small
    with pytest.raises(ValueError, match="31"):
        lpips_fn(np.zeros((1, 3, 40, 3), np.uint8), np.zeros((1, 3, 40, 3), np.uint8))


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_half_precision_agrees_with_float32(net, half, request):
    request.getfixturevalue(net)
    a, b = _pair(np.random.default_rng(11), (2, 40, 44, 3))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    ref = lpips_fn(ta, tb, net)
    try:
        got = lpips_fn(ta, tb, net, dtype=half)
    except RuntimeError as exc:  # some torch builds lack half convolutions on the CPU
        pytest.skip(f"torch {torch.__version__} cannot run {half} convolutions on the CPU: {exc}")
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, ref, rtol=0, atol=ATOL[half])
    # half-precision inputs select the half compute dtype
    via_input = lpips_fn(ta.to(half) / 255, tb.to(half) / 255, net)
    torch.testing.assert_close(via_input, ref, rtol=0, atol=ATOL[half])


def test_one_large_batch(alex):
    a, b = _pair(np.random.default_rng(13), (6, 129, 97, 3))
    d = lpips_fn(a, b, batch_size=4)
    np.testing.assert_allclose(d, lpips_fn(a[::-1], b[::-1], batch_size=6)[::-1], atol=1e-5)


# --- validation and dispatch --------------------------------------------------------------

@pytest.mark.parametrize("a,b,err,match", [
    (np.zeros((1, 32, 32, 3), np.uint8), np.zeros((1, 32, 33, 3), np.uint8), ValueError, "same shape"),
    (np.zeros((1, 32, 32, 2), np.uint8), np.zeros((1, 32, 32, 2), np.uint8), ValueError, "3 channels"),
    (np.zeros((32, 32), np.uint8), np.zeros((32, 32), np.uint8), ValueError, "expected"),
    (np.full((1, 32, 32, 3), 1.5, np.float32), np.zeros((1, 32, 32, 3), np.float32), ValueError, r"\[0, 1\]"),
    (np.full((1, 32, 32, 3), np.nan, np.float32), np.zeros((1, 32, 32, 3), np.float32), ValueError, "NaN"),
    (np.zeros((1, 32, 32, 3), np.int16), np.zeros((1, 32, 32, 3), np.int16), TypeError, "uint8"),
    (np.zeros((1, 30, 32, 3), np.uint8), np.zeros((1, 30, 32, 3), np.uint8), ValueError, ">= 31"),
    ([0.0], [0.0], TypeError, "numpy"),
])
def test_bad_input_raises(a, b, err, match):
    with pytest.raises(err, match=match):
        lpips_fn(a, b)


def test_bad_arguments_raise():
    x = np.zeros((1, 32, 32, 3), np.uint8)
    with pytest.raises(ValueError, match="net"):
        lpips_fn(x, x, net="squeeze")
    with pytest.raises(TypeError, match="dtype"):
        lpips_fn(x, x, dtype=torch.int32)  # float64 is allowed (gradient checks)
    with pytest.raises(ValueError, match="batch_size"):
        lpips_fn(x, x, batch_size=0)


def test_forced_backend_rules(alex, monkeypatch):
    x = np.zeros((1, 32, 32, 3), np.uint8)
    with pytest.raises(BackendError, match="no cpu implementation"):
        lpips_fn(x, x, backend="cpu")
    monkeypatch.setenv("ICL_BACKEND", "cpu")
    with pytest.raises(BackendError, match="cpu"):
        lpips_fn(x, x)
    monkeypatch.setenv("ICL_BACKEND", "reference")
    assert abs(float(lpips_fn(x, x)[0])) <= 1e-6


def test_lpips_each_scores_each_image_alone_and_caches_by_content(alex, monkeypatch):
    import importlib

    lp = importlib.import_module("icl.ops.lpips")
    monkeypatch.setattr(lp, "_features", lp.OrderedDict())
    monkeypatch.setattr(lp, "_feature_bytes", [0])
    rng = np.random.default_rng(7)
    pairs = [_pair(rng, (40 + 3 * (i // 2), 48, 3)) for i in range(6)]  # two pairs of each shape
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    cold = lp.lpips_each(a, b)
    assert len(lp._features) == 12
    # the published metric, one pair per call (its trunk sees the pair as a batch of two)
    np.testing.assert_allclose(cold, [float(lpips_fn(x, y)) for x, y in zip(a, b)], rtol=1e-5, atol=1e-7)
    # from the cache, alone, reordered, with other pairs: bit for bit
    warm = lp.lpips_each(a, b)
    alone = [lp.lpips_each([x], [y])[0] for x, y in zip(a, b)]
    monkeypatch.setattr(lp, "_features", lp.OrderedDict())
    reordered = lp.lpips_each(a[::-1], b[::-1])[::-1]
    np.testing.assert_array_equal(cold, warm)
    np.testing.assert_array_equal(cold, alone)
    np.testing.assert_array_equal(cold, reordered)
    # a content change is a different key; the budget evicts the least recently used
    c = a[0].copy()
    c[0, 0, 0] ^= 1
    assert lp.lpips_each([c], [b[0]])[0] != cold[0]
    monkeypatch.setattr(lp, "_feature_bytes", [sum(u.numel() * 4 for units in lp._features.values() for u in units)])
    monkeypatch.setenv("ICL_LPIPS_CACHE_MB", "0")
    lp.lpips_each([c[::-1].copy()], [b[0]])  # a miss: everything goes, itself included
    assert len(lp._features) == 0 and lp._feature_bytes[0] == 0
    with pytest.raises(TypeError, match=r"a\[0\]: expected a uint8 numpy image"):
        lp.lpips_each([a[0].astype(np.float32)], [b[0]])
    with pytest.raises(ValueError, match=r"a\[0\] and b\[0\] must have the same shape"):
        lp.lpips_each([a[0]], [b[2]])


@pytest.mark.parametrize("shape", [(72, 96, 3), (160, 224, 3), (33, 41, 3)])
def test_lpips_each_trunk_passes_are_companion_free(alex, shape):
    """An image's features in a fixed-size pass do not depend on its position or on the other
    images in the pass (the batch-invariance lpips_each relies on), to the last bit."""
    import importlib

    lp = importlib.import_module("icl.ops.lpips")
    params = lp._params("alex", None, torch.device("cpu"), torch.float32)
    rng = np.random.default_rng(11)
    imgs = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(12)]
    size = lp._trunk_batch(*shape[:2])
    alone = lp._units_of(imgs[:1], "alex", params)[0]
    for others in (imgs[1:size], imgs[size:]):
        at = len(others[:size // 2])
        mixed = lp._units_of([*others[:at], imgs[0], *others[at:]], "alex", params)
        for u, v in zip(alone, mixed[at]):
            assert torch.equal(u, v)
