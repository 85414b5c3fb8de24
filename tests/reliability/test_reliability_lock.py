"""Two runs on one output folder: the second is refused with the holder's pid (exit 2); a
killed holder never leaves a stale lock."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from icl.run.outputs.lock import LOCK_NAME, FolderLock, LockError

ROOT = Path(__file__).resolve().parents[2]
# a stand-in for a run's entry: take the folder lock, report, then hold it until stdin closes
HOLDER = textwrap.dedent("""
    import sys
    from icl.run.outputs.lock import FolderLock, LockError
    try:
        lock = FolderLock(sys.argv[1]).acquire()
    except LockError as exc:
        print(exc, file=sys.stderr)
        sys.exit(exc.exit_code)
    print("locked", flush=True)
    sys.stdin.read()
    print("done", flush=True)
""")


def _start(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc


def test_second_run_exits_2_naming_the_holders_pid(tmp_path):
    holder = _start(tmp_path / "out")
    try:
        assert holder.stdout.readline().strip() == "locked"
        second = subprocess.run([sys.executable, "-c", HOLDER, str(tmp_path / "out")], cwd=ROOT,
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and "locked" not in second.stdout
        assert f"in use by process {holder.pid} " in second.stderr
        with pytest.raises(LockError) as info:  # the same from inside this process
            FolderLock(tmp_path / "out").acquire()
        assert info.value.holder["pid"] == holder.pid and info.value.exit_code == 2
    finally:
        out, _ = holder.communicate("", timeout=60)
    assert holder.returncode == 0 and out.strip() == "done"  # the first run finished normally
    with FolderLock(tmp_path / "out") as lock:  # released on exit
        assert lock.held
        assert json.loads((tmp_path / "out" / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_sigkill_of_the_holder_releases_the_lock(tmp_path):
    holder = _start(tmp_path / "out")
    assert holder.stdout.readline().strip() == "locked"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    with FolderLock(tmp_path / "out", command=["icl", "again"]) as lock:
        assert lock.held
        info = json.loads((tmp_path / "out" / LOCK_NAME).read_text())
        assert info["pid"] == os.getpid() and info["command"] == ["icl", "again"]


def test_a_second_lock_in_the_same_process_conflicts_until_released(tmp_path):
    first = FolderLock(tmp_path).acquire()
    with pytest.raises(LockError, match=f"process {os.getpid()} "):
        FolderLock(tmp_path).acquire()
    first.release()
    FolderLock(tmp_path).acquire().release()


def test_unusable_folder_is_a_lock_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(LockError, match="cannot lock output folder"):
        FolderLock(tmp_path / "file" / "out").acquire()


def test_probe_names_the_holder_without_taking_or_writing(tmp_path):
    """``FolderLock.probe`` (``--check``): None for a free folder (nothing created), the holder's
    LockError for a held one; the lock file's record is left as the holder wrote it."""
    folder = tmp_path / "out"
    assert FolderLock(folder).probe() is None and not folder.exists()
    holder = _start(folder)
    try:
        assert holder.stdout.readline().strip() == "locked"
        record = (folder / LOCK_NAME).read_bytes()
        err = FolderLock(folder).probe()
        assert isinstance(err, LockError) and f"process {holder.pid}" in str(err) and err.holder["pid"] == holder.pid
        assert (folder / LOCK_NAME).read_bytes() == record
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert FolderLock(folder).probe() is None
