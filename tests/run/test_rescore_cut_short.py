"""A rescore (or run) whose writing of the output files is cut short leaves ``INCOMPLETE`` in the
folder, naming the command: the files are then not one set (a new results.json beside the old
report.html), and the folder says so until the command is run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icl.run.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
RUN = ["best50", "--fast", "--no-plots", "--no-progress", "--device", "cpu"]


@pytest.fixture
def finished(tmp_path):
    out = tmp_path / "run"
    assert main([*RUN, "--out", str(out)]) == 0
    assert not (out / "INCOMPLETE").exists()
    return out


def test_a_rescore_that_fails_halfway_marks_the_folder(finished, capsys):
    """report.md cannot be replaced (a folder in its way): results.json is new, report.html the
    old one; INCOMPLETE says so, and goes once a rescore writes the whole set."""
    out = finished
    old_html = (out / "report.html").read_bytes()
    old_results = (out / "results.json").read_bytes()
    (out / "report.md").unlink()
    (out / "report.md").mkdir()
    with pytest.raises(OSError):
        main(["rescore", str(out)])
    assert (out / "results.json").read_bytes() != old_results and (out / "report.html").read_bytes() == old_html
    told = (out / "INCOMPLETE").read_text()
    assert f"rescore {out}" in told and "not one set" in told
    (out / "report.md").rmdir()
    assert main(["rescore", str(out)]) == 0
    assert not (out / "INCOMPLETE").exists() and (out / "report.md").is_file()


def test_a_rescore_killed_while_writing_leaves_incomplete(finished):
    """SIGKILL once the rescore has begun replacing the files: the folder says it is incomplete."""
    out = finished
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(5):  # the kill must land before the last file is written (a few tenths of a second)
        proc = subprocess.Popen([sys.executable, "-m", "icl.run", "rescore", str(out)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not (out / "INCOMPLETE").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.returncode == -signal.SIGKILL:
            break
    assert proc.returncode == -signal.SIGKILL, "the rescore finished before it could be killed"
    assert (out / "INCOMPLETE").exists()
    assert main(["rescore", str(out)]) == 0
    assert not (out / "INCOMPLETE").exists()
