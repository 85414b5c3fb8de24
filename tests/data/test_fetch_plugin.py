"""The point of releases declared by benchmarks: a plugin benchmark (tests/data/_release_plugin.py)
declares its own Hub release, alias and checks, and ``python -m icl.data fetch NAME`` (and
``--prefetch``) fetches it from a Hub of our own on 127.0.0.1 (tests/models/hub_server.py) with
nothing in icl/run naming it: registered in-process, and through a real entry point in a
subprocess."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data import _release_plugin as plugin
from tests.models.hub_server import HubServer

from icl.benchmarks import registry
from icl.data.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The plugin's release committed to our Hub, the client pointed at it with a fresh HF_HOME."""
    srv = HubServer().start()
    commit = srv.commit(f"datasets/{plugin.REPO}", plugin.published_files())
    monkeypatch.setenv("HF_ENDPOINT", srv.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    yield srv, commit
    srv.stop()


@pytest.fixture
def registered(monkeypatch):
    """The plugin registered as ``register_benchmark`` does it (undone after the test)."""
    monkeypatch.setattr(registry, "_registered", {})
    monkeypatch.setattr(registry, "_registered_helpers", {})
    registry.register_benchmark("mirror-pack", plugin.MirrorPack)


def test_the_plugin_pins_the_commit_the_hub_gives_its_files(hub):
    _, commit = hub
    assert commit == plugin.COMMIT, "tests/models/hub_server.py names commits differently now: update COMMIT"


def test_a_registered_plugin_release_is_fetched_by_its_alias_and_checked_by_the_plugin(hub, registered, tmp_path,
                                                                                      monkeypatch, capsys):
    srv, commit = hub
    out = tmp_path / "data" / "pack"
    assert main(["fetch", "MirrorPack", "--out", str(out)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"mirror-pack: {plugin.REPO}@{commit} (CC0-1.0), 3 pack images",
                       f"ready at {out}: python -m icl.run mirror-pack --data-root {out} ..."]
    # its folder copied, its archive extracted into it; the README outside it left out
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "fetch-manifest.json", "pack/images/a.png", "pack/images/b.png", "pack/images/c.png", "pack/index.json"]
    assert (out / "pack" / "images" / "b.png").read_bytes() == b"not really a png: b.png"
    manifest = json.loads((out / "fetch-manifest.json").read_text())
    assert manifest["name"] == "mirror-pack" and manifest["commit"] == commit and manifest["counts"] == {"images": 3}
    # again, offline: the plugin's check runs on the folder and its counts are compared
    asked = len(srv.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", "mirror-pack", "--out", str(out)]) == 0
    assert len(srv.requests) == asked
    # a count the plugin's check no longer finds: the folder is not silently accepted
    (out / "pack" / "index.json").write_text(json.dumps(list(plugin.IMAGES[:2])))
    capsys.readouterr()
    assert main(["fetch", "mirror-pack", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "the counts found (2 pack images) differ from those recorded when it was fetched " \
                               "(3 pack images)" in err


def test_the_plugins_check_refuses_its_release_missing_a_file_and_nothing_is_left(hub, registered, tmp_path,
                                                                                 monkeypatch, capsys):
    srv, _ = hub
    bad = srv.commit(f"datasets/{plugin.REPO}", plugin.published_files(skip=("images/b.png",)))
    rel = plugin.MirrorPack.releases["mirror-pack"]
    monkeypatch.setitem(plugin.MirrorPack.releases, "mirror-pack", dataclasses.replace(rel, commit=bad))
    out = tmp_path / "data" / "pack"
    assert main(["fetch", "mirror-pack", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"fetch: mirror-pack release at {out}: pack/images/b.png is missing after unpacking"
    assert list((tmp_path / "data").iterdir()) == []


def test_an_unknown_name_lists_the_plugins_release_with_the_built_in_ones(registered, capsys):
    assert main(["fetch", "nope"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("fetch: nope: not a published release icl knows; fetch takes ")
    listed = err.split("fetch takes ")[1].split(", ")
    assert {"mirror-pack", "vlicl", "cobsat", "duke", "best50"} <= set(listed)


def test_prefetch_fetches_the_plugin_benchmarks_release_into_its_missing_data_root(hub, registered, tmp_path, capsys):
    from icl.run.__main__ import main as run

    data = tmp_path / "data" / "pack"
    args = ["mirror-pack", "--models", "copy-last", "--data-root", str(data), "--out", str(tmp_path / "run"),
            "--no-plots", "--no-progress"]
    assert run(args + ["--prefetch"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"data: --data-root {data} is missing: python -m icl.data fetch mirror-pack --out {data}" in printed
    assert f"{plugin.REPO}@{plugin.COMMIT}" in printed and (data / "pack" / "images" / "c.png").is_file()
    assert printed.strip().splitlines()[-1].startswith("HF_HUB_OFFLINE=1 python -m icl.run mirror-pack ")


def test_an_entry_point_plugin_release_is_fetched_by_the_command_line(hub, tmp_path):
    srv, commit = hub
    site = tmp_path / "site"
    dist = site / "mirror_pack-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mirror-pack\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[icl.benchmarks]\nmirror-pack = tests.data._release_plugin:MirrorPack\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    out = tmp_path / "pack"
    proc = subprocess.run([sys.executable, "-m", "icl.data", "fetch", "mirror-pack", "--out", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[0] == f"mirror-pack: {plugin.REPO}@{commit} (CC0-1.0), 3 pack images"
    assert json.loads((out / "fetch-manifest.json").read_text())["counts"] == {"images": 3}
