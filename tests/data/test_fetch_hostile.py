"""``python -m icl.data fetch`` against a hostile Hub and hostile archives (tests/models/hub_server.py's
hostile modes, tests/data/test_fetch.py's fabricated releases): a commit id that is a path, a
--revision with '..' parts, a zip bomb, a full disk while unpacking (a real tmpfs), and a user's
folder named like fetch's work folder. Each is one line; nothing outside the cache or the
folders fetch made is written or removed."""

from __future__ import annotations

import io
import subprocess
import zipfile

import pytest

from tests.data.test_fetch import _pin, _published_files, _serve, cobsat_hub, vlicl_hub  # noqa: F401 (fixtures)

from icl._parse import EnvError
from icl.data.__main__ import main
from icl.run.planning.fetch import WORK_MARKER, FetchError, fetch


def _outside(folder, skip):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and skip not in p.parents}


def test_a_commit_id_that_is_a_path_writes_nothing_outside_the_cache(cobsat_hub, tmp_path, capsys):
    srv, *_ = cobsat_hub
    (tmp_path / "X.json").write_text('{"mine": true}')
    srv.commit_id = "../../../../X"
    before = _outside(tmp_path, tmp_path / "hf-home")
    # a branch (not the pinned commit) makes fetch ask the Hub which commit it names
    assert main(["fetch", "cobsat", "--out", str(tmp_path / "out"), "--revision", "main"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "the Hub answered commit '../../../../X'" in err and "not 40 hex digits" in err
    assert _outside(tmp_path, tmp_path / "hf-home") == before and not (tmp_path / "out").exists()
    assert not list((tmp_path / "hf-home").rglob("*.json"))


@pytest.mark.parametrize("revision", ["../../X", "a//b", "./main", "x\x01y", ".."])
def test_fetch_refuses_a_revision_with_dot_empty_or_control_parts(cobsat_hub, tmp_path, capsys, revision):
    srv, *_ = cobsat_hub
    assert main(["fetch", "cobsat", "--out", str(tmp_path / "out"), "--revision", revision]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("fetch: --revision ") and "\n" not in err and srv.requests == []


def _bomb_release(vlicl_hub, tmp_path, monkeypatch, member_size):
    """The fabricated release with one more member in clevr/query.zip: ``member_size`` zero bytes."""
    srv, _, release = vlicl_hub
    files = _published_files(release)
    buf = io.BytesIO(files["clevr/query.zip"])
    with zipfile.ZipFile(buf, "a", zipfile.ZIP_DEFLATED) as z:
        z.writestr("query/zeros.bin", b"\0" * member_size)
    files["clevr/query.zip"] = buf.getvalue()
    _pin("vlicl", srv.commit("datasets/ys-zong/VL-ICL", files), monkeypatch)


def test_a_zip_bomb_is_refused_with_one_line_and_leaves_nothing(vlicl_hub, tmp_path, monkeypatch, capsys):
    _bomb_release(vlicl_hub, tmp_path, monkeypatch, 64 * 2**20)  # 64 MiB of zeros: ~64 KiB compressed
    out = tmp_path / "data" / "vlicl"
    assert main(["fetch", "vlicl", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "member 'query/zeros.bin' unpacks to 67108864 bytes" in err
    assert "ICL_FETCH_MAX_RATIO" in err
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == []


def test_the_total_an_archive_may_unpack_to_is_bounded(vlicl_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_FETCH_MAX_UNPACK", "1000")
    with pytest.raises(FetchError, match=r"ys-zong/VL-ICL@\w{40}: its archives unpack to \d+ bytes \(the largest, "
                                         r"\w+/\w+.zip, \d+\), more than ICL_FETCH_MAX_UNPACK=1000; refused$"):
        fetch("vlicl", tmp_path / "out", io.StringIO())
    monkeypatch.setenv("ICL_FETCH_MAX_UNPACK", "lots")
    with pytest.raises(EnvError, match=r"^ICL_FETCH_MAX_UNPACK='lots': expected a positive integer \(bytes\)$"):
        fetch("vlicl", tmp_path / "out", io.StringIO())


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    # bounded: a 64 KB tmpfs, unmounted by the test (as tests/reliability/test_reliability_disk.py)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and mount rights)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("when", ["before", "while unpacking"])
def test_a_full_disk_is_one_line_and_keeps_nothing(vlicl_hub, small_disk, tmp_path, monkeypatch, capsys, when):
    from icl.models import hub

    if when == "while unpacking":  # the free-space check fooled: the disk fills for real mid-way
        monkeypatch.setattr(hub, "free_space", lambda path: 10**12)
    out = small_disk / "vlicl"
    assert main(["fetch", "vlicl", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and str(small_disk) in err
    assert ("the disk is full while unpacking" if when == "while unpacking" else "MiB free") in err
    assert list(small_disk.iterdir()) == []  # the work folder removed, nothing half-made left


def test_a_users_folder_named_like_the_work_folder_is_never_removed(vlicl_hub, tmp_path, capsys):
    out = tmp_path / "vlicl"
    mine = tmp_path / ".vlicl.fetching"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert main(["fetch", "vlicl", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{mine}: exists and was not made by fetch" in err
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"] and not out.exists()
    # one an interrupted fetch left (marked) is fetch's own: replaced, then removed
    mine.rename(tmp_path / "kept")
    left = tmp_path / ".vlicl.fetching"
    left.mkdir()
    (left / WORK_MARKER).write_text("")
    (left / "half.png").write_bytes(b"half")
    assert main(["fetch", "vlicl", "--out", str(out)]) == 0
    assert not left.exists() and (out / "fetch-manifest.json").is_file() and not (out / WORK_MARKER).exists()
    assert (tmp_path / "kept" / "thesis.tex").read_text() == "years of work"


@pytest.mark.slow
def test_sigterm_stops_a_fetch_download_with_one_line(cobsat_hub, tmp_path):
    """A real ``python -m icl.data fetch`` on a trickling file, stopped by SIGTERM: 130, one line."""
    import os
    import signal
    import sys
    import time
    from pathlib import Path

    srv, commit, _, files = cobsat_hub  # the table's pin is patched in this process only: --revision
    slow = sorted(f for f in files if f.startswith("datasets/") and f.endswith(".jpg"))[0]
    srv.trickle[slow] = 1.0
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "icl.data", "fetch", "cobsat", "--out", str(tmp_path / "out"),
                             "--revision", commit],
                            cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(r.method == "GET" and r.path.endswith(slow) for r in srv.requests):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert time.monotonic() - t0 < 5
        assert proc.returncode == 130 and err.strip().splitlines() == [
            "fetch cobsat: interrupted; what was downloaded is kept in the Hugging Face cache, run the same command "
            "to resume"], err
        assert not (tmp_path / "out").exists() and not (tmp_path / ".out.fetching").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
