"""A full or read-only disk under the output folder: one line naming the path and what to do,
exit 2, and the store keeps every batch committed before (a real tmpfs, mounted by the test)."""

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    # bounded: a 200 KB tmpfs, unmounted by the test
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and mount rights)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _run(out, data):
    cmd = [sys.executable, "-m", "icl.run", "vibe", "--fast", "--tasks", "flip,edges", "--models", "identity",
           "--out", str(out), "--data-root", str(data), "--no-plots", "--no-progress"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_full_disk_is_one_line_and_keeps_the_store(small_disk, builtin_root):
    out = small_disk / "run"
    proc = _run(out, builtin_root)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr and "no space left on the device" in line and str(small_disk) in line
    assert "free some space or choose another output folder" in line
    store = out / "store.sqlite"
    if store.exists():  # whatever was committed is intact
        with sqlite3.connect(store) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_read_only_disk_is_one_line(small_disk, builtin_root):
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True, capture_output=True)
    proc = _run(small_disk / "run", builtin_root)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr and "read-only" in line and str(small_disk) in line


def _limited(limit, args, cwd):
    """``python -m icl.run ARGS`` under a file size limit of ``limit`` bytes (``ulimit -f``; SIGXFSZ
    ignored, so a write past it fails with EFBIG, which SQLite reports as "disk I/O error")."""
    import resource
    import signal

    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "icl.run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, preexec_fn=limit_files, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.slow
def test_file_size_limit_is_one_line_in_run_rescore_and_merge(tmp_path, builtin_root):
    """A write past ``ulimit -f`` gave raw "disk I/O error" tracebacks (SQLite's word for EFBIG) in
    run, rescore and merge; now one line naming the store and the limit, exit 2."""
    import shutil

    from icl.run.__main__ import main

    args = ["vibe", "--fast", "--tasks", "flip", "--datasets", "scenes-a", "--limit", "2", "--models", "identity",
            "--data-root", str(builtin_root), "--no-plots", "--no-progress", "--device", "cpu"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    for i in range(2):
        assert main([*args, "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}")]) == 0
    shutil.copytree(tmp_path / "run", tmp_path / "again")
    for name, command in (("run", [*args, "--out", str(tmp_path / "new")]),
                          ("rescore", ["rescore", str(tmp_path / "again")]),
                          ("merge", ["merge", str(tmp_path / "merged"), str(tmp_path / "s0"), str(tmp_path / "s1")])):
        proc = _limited(20_000, command, tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (name, proc.stderr)
        (line,) = proc.stderr.strip().splitlines()
        assert "store.sqlite: file too large (file size limit); raise the file size limit (ulimit -f)" in line, name
    with sqlite3.connect(tmp_path / "again" / "store.sqlite") as db:  # what rescore found is intact
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
