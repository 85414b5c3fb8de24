"""``--prefetch`` then the printed offline command, end to end, for the request types beyond chat
(tests/models/test_hub.py and tests/run/planning/test_prefetch.py cover vlicl with hf-vlm): an analogy
benchmark (vibe) with SegGPT and a generation benchmark (vlicl's text-to-image tasks) with
diffusers-t2i, each a tiny checkpoint saved with the official classes and served by the test Hub
(tests/models/hub_server.py). The prefetch downloads into the user's cache and prints the offline
command; that command, run with HF_HUB_OFFLINE=1, asks the Hub nothing and records the commit."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.models.hub_server import HubServer, hf_env  # noqa: F401 (fixture)

from icl.models import hub
from icl.run.__main__ import main

pytestmark = pytest.mark.slow  # the tiny repositories take ~10 s to build

# tests/models/vicl/test_vicl_seggpt.py's tiny SegGPT
SEGGPT = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, image_size=[64, 32], patch_size=8,
              pretrain_image_size=16, decoder_hidden_size=8, merge_index=0, intermediate_hidden_state_indices=[1, 2, 3],
              drop_path_rate=0.0, mlp_dim=64)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A SegGptForImageSegmentation folder and a Stable Diffusion pipeline folder (save_pretrained)."""
    import torch
    from transformers import SegGptConfig, SegGptForImageSegmentation

    from tests.models.t2i.tiny_t2i import build_sd

    base = tmp_path_factory.mktemp("hub-repos")
    torch.manual_seed(0)
    SegGptForImageSegmentation(SegGptConfig(**SEGGPT)).save_pretrained(str(base / "seggpt"))
    return base / "seggpt", build_sd(base / "sd")


@pytest.fixture
def server(folders):
    """The test Hub with org/tiny-seggpt (a transformers repository) and org/tiny-sd (a diffusers one)."""
    srv = HubServer().start()
    srv.seggpt = srv.commit_folder("org/tiny-seggpt", folders[0], extra={"README.md": b"# tiny"})
    srv.sd = srv.commit_folder("org/tiny-sd", folders[1], extra={"sd.safetensors": b"single-file checkpoint"})
    yield srv
    srv.stop()


def _prefetch_then_offline(args, hf_env, server, monkeypatch, capsys) -> dict:
    """``args --prefetch`` online, then the printed command with HF_HUB_OFFLINE=1: its results.json."""
    assert main(args + ["--prefetch"]) == 0, capsys.readouterr().err[-3000:]
    printed = capsys.readouterr().out
    line = printed.strip().splitlines()[-1]
    assert line.startswith("HF_HUB_OFFLINE=1 python -m icl.run ") and "--prefetch" not in line
    command = shlex.split(line)
    assert command[:4] == ["HF_HUB_OFFLINE=1", "python", "-m", "icl.run"] and command[4:] == args
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.forget()
    asked = len(server.requests)
    assert main(command[4:]) == 0, capsys.readouterr().err[-3000:]
    assert len(server.requests) == asked  # the offline run asked the Hub nothing
    return json.loads((Path(args[args.index("--out") + 1]) / "results.json").read_text()), printed


def test_vibe_with_seggpt_prefetched_then_offline(hf_env, server, builtin_root, tmp_path, monkeypatch, capsys):
    out = tmp_path / "vibe"
    args = ["vibe", "--fast", "--tasks", "flip", "--datasets", "scenes-a", "--limit", "2", "--models",
            "seggpt:weights=hf:org/tiny-seggpt", "--out", str(out), "--data-root", str(builtin_root),
            "--device", "cpu", "--no-plots", "--no-progress"]
    meta, printed = _prefetch_then_offline(args, hf_env, server, monkeypatch, capsys)
    key = f"hf:org/tiny-seggpt@{server.seggpt}"
    assert f"seggpt[weights=hf:org/tiny-seggpt]: {key}  2 files" in printed
    assert (hf_env / "models--org--tiny-seggpt" / "snapshots" / server.seggpt / "model.safetensors").is_file()
    (ident,) = [m["identity"] for m in meta["models"].values() if m["identity"]["adapter"] == "seggpt"]
    assert ident["args"]["weights"] == key and ident["weights"][key]["commit"] == server.seggpt
    assert meta["counts"]["failed"] == 0 and meta["counts"]["computed"] > 0


def test_vlicl_text_to_image_with_diffusers_prefetched_then_offline(hf_env, server, tmp_path, monkeypatch, capsys):
    out = tmp_path / "t2i"
    args = ["vlicl", "--fast", "--models", "diffusers-t2i:weights=hf:org/tiny-sd,steps=2,batch_size=4", "--tasks",
            "open_t2i_mi", "--variant", "text", "--seeds", "0", "--shots", "0", "--queries", "2", "--out", str(out),
            "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress"]
    meta, printed = _prefetch_then_offline(args, hf_env, server, monkeypatch, capsys)
    key = f"hf:org/tiny-sd@{server.sd}"
    assert f": {key}  " in printed
    snap = hf_env / "models--org--tiny-sd" / "snapshots" / server.sd
    assert (snap / "model_index.json").is_file() and (snap / "unet" / "config.json").is_file()
    assert not (snap / "sd.safetensors").exists()  # a diffusers repository: its components' folders only
    (ident,) = [m["identity"] for m in meta["models"].values() if m["identity"]["adapter"] == "diffusers-t2i"]
    assert ident["args"]["weights"] == key and ident["weights"][key]["commit"] == server.sd
    assert meta["counts"]["failed"] == 0 and meta["counts"]["computed"] == 2
