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
