"""A hostile or broken Hub (tests/models/hub_server.py's hostile modes) against the real
``huggingface_hub`` client pieces icl uses (icl.models.hub): a commit id that is a path, a listing
naming files outside the repository or a terabyte file, a connection that always drops, a
trickling body, a body corrupted in transit, a file damaged in the cache. Each ends in one line
naming the reference and the file, nothing outside the cache is written, nothing bad is cached."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.models.hub_server import REPO, HubServer, hf_env, hub_llava, server  # noqa: F401 (fixtures)

from icl.models import hub
from icl._parse import EnvError
from icl.models.hub import HubError, parse_ref

ROOT = Path(__file__).resolve().parents[2]


def _files(folder: Path, skip: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and skip not in p.parents}


# --- 1. the commit id and the revision -----------------------------------------------------------

@pytest.mark.parametrize("answer", ["../../../../X", "ABSOLUTE", "a" * 40 + "\n", "A" * 40])
def test_a_commit_id_that_is_not_40_hex_is_refused_and_writes_nothing_outside_the_cache(hf_env, server, tmp_path,
                                                                                         answer):
    sentinel = tmp_path / "X.json"
    sentinel.write_text('{"mine": true}')
    server.commit_id = str(tmp_path / "X") if answer == "ABSOLUTE" else answer
    before = _files(tmp_path, hf_env)
    with pytest.raises(HubError) as err:
        hub.resolve(f"hf:{REPO}")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"hf:{REPO}: the Hub answered commit") and "not 40 hex digits" in msg
    assert _files(tmp_path, hf_env) == before  # the sentinel untouched, no new file outside the cache
    assert not list(hf_env.rglob("snapshots/*"))  # and nothing downloaded inside it either
    assert not any("/resolve/" in r.path for r in server.requests)


@pytest.mark.parametrize("revision", ["..%2F..%2FX", ".", "..", "a%2F%2Fb", "a%2F.%2Fb", "x%00y", "x%0Ay", "x%1By"])
def test_parse_ref_refuses_dot_empty_and_control_revision_parts(revision):
    with pytest.raises(HubError) as err:
        parse_ref(f"hf:org/name@{revision}")
    assert "\n" not in str(err.value) and "revision" in str(err.value)


# --- 2. hostile listings and broken transfers, through the real command line ---------------------

def _prefetch_cli(env: dict[str, str], weights: str, tmp_path: Path, timeout: float = 180):
    args = [sys.executable, "-m", "icl.run", "vlicl", "--fast", "--models", "hf-vlm", "--model-arg",
            f"weights={weights}", "--tasks", "clevr", "--seeds", "0", "--shots", "0", "--queries", "1", "--out",
            str(tmp_path / "run"), "--no-plots", "--no-progress", "--prefetch"]
    return subprocess.run(args, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("fault, names", [
    ("../../evil.json", "../../evil.json"),
    ("/etc/evil.json", "/etc/evil.json"),
    ("terabyte", "model.safetensors"),
    ("drop", "model.safetensors"),
])
def test_hostile_listings_and_broken_transfers_are_one_line_exit_2(hf_env, server, tmp_path, fault, names):
    if fault == "terabyte":
        server.sizes["model.safetensors"] = 10**12
    elif fault == "drop":
        server.always_drop.add("model.safetensors")
    else:
        server.listed.append({"type": "file", "path": fault, "size": 2, "oid": "0" * 40})
    done = _prefetch_cli(dict(os.environ), f"hf:{REPO}", tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert f"hf:{REPO}" in lines[0] and names in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "evil.json").exists() and not Path("/etc/evil.json").exists()
    if fault == "drop":  # every try broke off; each resumed where the last one stopped
        gets = [r for r in server.requests if r.method == "GET" and r.path.endswith("/model.safetensors")]
        assert len(gets) == hub.DownloadLimits().tries and "broke off" in lines[0]
        assert all(r.range.startswith("bytes=") for r in gets[1:])
    snaps = list(hf_env.glob("models--org--tiny/snapshots/*/model.safetensors"))
    assert snaps == []  # nothing bad entered the cache


# --- 3. a trickling server: a deadline, and signals ----------------------------------------------

@pytest.fixture
def slow_repo(server):
    server.commit("org/slow", {"config.json": b'{"model_type": "llava"}', "model.safetensors": b"w" * 400})
    return "hf:org/slow"


@pytest.mark.parametrize("limit", [{"ICL_DOWNLOAD_MIN_RATE": "100", "ICL_DOWNLOAD_WINDOW": "2"},
                                   {"ICL_DOWNLOAD_TIMEOUT": "2"}])
def test_a_trickling_download_ends_at_its_deadline_with_one_line(hf_env, server, slow_repo, monkeypatch, limit):
    server.trickle["model.safetensors"] = 0.5
    for var, value in limit.items():
        monkeypatch.setenv(var, value)
    t0 = time.monotonic()
    with pytest.raises(HubError) as err:
        hub.resolve(slow_repo)
    msg = str(err.value)
    assert time.monotonic() - t0 < 10
    assert "\n" not in msg and msg.startswith(f"{slow_repo}: model.safetensors: ") and next(iter(limit)) in msg
    assert msg.count(slow_repo) == 1 and "given up" in msg  # said once, not wrapped in another error
    assert not list(hf_env.glob("models--org--slow/snapshots/*/model.safetensors"))


@pytest.mark.parametrize("text", ["-1", "fast", "inf", "nan"])
def test_a_bad_download_limit_is_one_line_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv("ICL_DOWNLOAD_MIN_RATE", text)
    with pytest.raises(EnvError, match=r"^ICL_DOWNLOAD_MIN_RATE="):
        hub.download_limits()


def _started(server, path, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not any(r.method == "GET" and r.path.endswith(path) for r in server.requests):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the download never started"
        time.sleep(0.1)
    time.sleep(0.5)


@pytest.mark.slow
def test_sigterm_stops_a_download_and_a_second_one_stops_a_stalled_one_at_once(hf_env, server, slow_repo, tmp_path):
    args = [sys.executable, "-m", "icl.run", "vlicl", "--fast", "--models", "hf-vlm", "--model-arg",
            f"weights={slow_repo}", "--tasks", "clevr", "--out", str(tmp_path / "run"), "--no-progress", "--prefetch"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # a byte a second: the first SIGTERM stops it at the next byte
    server.trickle["model.safetensors"] = 1.0
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _started(server, "/model.safetensors", proc)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert time.monotonic() - t0 < 5
        assert proc.returncode == 130 and err.strip().splitlines() == [
            "icl.run: --prefetch interrupted; the files downloaded so far are kept in the Hugging Face cache, "
            "rerun the same command to resume"], err
    finally:
        proc.kill() if proc.poll() is None else None
    # a server that stalls (a byte a minute): the first SIGTERM is pending, a second stops at once
    server.requests.clear()
    server.trickle["model.safetensors"] = 60.0
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _started(server, "/model.safetensors", proc)
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert time.monotonic() - t0 < 3
        assert proc.returncode == 130 and len(err.strip().splitlines()) == 1 and "interrupted" in err, err
    finally:
        proc.kill() if proc.poll() is None else None


# --- 4. every file verified; a damaged cache found and repaired ----------------------------------

def test_a_config_corrupted_in_transit_is_refused_and_not_cached(hf_env, server, hub_llava):
    data = (hub_llava[0] / "config.json").read_bytes()
    bad = data.replace(b"{", b"[", 1)  # the same size, another content
    server.corrupt["config.json"] = bad
    with pytest.raises(HubError) as err:
        hub.resolve(f"hf:{REPO}")
    msg = str(err.value)
    assert "\n" not in msg and "config.json is corrupt: its git blob id" in msg and f"hf:{REPO}" in msg
    assert not list(hf_env.glob("models--org--tiny/snapshots/*/config.json"))
    assert all(p.read_bytes() != bad for p in hf_env.glob("models--org--tiny/blobs/*"))
    assert not list(hf_env.glob("models--org--tiny/snapshots/*/model.safetensors"))  # no weight before the config


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_cached_file_is_reported_and_prefetch_repairs_it(hf_env, server, hub_llava, tmp_path, capsys,
                                                                   damage):
    from icl.run.__main__ import main

    snap = hub.resolve(f"hf:{REPO}")
    path = snap.root / "model.safetensors"
    data = path.read_bytes()
    blob = path.resolve()
    assert hub.verify_cached(path) is None
    blob.write_bytes(data[: len(data) // 2] if damage == "truncated" else bytes(b ^ 1 for b in data))
    problem = hub.verify_cached(path)
    assert problem is not None and "model.safetensors in the cache is damaged" in problem and "--prefetch" in problem
    assert hub.verify_snapshot(snap) == [problem]
    hub.forget()
    args = ["vlicl", "--fast", "--models", "hf-vlm", "--model-arg", f"weights=hf:{REPO}", "--tasks", "clevr",
            "--out", str(tmp_path / "run"), "--no-progress", "--prefetch"]
    assert main(args) == 0, capsys.readouterr().err
    assert path.read_bytes() == data and hub.verify_cached(path) is None and hub.verify_snapshot(snap) == []
    gets = [r for r in server.requests if r.method == "GET" and r.path.endswith("/model.safetensors")]
    assert len(gets) == 2  # downloaded again, once


def test_a_hand_made_folder_is_not_judged(tmp_path):
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"anything")
    assert hub.verify_cached(f) is None and "missing" in hub.verify_cached(tmp_path / "gone.json")


# --- 12. messages: the missing file named, one line --------------------------------------------

def test_offline_a_snapshot_missing_a_file_names_it(hf_env, server, monkeypatch):
    snap = hub.resolve(f"hf:{REPO}")
    (snap.root / "tokenizer_config.json").unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.forget()
    with pytest.raises(HubError) as err:
        hub.resolve(f"hf:{REPO}")
    msg = str(err.value)
    assert "\n" not in msg and "lacks files this model needs: 1 missing (tokenizer_config.json)" in msg
    assert msg.startswith(f"hf:{REPO}: ") and "hub:" not in msg and "error:" not in msg


def test_two_concurrent_resolutions_download_a_blob_once(hf_env, server, slow_repo):
    """Two resolutions at once (threads here; two --prefetch processes share the same file lock):
    the second waits for the first's blob and uses it, both get the verified file."""
    import threading

    server.trickle["model.safetensors"] = 0.005  # slow enough (2 s) that both ask while it downloads
    results, errors = [], []

    def one():
        try:
            results.append(hub.resolve(slow_repo, ("*.json", "*.safetensors")))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(results) == 2
    assert all((r.root / "model.safetensors").read_bytes() == b"w" * 400 for r in results)
    gets = [r for r in server.requests if r.method == "GET" and r.path.endswith("/model.safetensors")]
    assert len(gets) == 1


