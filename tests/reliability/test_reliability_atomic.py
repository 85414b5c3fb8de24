"""Report files are replaced whole: a kill mid-write, concurrent writers, a full disk (a file
size limit in a subprocess) or a read-only folder never leave a truncated file or a raw traceback."""

import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from icl.store.atomic import OutputWriteError, write_bytes, write_csv, write_json, write_text

ROOT = Path(__file__).resolve().parents[2]


def _leftovers(folder):
    return sorted(p.name for p in Path(folder).iterdir() if p.name.endswith(".tmp"))


def test_writers_replace_whole_files(tmp_path):
    write_csv(tmp_path / "r.csv", [{"a": 1, "b": "x,y"}, {"a": 2, "b": ""}], header=["a", "b"])
    with open(tmp_path / "r.csv", newline="") as f:
        assert list(csv.DictReader(f)) == [{"a": "1", "b": "x,y"}, {"a": "2", "b": ""}]
    write_csv(tmp_path / "plain.csv", [[1, 2]], header=["x", "y"])
    assert (tmp_path / "plain.csv").read_text() == "x,y\n1,2\n"
    write_json(tmp_path / "r.json", {"k": [1, 2]})
    assert json.loads((tmp_path / "r.json").read_text()) == {"k": [1, 2]}
    write_bytes(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    write_text(tmp_path / "t.txt", "old")
    inode = (tmp_path / "t.txt").stat().st_ino
    write_text(tmp_path / "t.txt", "new")
    assert (tmp_path / "t.txt").read_text() == "new" and (tmp_path / "t.txt").stat().st_ino != inode
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "t.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(TypeError):  # an unencodable value leaves the old file as it was
        write_json(tmp_path / "r.json", {"k": object()})
    assert json.loads((tmp_path / "r.json").read_text()) == {"k": [1, 2]}
    assert _leftovers(tmp_path) == []


def test_concurrent_writers_never_share_a_temporary_name(tmp_path):
    errors = []

    def writer(i):
        try:
            for _ in range(30):
                write_text(tmp_path / "results.csv", f"writer {i}\n" * 1000, durable=False)
        except Exception as exc:  # collected: any failure fails the test below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    text = (tmp_path / "results.csv").read_text()
    assert len(set(text.splitlines())) == 1 and text.count("\n") == 1000
    assert _leftovers(tmp_path) == []


KILLED_WRITER = textwrap.dedent("""
    import sys
    from icl.store.atomic import write_text
    path, i = sys.argv[1], 0
    while True:
        i += 1
        write_text(path, (str(i % 10) * 99 + "\\n") * 20000)
        if i == 1:
            print("wrote", flush=True)
""")


def test_a_kill_mid_write_leaves_the_old_or_the_new_file_whole(tmp_path):
    path = tmp_path / "results.csv"
    for delay in (0.05, 0.13, 0.21):
        proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout.readline().strip() == "wrote"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        lines = path.read_text().splitlines()
        assert len(lines) == 20000 and len(set(lines)) == 1 and len(lines[0]) == 99


FSIZE_WRITER = textwrap.dedent("""
    import resource, signal, sys
    from icl.store.atomic import OutputWriteError, write_text
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the limit then gives EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    try:
        write_text(sys.argv[1], "x" * 100000)
    except OutputWriteError as exc:
        print(exc, file=sys.stderr)
        sys.exit(exc.exit_code)
""")


def test_full_disk_is_one_clear_line_and_the_old_file_stays(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("previous results\n")
    proc = subprocess.run([sys.executable, "-c", FSIZE_WRITER, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"cannot write {path}: file too large") and "rerun" in line
    assert path.read_text() == "previous results\n" and _leftovers(tmp_path) == []


NESTED_WRITER = textwrap.dedent("""
    import resource, signal, sys
    from icl.store.atomic import OutputWriteError, atomic_open, write_bytes
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    try:
        with atomic_open(sys.argv[1], "w") as log:
            log.write("x" * 6000)  # over the limit, still in the buffer: closing it fails too
            write_bytes(sys.argv[2], b"y" * 100000)
    except OutputWriteError as exc:
        print(exc, file=sys.stderr)
        sys.exit(exc.exit_code)
""")


def test_a_buffered_file_that_cannot_be_closed_does_not_hide_the_error_that_named_a_file(tmp_path):
    """samples.jsonl open while a sample's PNG hits a full disk: closing the log flushed its
    buffer, failed again, and the bare OSError (no file name) replaced the error naming the PNG,
    so the run said only "cannot write <out>" (found by CI on a full tmpfs)."""
    log, png = tmp_path / "samples.jsonl", tmp_path / "sample.png"
    proc = subprocess.run([sys.executable, "-c", NESTED_WRITER, str(log), str(png)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"cannot write {png}: file too large"), line
    assert not log.exists() and not png.exists() and _leftovers(tmp_path) == []


READONLY_WRITER = textwrap.dedent("""
    import os, sys
    from icl.store.atomic import OutputWriteError, write_text  # imported first: nobody may not read the venv
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)  # as nobody, so that permissions apply
    try:
        write_text(sys.argv[1], "new")
    except OutputWriteError as exc:
        print(exc, file=sys.stderr)
        sys.exit(exc.exit_code)
""")


def test_read_only_folder_is_one_clear_line():
    # a folder every user can enter but only its owner can write (pytest's tmp_path is private)
    folder = Path(tempfile.mkdtemp(prefix="icl-readonly-"))
    try:
        os.chmod(folder, 0o555)  # as root the writer drops to nobody; any other owner cannot write 0555 either
        path = folder / "results.json"
        proc = subprocess.run([sys.executable, "-c", READONLY_WRITER, str(path)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line == (f"cannot write {path}: permission denied; fix the folder's permissions or choose another "
                        f"output folder")
        assert not path.exists()
    finally:
        os.chmod(folder, 0o755)
        os.rmdir(folder)


def test_the_write_error_of_a_helper_process_comes_back_as_the_same_line():
    """A figure helper's failed write crosses the process boundary pickled: it must come back
    as the same one-line OutputWriteError (it came back as 'cannot read the helper's answer')."""
    import errno
    import pickle

    sent = OutputWriteError(Path("/out/plots/f.png"), OSError(errno.ENOSPC, "No space left on device"))
    back = pickle.loads(pickle.dumps(sent))
    assert type(back) is OutputWriteError and str(back) == str(sent)
    assert back.errno == errno.ENOSPC and back.path == sent.path and back.exit_code == 2
