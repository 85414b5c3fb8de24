"""``python -m icl.data fetch``: VL-ICL from the Hub of our own (tests/models/hub_server.py), a
fabricated release in its published layout (tests/benchmarks/vlicl/conftest.py
``make_published_release``, each task's images zipped as query.zip / support.zip beside its JSON),
online and then offline from the cache; the visual benchmark's releases print instructions only."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from pathlib import Path

import pytest

from tests.benchmarks.vlicl.conftest import make_published_release
from tests.models.hub_server import HubServer

from icl.benchmarks.registry import find_release
from icl.data.__main__ import main
from icl.data.convert.releases import RELEASES as ELSEWHERE
from icl.run.planning.fetch import FetchError, fetch


def _published_files(root: Path) -> dict[str, bytes]:
    """The release as the Hub holds it: {task}/query.json, support.json, and the images of
    {task}/query/ and {task}/support/ zipped (unzip -d {task} puts them back)."""
    files: dict[str, bytes] = {}
    for task in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(task.glob("*.json")):
            files[f"{task.name}/{f.name}"] = f.read_bytes()
        for split in ("query", "support"):
            members = sorted(p for p in (task / split).rglob("*") if p.is_file()) if (task / split).is_dir() else []
            if members:
                buf = io.BytesIO()
                with zipfile.ZipFile(buf, "w") as z:
                    for m in members:
                        z.write(m, m.relative_to(task).as_posix())
                files[f"{task.name}/{split}.zip"] = buf.getvalue()
    files["unzip.sh"] = b"# unzip each task's support.zip and query.zip into it\n"
    return files


def _pin(key: str, commit: str, monkeypatch) -> None:
    """Release ``key``'s pin moved to ``commit``, in the table of the benchmark that declares it."""
    found = find_release(key)
    monkeypatch.setitem(found.benchmark.releases, found.name, dataclasses.replace(found.release, commit=commit))