def test_an_unreachable_hub_falls_back_to_the_cache_or_says_both(hf_env, server, monkeypatch):
    online = hub.resolve(f"hf:{REPO}")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens (HF_HUB_OFFLINE not set)
    hub.forget()
    cached = hub.resolve(f"hf:{REPO}")  # as the client does: the cache serves
    assert (cached.commit, cached.files) == (online.commit, online.files)
    hub.forget()
    with pytest.raises(HubError) as err:
        hub.resolve("hf:org/never-fetched")
    msg = str(err.value)
    assert "\n" not in msg and "cannot be reached" in msg and "not in the Hugging Face cache" in msg


@pytest.mark.parametrize("fault", ["more than listed", "full disk"])
def test_a_body_larger_than_listed_or_a_full_cache_disk_is_one_line(hf_env, server, monkeypatch, tmp_path, fault):
    if fault == "more than listed":
        server.sizes["model.safetensors"] = 100
        expected = "model.safetensors: the server announces"
    else:  # the cache on a 64 KB tmpfs, the free-space check fooled: the disk fills mid-file
        disk = tmp_path / "disk"
        disk.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                          capture_output=True).returncode:
            pytest.skip("cannot mount a tmpfs here (needs root and mount rights)")
        monkeypatch.setenv("HF_HUB_CACHE", str(disk / "hub"))
        monkeypatch.setattr(hub, "free_space", lambda path: 10**12)
        expected = "model.safetensors: the disk of"
    try:
        with pytest.raises(HubError) as err:
            hub.resolve(f"hf:{REPO}")
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"hf:{REPO}: {expected}") and msg.count(f"hf:{REPO}") == 1
        assert not list(hub.cache_dir().glob("models--org--tiny/snapshots/*/model.safetensors"))
    finally:
        if fault == "full disk":
            subprocess.run(["umount", "-l", str(tmp_path / "disk")], capture_output=True)


