"""Headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it) driven through its documented
switches (``--screenshot``, ``--dump-dom``, ``--enable-logging=stderr``: console messages are
logged as ``CONSOLE`` lines), for the report.html tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import cv2
import numpy as np

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def browse(page: Path, tmp: Path, size: tuple[int, int] = (1280, 1600)) -> tuple[str, list[str], np.ndarray]:
    """Open ``page`` in headless Chromium: its DOM after loading, the console lines, the screenshot."""
    shot = tmp / "shot.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--user-data-dir={tmp / 'profile'}", f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}", "--dump-dom",
           "--enable-logging=stderr", "--v=0", page.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    image = cv2.imread(str(shot))
    assert image is not None, f"no screenshot: {done.stderr[-2000:]}"
    return done.stdout, console, image
