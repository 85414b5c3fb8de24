"""A full or read-only disk under the output folder: one line naming the path and what to do,
exit 2, and the store keeps every batch committed before (a real tmpfs, mounted by the test)."""

import os
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's syntax: 200k, 4m) mounted at ``where`` for the block
    (skips the test where mounting is not allowed)."""
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and mount rights)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path, leave_kib: int) -> Path:
    """Fill the filesystem of ``disk`` with one file so that only about ``leave_kib`` KiB stay
    free: a command then starts writing and runs out of space part way. Returns the file
    (remove it to free the space)."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave_kib * 1024))
    return filler


@pytest.fixture
def small_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "200k") as mnt:  # bounded: a 200 KB tmpfs, unmounted by the test
        yield mnt


def _run(out, data):
    cmd = [sys.executable, "-m", "icl.run", "vibe", "--fast", "--tasks", "flip,edges", "--models", "identity",
           "--out", str(out), "--data-root", str(data), "--no-plots", "--no-progress"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_full_disk_is_one_line_and_keeps_the_store(small_disk, builtin_root):
    out = small_disk / "run"
    proc = _run(out, builtin_root)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr and "no space left on the device" in line and str(small_disk) in line, proc.stderr
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
    assert "Traceback" not in proc.stderr and "read-only" in line and str(small_disk) in line, proc.stderr


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


# -- a disk that fills part way through a command ---------------------------------------------

def test_a_batch_the_disk_cannot_hold_raises_the_full_disk_error_and_keeps_the_store(tmp_path):
    """A transaction larger than SQLite's page cache spills to the log part way; when that write
    finds the disk full SQLite rolls the transaction back itself, and the store's own ROLLBACK
    used to fail ("cannot rollback - no transaction is active") and hide the real error."""
    from icl.store.sqlite import Response, Store

    with tmpfs(tmp_path / "disk", "1m") as disk:
        with Store(disk / "store.sqlite") as store:
            store.write_batch([Response("kept", "m", "ok", "text", "an earlier batch")])
            big = [Response(f"h{i}", "m", "ok", "png", os.urandom(100_000)) for i in range(30)]  # 3 MB > the disk
            with pytest.raises(sqlite3.OperationalError, match="database or disk is full") as caught:
                store.write_batch(big)
            assert caught.value.__context__ is None  # nothing raised while handling it
            assert set(store.responses(["kept", "h0"], "m")) == {"kept"}
            store.write_batch([Response("after", "m", "ok", "text", "the store still takes small batches")])
            assert set(store.responses(["kept", "after"], "m")) == {"kept", "after"}


def _icl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icl.run", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def _vibe(data: Path, *args: str) -> list[str]:
    return ["vibe", "--fast", "--models", "identity", "--data-root", str(data), "--no-plots", "--no-progress",
            "--device", "cpu", *args]


def _one_full_disk_line(proc: subprocess.CompletedProcess, disk: Path) -> None:
    """Exit 2 and, besides warnings, exactly one line: the full disk, under ``disk``."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip() and "warning:" not in line]
    assert len(errors) == 1, proc.stderr
    assert "no space left on the device" in errors[0] and str(disk) in errors[0], errors[0]
    assert "free some space or choose another output folder" in errors[0]


def _scores(store: Path) -> list[tuple]:
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return db.execute("SELECT benchmark, protocol, item_key, model_id, judge_id, scorer_version, status, metrics "
                          "FROM scores ORDER BY 1, 2, 3, 4, 5, 6").fetchall()


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, builtin_root):
    """A finished vibe run (two tasks, three datasets, identity) to rescore and export."""
    out = tmp_path_factory.mktemp("finished") / "run"
    proc = _icl(*_vibe(builtin_root, "--tasks", "flip,edges", "--out", str(out)))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
def test_run_on_a_disk_that_fills_mid_run_is_one_line_and_keeps_earlier_results(tmp_path, builtin_root):
    with tmpfs(tmp_path / "disk", "4m") as disk:
        out = disk / "run"
        first = _icl(*_vibe(builtin_root, "--datasets", "scenes-a", "--tasks", "flip", "--out", str(out)))
        assert first.returncode == 0, first.stderr
        earlier = _scores(out / "store.sqlite")
        files = {name: (out / name).read_bytes() for name in ("results.csv", "results.json", "report.md")}
        filler = fill(disk, 400)
        proc = _icl(*_vibe(builtin_root, "--datasets", "scenes-a", "--out", str(out)))  # every task: more batches
        _one_full_disk_line(proc, disk)
        now = _scores(out / "store.sqlite")
        assert set(earlier) < set(now), "the disk filled at the run's start, not part way"
        assert {name: (out / name).read_bytes() for name in files} == files  # the earlier run's files, whole
        filler.unlink()
        again = _icl(*_vibe(builtin_root, "--datasets", "scenes-a", "--out", str(out)))
        assert again.returncode == 0 and f"{len(now)} already in the store" in again.stdout, again.stdout
        assert set(now) <= set(_scores(out / "store.sqlite"))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["rescore", "export"])
def test_rescore_and_export_on_a_disk_that_fills_mid_write_are_one_line(command, tmp_path, finished_run):
    import shutil

    with tmpfs(tmp_path / "disk", "4m") as disk:
        out = disk / "run"
        shutil.copytree(finished_run, out)
        shutil.rmtree(out / "samples")  # both write the samples again
        earlier = _scores(out / "store.sqlite")
        filler = fill(disk, 200)
        proc = _icl(command, str(out))
        _one_full_disk_line(proc, disk)
        written = list((out / "samples").glob("*.png"))
        assert written, "the disk filled at the start, not part way"
        assert len(written) < len(list((finished_run / "samples").glob("*.png")))
        assert _scores(out / "store.sqlite") == earlier
        assert not list(out.rglob("*.tmp")), "a partial file was left behind"
        assert (out / "results.csv").read_bytes() == (finished_run / "results.csv").read_bytes()
        filler.unlink()
        assert _icl(command, str(out)).returncode == 0
        assert (out / "results.csv").read_bytes() == (finished_run / "results.csv").read_bytes()
        assert _contents(out / "samples") == _contents(finished_run / "samples")
        assert _scores(out / "store.sqlite") == earlier


@pytest.mark.slow
def test_merge_into_a_disk_that_fills_mid_copy_is_one_line_and_leaves_the_shards(tmp_path, builtin_root):
    """Two shards of a whole vibe --fast hold more than SQLite's page cache, so the copy spills
    to the log part way and meets the full disk there (43-64 lines of traceback before)."""
    shards = [tmp_path / f"shard{i}" for i in range(2)]
    for i, folder in enumerate(shards):
        proc = _icl(*_vibe(builtin_root, "--shard", f"{i}/2", "--out", str(folder)))
        assert proc.returncode == 0, proc.stderr
    before = [_contents(folder) for folder in shards]
    with tmpfs(tmp_path / "disk", "8m") as disk:
        filler = fill(disk, 400)
        merged = disk / "merged"
        proc = _icl("merge", str(merged), *map(str, shards))
        _one_full_disk_line(proc, disk)
        assert "store.sqlite" in proc.stderr
        assert _scores(merged / "store.sqlite") == []  # the copy is one transaction: rolled back whole
        assert [_contents(folder) for folder in shards] == before
        filler.unlink()
        again = _icl("merge", str(merged), *map(str, shards))
        assert again.returncode == 0, again.stderr
        assert len(_scores(merged / "store.sqlite")) == sum(len(_scores(f / "store.sqlite")) for f in shards)


@pytest.mark.slow
def test_a_disk_that_fills_while_figures_are_written_is_one_line_and_publishes_no_figure(tmp_path, builtin_root):
    """The figures are drawn in helper processes, each PNG encoded in a thread: the full disk
    reaches the run's one failure path (no thread traceback, no 'cannot read the helper's
    answer'), named where the figure was to go, and no figure or staging folder is left.

    Where the disk fills depends on how many bytes the run wrote before (store pages, PNG sizes
    differ between machines), so the free space left tries a few sizes around the figures'
    share; every try must name the file it could not write, and one try must fail on a figure."""
    import shutil

    args = ["vibe", "--fast", "--models", "identity", "--data-root", str(builtin_root), "--no-progress",
            "--device", "cpu", "--datasets", "scenes-a", "--tasks", "flip,edges"]
    with tmpfs(tmp_path / "disk", "8m") as disk:
        out, seen = disk / "run", []
        for leave_kib in (900, 750, 1050, 650, 1200):
            filler = fill(disk, leave_kib)
            proc = _icl(*args, "--out", str(out))
            _one_full_disk_line(proc, disk)
            assert "Exception in thread" not in proc.stderr
            assert f"cannot write {out}:" not in proc.stderr, proc.stderr  # a file is named, not the folder
            seen.append(proc.stderr.strip().splitlines()[-1])
            if f"cannot write {out / 'plots'}/" in proc.stderr:
                break
            filler.unlink()
            shutil.rmtree(out)
        else:
            pytest.fail("the disk never filled while the figures were written: " + " | ".join(seen))
        assert not (out / "plots").exists() and not list(out.glob(".icl-staging-*"))
        earlier = _scores(out / "store.sqlite")
        assert earlier, "the disk filled before the figures"
        filler.unlink()
        again = _icl(*args, "--out", str(out))
        assert again.returncode == 0, again.stderr
        assert _scores(out / "store.sqlite") == earlier and list((out / "plots").glob("*.png"))
