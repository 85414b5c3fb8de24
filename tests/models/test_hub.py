"""``weights=hf:ORG/NAME[@REVISION][/SUBPATH]`` (icl.models.hub): the real huggingface_hub client
against a Hub of our own on 127.0.0.1 (hub_server.py), serving tiny LLaVA checkpoints saved with
the official transformers classes. ``main`` moves from commit A to commit B in the tests that say so.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models.hub_server import REPO, TOKEN, hf_env, hub_llava, server  # noqa: F401 (fixtures)

from icl.models import hub
from icl.models.hub import HubError, parse_ref
from icl.models.weights import WeightsError, resolve_weights
from icl.run.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def _vlicl(out: Path, data: Path, weights: str) -> list[str]:
    return ["vlicl", "--fast", "--models", "hf-vlm", "--model-arg", f"weights={weights}", "--tasks", "clevr",
            "--seeds", "0", "--shots", "0,1", "--queries", "2", "--out", str(out), "--data-root", str(data),
            "--no-plots", "--no-progress"]


# --- the grammar -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, repo, revision, subpath", [
    ("hf:org/name", "org/name", None, ""),
    ("hf:Org-1/na_me.v2@main", "Org-1/na_me.v2", "main", ""),
    ("hf:org/name@v1.0/llm", "org/name", "v1.0", "llm"),
    ("hf:org/name@" + "a" * 40 + "/unet/config.json", "org/name", "a" * 40, "unet/config.json"),
    ("hf:org/name/vqgan", "org/name", None, "vqgan"),
    ("hf:org/name@refs%2Fpr%2F1", "org/name", "refs/pr/1", ""),
])
def test_parse_ref_grammar(text, repo, revision, subpath):
    ref = parse_ref(text)
    assert (ref.repo_id, ref.revision, ref.subpath) == (repo, revision, subpath)
    assert ref.pinned == (revision == "a" * 40)


@pytest.mark.parametrize("text, names", [
    ("org/name", "not a Hub reference"),
    ("hf:name", "expected hf:ORG/NAME"),
    ("hf:-org/name", "expected hf:ORG/NAME"),
    ("hf:org/na me", "expected hf:ORG/NAME"),
    ("hf:org/a--b", "'--'"),
    ("hf:org/name@", "empty revision"),
    ("hf:org/name@ma:in", "revision 'ma:in'"),
    ("hf:org/name/../x", "'..'"),
    ("hf:org/name//x", "empty"),
])
def test_parse_ref_refuses_with_one_line_naming_the_part(text, names):
    with pytest.raises(HubError) as err:
        parse_ref(text)
    assert names in str(err.value) and "\n" not in str(err.value) and text in str(err.value)


# --- resolution --------------------------------------------------------------------------------

def test_download_into_the_user_cache_only_the_needed_files(hf_env, server):
    folder = resolve_weights("hf-vlm", f"hf:{REPO}", "config.json").parent
    snap = hub.snapshot_of(folder)
    assert snap.commit == server.a and folder == hf_env / "models--org--tiny" / "snapshots" / server.a
    assert "model.safetensors" in snap.files and "config.json" in snap.files and "chat_template.jinja" in snap.files
    assert "pytorch_model.bin" not in snap.files and not (folder / "pytorch_model.bin").exists()  # no pickles
    assert not (folder / "README.md").exists()
    assert (hf_env / "models--org--tiny" / "refs" / "main").read_text() == server.a


def test_a_family_that_names_a_pickle_gets_it(hf_env, server):
    path = resolve_weights("painter", f"hf:{REPO}", "pytorch_model.bin")
    assert path.name == "pytorch_model.bin" and path.read_bytes() == b"pickled"


def test_subpath_and_tag(hf_env, server, hub_llava):
    sub = server.commit(REPO, {f"llm/{p.name}": p.read_bytes() for p in hub_llava[1].iterdir()} | {"x.json": b"{}"})
    folder = resolve_weights("lvm", f"hf:{REPO}@{sub}/llm", "config.json").parent
    assert folder.name == "llm" and hub.snapshot_of(folder).files == tuple(
        sorted(f"llm/{p.name}" for p in hub_llava[1].iterdir()))
    tagged = resolve_weights("hf-vlm", f"hf:{REPO}@v1", "config.json").parent
    assert tagged.name == server.a  # the tag still names commit A
    file = resolve_weights("painter", f"hf:{REPO}@v1/pytorch_model.bin", "painter_vit_large.pth")
    assert file.name == "pytorch_model.bin" and hub.snapshot_of(file).files == ("pytorch_model.bin",)


def test_pinned_revision_survives_a_moved_branch(hf_env, server, hub_llava):
    server.commit_folder(REPO, hub_llava[1])  # main: A -> B
    folder = resolve_weights("hf-vlm", f"hf:{REPO}@{server.a}", "config.json").parent
    assert folder.name == server.a
    assert (folder / "model.safetensors").read_bytes() == (hub_llava[0] / "model.safetensors").read_bytes()


def test_branch_moved_changes_the_identity(hf_env, server, hub_llava):
    from icl.run.planning.config import ModelSpec
    from icl.run.planning.models import make_model

    def model(weights):
        hub.forget()  # as a new run does
        return make_model(ModelSpec("hf-vlm", {"weights": weights}), "cpu")

    first = model(f"hf:{REPO}")
    assert first.identity["weights"] == {
        f"hf:{REPO}@{server.a}": dict(repo=REPO, commit=server.a, subpath="", files=list(
            hub.snapshot_of(hf_env / "models--org--tiny" / "snapshots" / server.a).files))}
    assert first.identity["args"]["weights"] == f"hf:{REPO}@{server.a}"  # never the branch name alone
    assert model(f"hf:{REPO}@{server.a}").model_id == first.model_id  # the same commit: the same model
    b = server.commit_folder(REPO, hub_llava[1])
    moved = model(f"hf:{REPO}")
    assert moved.model_id != first.model_id and list(moved.identity["weights"]) == [f"hf:{REPO}@{b}"]


def test_a_snapshot_is_not_rehashed(hf_env, server, monkeypatch):
    from icl.models import weights

    resolve_weights("hf-vlm", f"hf:{REPO}", "config.json")
    monkeypatch.setattr(weights, "tree_digest", lambda p: pytest.fail(f"hashed {p}"))
    key, value = weights.weight_identity(hf_env / "models--org--tiny" / "snapshots" / server.a)
    assert key == f"hf:{REPO}@{server.a}" and value["commit"] == server.a


def test_offline_resolves_from_the_cache_without_a_request(hf_env, server, monkeypatch):
    online = hub.resolve(f"hf:{REPO}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.forget()
    asked = len(server.requests)
    offline = hub.resolve(f"hf:{REPO}")
    assert (offline.commit, offline.files, offline.root) == (online.commit, online.files, online.root)
    assert len(server.requests) == asked


def test_offline_reference_not_cached_fails_before_any_model_runs(hf_env, server, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    code = main(_vlicl(out, tmp_path / "data", f"hf:{REPO}@main"))
    err = capsys.readouterr().err
    assert code != 0 and f"hf:{REPO}@main" in err and "not in the Hugging Face cache" in err and "prefetch" in err
    assert not (out / "predictions.jsonl").exists() and server.requests == []


def test_a_repository_with_its_own_code_is_refused_before_its_weights(hf_env, server):
    config = json.dumps({"model_type": "custom", "auto_map": {"AutoModel": "modeling_custom.CustomModel"}})
    server.commit("org/custom", {"config.json": config.encode(), "model.safetensors": b"w" * 64,
                                 "modeling_custom.py": b"import os"})
    with pytest.raises(HubError, match=r"auto_map \(AutoModel\).*trust_remote_code=False"):
        resolve_weights("hf-vlm", "hf:org/custom", "config.json")
    assert not list(hf_env.glob("models--org--custom/snapshots/*/model.safetensors"))


def test_a_pipeline_naming_its_own_module_is_refused_before_its_weights(hf_env, server):
    """A diffusers ``model_index.json`` whose component names a module of the repository
    (``["my_unet", "MyUNet"]``, loaded from ``my_unet.py``) or whose ``_class_name`` is
    ``[module, class]`` needs the repository's code: refused before any weight downloads; a
    null (absent optional) component and the libraries' own classes are fine."""
    from icl.models.hub import DIFFUSERS_PATTERNS

    index = {"_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.34.0",
             "unet": ["my_unet", "MyUNet"], "vae": ["diffusers", "AutoencoderKL"],
             "safety_checker": [None, None]}
    files = {"model_index.json": json.dumps(index).encode(), "unet/config.json": b"{}",
             "unet/diffusion_pytorch_model.safetensors": b"w" * 64, "my_unet.py": b"import os"}
    server.commit("org/custom-pipe", files)
    with pytest.raises(HubError, match=r"model_index.json names unet \['my_unet', 'MyUNet'\]: .*own code"):
        resolve_weights("diffusers-t2i", "hf:org/custom-pipe", "model_index.json", DIFFUSERS_PATTERNS)
    assert not list(hf_env.glob("models--org--custom-pipe/snapshots/*/unet/*.safetensors"))
    server.commit("org/custom-class", {**files, "model_index.json": json.dumps(
        {**index, "unet": ["diffusers", "UNet2DConditionModel"], "_class_name": ["pipe", "MyPipeline"]}).encode()})
    with pytest.raises(HubError, match=r"_class_name \['pipe', 'MyPipeline'\]"):
        resolve_weights("diffusers-t2i", "hf:org/custom-class", "model_index.json", DIFFUSERS_PATTERNS)
    server.commit("org/plain-pipe", {**files, "model_index.json": json.dumps(
        {**index, "unet": ["diffusers", "UNet2DConditionModel"]}).encode()})
    found = resolve_weights("diffusers-t2i", "hf:org/plain-pipe", "model_index.json", DIFFUSERS_PATTERNS)
    assert (found.parent if found.is_file() else found).joinpath("unet", "diffusion_pytorch_model.safetensors").is_file()


