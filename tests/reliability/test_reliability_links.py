"""Output writes never follow links (issue 28): a symbolic link planted in ``--out`` under the
lock's name, a plot's name or a temporary name is refused or replaced, and the file it points
to is never written; temporaries of a killed writer are removed when the next run starts.

The audit saw ``.icl.lock`` and plot files follow symlinks (the run truncated and overwrote the
link's target) and plots written through fixed ``<name>.tmp.png`` names.
"""

import io
import os
import subprocess

import numpy as np
import pytest

from icl.report.plots import read_rgb, write_rgb
from icl.run import ModelSpec, RunConfig, run
from icl.store.atomic import write_text
from icl.run.errors import ConfigError
from icl.run.outputs.lock import LOCK_NAME, FolderLock, LockError
from tests.reliability.test_reliability_runner import _cmd, _env

PRECIOUS = "the user's file: never written by a run\n"


def _victim(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    return victim, victim.stat().st_mtime_ns


def _untouched(victim, mtime):
    assert victim.read_text() == PRECIOUS and victim.stat().st_mtime_ns == mtime


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path, builtin_root):
    """A real ``python -m icl.run`` on a folder whose ``.icl.lock`` links to a user's file."""
    victim, mtime = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(victim)
    proc = subprocess.run(_cmd(out, builtin_root), env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "symbolic link" in lines[0] and "Traceback" not in proc.stderr
    _untouched(victim, mtime)
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing else was written


def test_lock_refuses_hard_links_and_fifos_without_touching_them(tmp_path):
    victim, mtime = _victim(tmp_path)
    hard = tmp_path / "hard"
    hard.mkdir()
    os.link(victim, hard / LOCK_NAME)
    with pytest.raises(LockError, match="2 hard links"):
        FolderLock(hard).acquire()
    _untouched(victim, mtime)
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / LOCK_NAME)
    with pytest.raises(LockError, match="not a regular file"):  # refused at once, no blocking open
        FolderLock(fifo).acquire()
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / LOCK_NAME).symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(LockError, match="symbolic link"):
        FolderLock(dangling).acquire()
    assert not (tmp_path / "created-through-the-link").exists()


def _options():
    return dict(tasks=("flip",), datasets=("scenes-a",), limit=2)


def test_a_planted_plot_symlink_refuses_the_run_before_anything_is_written(tmp_path, builtin_root):
    victim, mtime = _victim(tmp_path)
    out = tmp_path / "out"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "radar_flip_k1.png").symlink_to(victim)
    config = RunConfig("vibe", options=_options(), models=[ModelSpec("identity")], fast=True,
                       data_root=builtin_root, out=out, progress=False)
    with pytest.raises(ConfigError, match=r"symbolic link plots/radar_flip_k1.png"):
        run(config, stdout=io.StringIO(), stderr=io.StringIO())
    _untouched(victim, mtime)
    assert not (out / "store.sqlite").exists()


def test_writers_replace_a_link_under_the_output_name_never_its_target(tmp_path):
    victim, mtime = _victim(tmp_path)
    for name in ("results.csv", "query.png"):
        (tmp_path / name).symlink_to(victim)
    write_text(tmp_path / "results.csv", "a,b\n")
    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    write_rgb(tmp_path / "query.png", image)
    _untouched(victim, mtime)
    for name in ("results.csv", "query.png"):
        assert not (tmp_path / name).is_symlink()
    np.testing.assert_array_equal(read_rgb(tmp_path / "query.png"), image)


def test_images_never_pass_through_a_fixed_temporary_name(tmp_path):
    """Earlier versions wrote ``<name>.tmp.png`` first: a link planted there was written through."""
    victim, mtime = _victim(tmp_path)
    (tmp_path / "query.png.tmp.png").symlink_to(victim)
    write_rgb(tmp_path / "query.png", np.zeros((3, 3, 3), np.uint8))
    _untouched(victim, mtime)
    assert (tmp_path / "query.png.tmp.png").is_symlink()  # left alone, not written


def test_stale_temporaries_are_removed_when_a_run_starts(tmp_path, builtin_root):
    out = tmp_path / "out"
    (out / "plots").mkdir(parents=True)
    stale = [out / ".results.csv.icl-k2j4x9_a.tmp", out / "plots" / ".radar_flip_k1.png.icl-00aa11bb.tmp",
             out / "plots" / "qualitative_flip.png.tmp.png"]
    kept = [out / "notes.tmp", out / ".results.csv.mine.tmp"]  # not a name this writer makes
    for p in stale + kept:
        p.write_text("x")
    (out / ".icl-staging-ab12cd34" / "plots").mkdir(parents=True)  # a killed run's staging folder
    (out / ".icl-staging-ab12cd34" / "plots" / "radar_flip_k1.png").write_text("x")
    stale.append(out / ".icl-staging-ab12cd34")
    config = RunConfig("vibe", options=_options(), models=[ModelSpec("identity")], fast=True,
                       data_root=builtin_root, out=out, plots=False, progress=False)
    assert run(config, stdout=io.StringIO(), stderr=io.StringIO()).exit_code == 0
    assert [p for p in stale if p.exists()] == []
    assert all(p.read_text() == "x" for p in kept)
    leftovers = [p for p in out.rglob("*") if p.name.startswith(".icl-") or ".icl-" in p.name
                 or p.name.endswith(".tmp.png")]
    assert leftovers == []


def test_a_benchmarks_own_writer_never_writes_through_a_link(tmp_path, builtin_root):
    """vibe writes contexts.csv with its own writer (icl.data.contexts); the runner gives it a
    private staging folder and moves the file into place, so a link planted under the name
    after the run's checks is replaced, not followed."""
    from icl.run.outputs.files import write_artifacts
    from icl.run.planning.setup import open_benchmark, plan_items

    victim, mtime = _victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    bench = open_benchmark(RunConfig("vibe", options=_options(), fast=True, data_root=builtin_root, out=out))
    plan_items(bench)
    (out / "contexts.csv").symlink_to(victim)
    digests = write_artifacts(bench, out)
    _untouched(victim, mtime)
    assert not (out / "contexts.csv").is_symlink()
    import hashlib

    assert hashlib.sha256((out / "contexts.csv").read_bytes()).hexdigest() == digests["contexts.csv"]
    assert sorted(p.name for p in out.iterdir()) == ["contexts.csv"]  # the staging folder is gone
