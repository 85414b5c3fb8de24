"""``python -m icl.run`` leaves without the interpreter's module teardown, but only after what a
normal exit does: threads joined, thread pools shut down, atexit handlers run, output flushed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_leave_keeps_what_a_normal_exit_does(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import atexit, sys, threading, time
        from concurrent.futures import ThreadPoolExecutor
        from pathlib import Path
        from icl.run.__main__ import leave

        out = Path({str(tmp_path)!r})
        atexit.register(lambda: (out / "atexit").write_text("ran"))
        def late():
            time.sleep(0.3)
            (out / "thread").write_text("joined")
        threading.Thread(target=late).start()
        pool = ThreadPoolExecutor(2)
        pool.submit(time.sleep, 0.2)  # an idle pool must not hold the exit
        sys.stdout.write("buffered " * 2000)  # no flush of our own
        leave(7)
    """)
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert got.returncode == 7, got.stderr
    assert got.stdout == "buffered " * 2000
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"


def test_the_command_line_exit_status_is_kept(tmp_path: Path) -> None:
    got = subprocess.run([sys.executable, "-m", "icl.run", "--version"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert got.returncode == 0 and got.stdout.startswith("icl ")
    got = subprocess.run([sys.executable, "-m", "icl.run", "no-such-benchmark"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert got.returncode == 2 and "unknown benchmark" in got.stderr