def test_unknown_repository_revision_and_private_without_token(hf_env, server):
    with pytest.raises(HubError, match="repository org/nope not found"):
        hub.resolve("hf:org/nope")
    with pytest.raises(HubError, match="has no revision 'nobranch'"):
        hub.resolve(f"hf:{REPO}@nobranch")
    with pytest.raises(HubError, match="private\\? set HF_TOKEN"):
        hub.resolve("hf:org/private")
    from icl.models.vicl._diffusion_sd import resolve_sd_folder

    with pytest.raises(WeightsError, match=r"hf:org/tiny \(commit \w{40}\): no file matches model_index.json, "
                                           r"\*/\*.json, .*\*/\*.jinja$"):
        resolve_sd_folder("sd-vicl", f"hf:{REPO}")  # a transformers repository named for a diffusers family


def _hand_made_cache(cache: Path, folder: Path, repo: str, commit: str) -> Path:
    """The Hugging Face cache layout written by hand: blobs named by their ETag, the snapshot's
    files links to them, refs/main naming the commit."""
    import hashlib

    base = cache / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / commit
    for f in sorted(folder.iterdir()):
        data = f.read_bytes()
        blob = base / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        snap.mkdir(parents=True, exist_ok=True)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(commit)
    return snap


def test_a_prepopulated_cache_is_read_offline(tmp_path, monkeypatch, hub_llava):
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = _hand_made_cache(tmp_path / "hub-cache", hub_llava[0], "lab/handmade", commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: any request would fail
    hub.forget()
    try:
        from icl.models.vlm.hf import HFVisionLanguage

        model = HFVisionLanguage(weights="hf:lab/handmade")
        assert model.folder == snap
        model.load("cpu")  # transformers reads the hand-made snapshot
        assert hub.snapshot_of(model.folder).commit == commit
    finally:
        hub.forget()


def test_the_token_is_sent_and_never_written(hf_env, server, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    out = tmp_path / "run"
    assert main(_vlicl(out, tmp_path / "data", "hf:org/private")) == 0, capsys.readouterr().err
    assert any(r.authorized for r in server.requests)
    printed = capsys.readouterr()
    assert TOKEN not in printed.out + printed.err
    leaks = [p for p in out.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaks == []
    ident, stored = _model(out)
    assert stored == ident and list(ident["weights"]) == [f"hf:org/private@{server.repos['org/private'].refs['main']}"]


# --- acceptance: the command line, online then offline -----------------------------------------

def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icl.run", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def _model(out: Path) -> tuple[dict, dict]:
    """The hf-vlm model's identity as results.json records it, and as its store does."""
    meta = json.loads((out / "results.json").read_text())
    (model,) = [m for m in meta["models"].values() if m["identity"]["adapter"] == "hf-vlm"]
    with sqlite3.connect(out / "store.sqlite") as c:
        (row,) = c.execute("SELECT identity FROM models WHERE model_id = ?", (model["model_id"],)).fetchall()
    return model["identity"], json.loads(row[0])


@pytest.mark.slow
def test_vlicl_runs_from_the_hub_then_offline_from_the_cache(hf_env, server, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    online, offline = tmp_path / "online", tmp_path / "offline"
    done = _cli(_vlicl(online, tmp_path / "data", f"hf:{REPO}"), env)
    assert done.returncode == 0, done.stderr
    key = f"hf:{REPO}@{server.a}"
    ident, stored = _model(online)
    assert ident["weights"][key]["commit"] == server.a and "model.safetensors" in ident["weights"][key]["files"]
    assert stored == ident and ident["args"]["weights"] == key
    asked = len(server.requests)
    done = _cli(_vlicl(offline, tmp_path / "data", f"hf:{REPO}"), {**env, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == asked  # nothing asked of the Hub
    assert _model(offline) == (ident, ident)  # offline from the cache: the same model
    preds = [json.loads(line) for line in (offline / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 4 and all(not p.get("failed") for p in preds)
    shutil.rmtree(hf_env)  # the cache gone: offline now fails before running, naming the reference
    done = _cli(_vlicl(tmp_path / "gone", tmp_path / "data", f"hf:{REPO}"), {**env, "HF_HUB_OFFLINE": "1"})
    assert done.returncode != 0 and f"hf:{REPO}: not in the Hugging Face cache" in done.stderr


# --- safety: disk space, interrupted and corrupt downloads -------------------------------------

def test_a_download_larger_than_the_free_space_is_refused_before_it_starts(hf_env, server, monkeypatch):
    monkeypatch.setattr(hub, "free_space", lambda path: 1000)
    with pytest.raises(HubError) as err:
        hub.resolve(f"hf:{REPO}")
    msg = str(err.value)
    assert "\n" not in msg and "files to download need" in msg and "0.0 MiB free" in msg and str(hf_env) in msg
    assert not list(hf_env.glob("models--org--tiny/snapshots/*/model.safetensors"))
    monkeypatch.setattr(hub, "free_space", lambda path: 10 * 2**30)
    snap = hub.resolve(f"hf:{REPO}")
    hub.forget()
    monkeypatch.setattr(hub, "free_space", lambda path: 0)  # everything cached: nothing to download, no refusal
    assert hub.resolve(f"hf:{REPO}").files == snap.files


def test_an_interrupted_download_resumes_with_a_range_request(hf_env, server, hub_llava, monkeypatch):
    from huggingface_hub import constants

    # the client writes what it receives in chunks of DOWNLOAD_CHUNK_SIZE (10 MB): smaller chunks,
    # so the half of the tiny file received before the drop is written and resumed from
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 4096)
    server.drop.add("model.safetensors")  # the first GET sends half the file and closes the connection
    snap = hub.resolve(f"hf:{REPO}")
    data = (hub_llava[0] / "model.safetensors").read_bytes()
    assert (snap.root / "model.safetensors").read_bytes() == data
    gets = [r for r in server.requests if r.method == "GET" and r.path.endswith("/model.safetensors")]
    assert len(gets) == 2 and gets[0].range == "" and gets[1].range.startswith("bytes=")
    start = int(gets[1].range[len("bytes="):].rstrip("-"))
    assert 0 < start <= len(data) // 2  # from where the first attempt stopped, not from 0


def test_a_corrupt_lfs_file_is_refused_and_removed(hf_env, server, hub_llava):
    data = (hub_llava[0] / "model.safetensors").read_bytes()
    server.corrupt["model.safetensors"] = bytes(b ^ 0xFF for b in data)  # same size, other SHA-256
    with pytest.raises(HubError) as err:
        hub.resolve(f"hf:{REPO}")
    msg = str(err.value)
    assert "\n" not in msg and "model.safetensors is corrupt: its SHA-256" in msg and "run again" in msg
    assert not list(hf_env.glob("models--org--tiny/snapshots/*/model.safetensors"))
    assert not list(hf_env.glob("models--org--tiny/blobs/*")) or all(
        p.read_bytes() != server.corrupt["model.safetensors"] for p in hf_env.glob("models--org--tiny/blobs/*"))
    server.corrupt.clear()  # served right again: the next run downloads it anew
    hub.forget()
    assert (hub.resolve(f"hf:{REPO}").root / "model.safetensors").read_bytes() == data


# --- Ray workers: the adapter carries the pinned commit ----------------------------------------

def test_a_pickled_adapter_loads_the_recorded_commit_after_the_branch_moved(hf_env, server, hub_llava):
    import pickle

    from icl.run.planning.config import ModelSpec
    from icl.run.planning.models import make_model

    model = make_model(ModelSpec("hf-vlm", {"weights": f"hf:{REPO}"}), "cpu")
    assert model.adapter.weights == f"hf:{REPO}@{server.a}"  # the adapter holds the pinned reference
    shipped = pickle.dumps(model.adapter)
    b = server.commit_folder(REPO, hub_llava[1])  # main moves on while the run goes
    hub.forget()  # a Ray worker: another process, nothing resolved yet
    worker = pickle.loads(shipped)
    assert worker.folder.name == server.a != b
    assert (worker.folder / "model.safetensors").read_bytes() == (hub_llava[0] / "model.safetensors").read_bytes()
    assert hub.snapshot_of(worker.folder).commit == server.a


def test_the_pinned_reference_asks_the_hub_nothing_more_in_the_same_process(hf_env, server):
    from icl.run.planning.config import ModelSpec
    from icl.run.planning.models import make_model

    model = make_model(ModelSpec("hf-vlm", {"weights": f"hf:{REPO}"}), "cpu")
    asked = len(server.requests)
    assert model.adapter.folder.name == server.a and len(server.requests) == asked