def _serve(key: str, files: dict[str, bytes], tmp_path: Path, monkeypatch) -> tuple[HubServer, str]:
    """``files`` committed to a Hub of our own as release ``key``'s dataset, the benchmark's pin
    moved to that commit, and the client pointed at the server with a fresh HF_HOME."""
    srv = HubServer().start()
    commit = srv.commit(f"datasets/{find_release(key).release.repo}", files)
    _pin(key, commit, monkeypatch)
    monkeypatch.setenv("HF_ENDPOINT", srv.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    return srv, commit


@pytest.fixture
def vlicl_hub(tmp_path, monkeypatch):
    release = make_published_release(tmp_path / "made")
    srv, commit = _serve("vlicl", _published_files(release), tmp_path, monkeypatch)
    yield srv, commit, release
    srv.stop()


def test_fetch_vlicl_online_then_offline_from_the_cache(vlicl_hub, tmp_path, monkeypatch, capsys):
    srv, commit, release = vlicl_hub
    out = tmp_path / "data" / "vlicl"
    assert main(["fetch", "vlicl", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"ys-zong/VL-ICL@{commit}" in printed and f"--data-root {out}" in printed
    assert (tmp_path / "hf-home" / "hub" / "datasets--ys-zong--VL-ICL" / "snapshots" / commit).is_dir()
    # unpacked as unzip.sh does: the images back where the records name them
    for p in release.rglob("*.png"):
        assert (out / p.relative_to(release)).read_bytes() == p.read_bytes()
    manifest = json.loads((out / "fetch-manifest.json").read_text())
    assert manifest["commit"] == commit and manifest["repo"] == "ys-zong/VL-ICL"
    assert manifest["counts"]["tasks"]["clevr"] == {"query": 3, "support": 10}
    assert manifest["counts"]["tasks"]["clevr_text"] == {"query": 3, "support": 10}  # the text variant too
    assert manifest["counts"]["images"] == len(list(release.rglob("*.png")))
    # offline: from the cache, no request, the same counts
    asked = len(srv.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", "vlicl", "--out", str(out)]) == 0
    assert len(srv.requests) == asked
    assert json.loads((out / "fetch-manifest.json").read_text())["counts"] == manifest["counts"]
    # offline into a new folder: unpacked from the cache alone
    again = tmp_path / "elsewhere"
    assert fetch("vlicl", again, io.StringIO()) == again and len(srv.requests) == asked
    # the benchmark reads it as a local release
    from icl.benchmarks.vlicl.records import load_published

    assert len(load_published(again, "open_mi").queries) == 3


def test_offline_without_the_cache_is_one_line(vlicl_hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", "vlicl", "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err.strip()
    assert "HF_HUB_OFFLINE" in err and "\n" not in err


def test_a_release_missing_an_image_is_refused(vlicl_hub, tmp_path, monkeypatch):
    srv, commit, release = vlicl_hub
    files = _published_files(release)
    files.pop("clevr/query.zip")
    _pin("vlicl", srv.commit("datasets/ys-zong/VL-ICL", files), monkeypatch)
    with pytest.raises(FetchError, match="clevr.*missing after unpacking"):
        fetch("vlicl", tmp_path / "bad", io.StringIO())


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_the_visual_releases_print_where_to_get_them_and_download_nothing(name, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing may be asked
    assert main(["fetch", name]) == 0
    out = capsys.readouterr().out
    e = ELSEWHERE[name]
    assert e.where in out and e.licence in out and f"python -m icl.data convert {name} RAW_DIR OUT_DIR" in out
    assert "samples" in out and "nothing was downloaded" in out


def test_elsewhere_lists_the_converters_and_the_docs_rows():
    from icl.benchmarks.vibe.benchmark import Vibe
    from icl.data.convert import list_converters

    assert sorted(ELSEWHERE) == list_converters() and Vibe.releases is ELSEWHERE  # the visual benchmark's
    docs = (Path(__file__).resolve().parents[2] / "docs" / "datasets.md").read_text(encoding="utf-8")
    for name, e in ELSEWHERE.items():
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{name}` |"))
        assert e.where.split(";")[0] in row and e.licence in row, name


def test_unknown_and_unpublished_names_are_one_line(capsys):
    assert main(["fetch", "nope"]) == 1
    assert "vlicl" in capsys.readouterr().err
    assert main(["fetch", "best50"]) == 1
    assert "not verified" in capsys.readouterr().err


# --- CoBSAT: the datasets/ folder of huggingface.co/datasets/yzeng58/CoBSAT ---------------------
def _cobsat_files(release: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """The release as the Hub dataset holds it at the pinned commit (99928c5, "Upload 517 files":
    ``datasets/{theme}.csv``, ``datasets/{attr_type}_{obj}/{attr}_{obj}.jpg``, beside a README and
    the loading script ``CoBSAT.py``, which fetch must not download)."""
    files = {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()}
    files = {k: v for k, v in files.items() if k not in skip}
    return {**files, "README.md": b"# CoBSAT\n", "CoBSAT.py": b"import datasets  # a loading script: code\n"}


@pytest.fixture
def cobsat_hub(tmp_path, monkeypatch):
    """All five themes fabricated in the published layout (tests/benchmarks/cobsat/test_cobsat_data.py
    ``fabricate``: 16 x 16 JPEGs, captions CSVs) committed to our Hub; the table's pin points at
    that commit."""
    from tests.benchmarks.cobsat.test_cobsat_data import fabricate

    from icl.benchmarks.cobsat.vocab import THEMES

    release = fabricate(tmp_path / "made", themes=tuple(THEMES))
    files = _cobsat_files(release)
    srv, commit = _serve("cobsat", files, tmp_path, monkeypatch)
    yield srv, commit, release, files
    srv.stop()


def test_fetch_cobsat_at_its_pinned_commit_then_offline(cobsat_hub, tmp_path, monkeypatch, capsys):
    srv, commit, release, files = cobsat_hub
    out = tmp_path / "data" / "cobsat"
    assert main(["fetch", "cobsat", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"yzeng58/CoBSAT@{commit}" in printed and "5 themes, 500 images" in printed
    snapshot = tmp_path / "hf-home" / "hub" / "datasets--yzeng58--CoBSAT" / "snapshots" / commit
    assert sorted(p.name for p in snapshot.iterdir()) == ["datasets"]  # no README, no loading script
    for p in release.rglob("*"):
        if p.is_file():
            assert (out / p.relative_to(release)).read_bytes() == p.read_bytes()
    assert not any(p.is_symlink() for p in out.rglob("*"))  # files, not links into the cache
    manifest = json.loads((out / "fetch-manifest.json").read_text())
    assert manifest["commit"] == commit and manifest["repo"] == "yzeng58/CoBSAT"
    assert manifest["counts"]["themes"]["style_object"] == {"images": 100, "captions": 100}
    from icl.benchmarks.cobsat.data import ReleaseImages
    from icl.benchmarks.cobsat.vocab import THEMES

    assert ReleaseImages(out).image(THEMES["color_object"], "red", "car").shape == (16, 16, 3)

    # main moves: the pin does not; --revision does, and says it replaces the pin
    moved = srv.commit("datasets/yzeng58/CoBSAT", {**files, "README.md": b"# CoBSAT, edited\n"})
    assert main(["fetch", "cobsat", "--out", str(out)]) == 0
    assert json.loads((out / "fetch-manifest.json").read_text())["commit"] == commit
    capsys.readouterr()
    assert main(["fetch", "cobsat", "--out", str(out), "--revision", moved]) == 0
    assert f"--revision {moved} replaces the commit icl pins ({commit})" in capsys.readouterr().out
    assert json.loads((out / "fetch-manifest.json").read_text())["commit"] == moved

    # offline: from the cache alone, no request, into a new folder
    asked = len(srv.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch("cobsat", tmp_path / "offline", io.StringIO()) == tmp_path / "offline"
    assert len(srv.requests) == asked
    assert json.loads((tmp_path / "offline" / "fetch-manifest.json").read_text())["counts"] == manifest["counts"]


def test_a_cobsat_release_missing_an_image_is_refused_and_leaves_nothing(cobsat_hub, tmp_path, monkeypatch):
    srv, _, release, _ = cobsat_hub
    bad = srv.commit("datasets/yzeng58/CoBSAT", _cobsat_files(release, skip=("datasets/texture_car/metal_car.jpg",)))
    _pin("cobsat", bad, monkeypatch)
    with pytest.raises(FetchError, match=r"theme texture_object: 1 of its 100 images missing after unpacking "
                                         r"\(first: datasets/texture_car/metal_car.jpg\)"):
        fetch("cobsat", tmp_path / "bad", io.StringIO())
    assert sorted(p.name for p in tmp_path.iterdir() if "bad" in p.name) == []


def test_fetch_never_replaces_a_folder_it_did_not_make(cobsat_hub, tmp_path, capsys):
    """An --out that already holds the user's files (no fetch-manifest.json) is refused before
    any download, and nothing in it is touched."""
    srv, *_ = cobsat_hub
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own")
    assert main(["fetch", "cobsat", "--out", str(mine)]) == 1
    err = capsys.readouterr().err
    assert "was not made by fetch" in err and str(mine) in err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and srv.requests == []


def test_offline_a_release_partly_in_the_cache_names_what_it_lacks(vlicl_hub, tmp_path, monkeypatch, capsys):
    """The Hub client says "this release needs" for a dataset itself (no model's message rewritten)."""
    _, commit, _ = vlicl_hub
    assert main(["fetch", "vlicl", "--out", str(tmp_path / "a")]) == 0
    snap = tmp_path / "hf-home" / "hub" / "datasets--ys-zong--VL-ICL" / "snapshots" / commit
    victim = next(p for p in sorted(snap.rglob("*")) if p.is_symlink() or p.is_file())
    victim.unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    capsys.readouterr()
    assert main(["fetch", "vlicl", "--out", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err.strip()
    assert "lacks files this release needs" in err and victim.name in err and "\n" not in err, err