def test_a_pinned_commit_answered_as_another_is_refused(hf_env, server, hub_llava):
    b = server.commit_folder(REPO, hub_llava[1])  # a real commit, but not the one pinned
    server.commit_id = b
    with pytest.raises(HubError, match=rf"answered commit {b} for the pinned commit {server.a} of {REPO}; refused$"):
        hub.resolve(f"hf:{REPO}@{server.a}")
    assert not list(hf_env.rglob("snapshots/*"))


@pytest.mark.slow  # a --check and a --prefetch through the command line
def test_check_and_prefetch_agree_on_a_damaged_cached_config(hf_env, server, hub_llava, tmp_path, capsys):
    """Issue 50.4: a ``config.json`` damaged in the cache (named by its git blob id, a small file)
    is a ``--check`` problem saying so, whose fix is ``--prefetch``, and ``--prefetch`` repairs it;
    the check hashes only such small files (the weights are judged by their headers)."""
    import json as json_module

    from icl.run.__main__ import main

    snap = hub.resolve(f"hf:{REPO}")
    path = snap.root / "config.json"
    data = path.read_bytes()
    path.resolve().write_bytes(data[:-5])
    hub.forget()
    args = ["vlicl", "--fast", "--models", "hf-vlm", "--model-arg", f"weights=hf:{REPO}", "--tasks", "clevr",
            "--out", str(tmp_path / "run"), "--no-progress"]
    assert main([*args, "--check"]) == 2
    report = json_module.loads((tmp_path / "run" / "check.json").read_text())
    damaged = [p for p in report["problems"] if "config.json in the cache is damaged" in p["message"]]
    assert damaged and "--prefetch" in damaged[0]["fix"], report
    assert {p["kind"] for p in damaged} == {"damaged in the cache"}  # from the error's type, not its text
    hub.forget()
    assert main([*args, "--prefetch"]) == 0, capsys.readouterr().err
    assert path.read_bytes() == data and hub.verify_cached(path) is None


def test_the_git_blob_id_is_git_s():
    """The Hub names a non-LFS blob by its git blob id (``git hash-object``): the values git itself
    prints for the empty file and for ``hello\\n`` (Git Book, "Git Objects"), for icl's hash and the
    test Hub's alike."""
    import tempfile

    from tests.models.hub_server import git_blob_id

    for content, expected in ((b"", "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"),
                              (b"hello\n", "ce013625030ba8dba906f756967f9e9ca394464a")):
        with tempfile.NamedTemporaryFile() as f:
            f.write(content)
            f.flush()
            assert hub._git_blob_id(Path(f.name)) == expected
        assert git_blob_id(content) == expected
