"""``bench/gpu_check.py --dry-run-cpu --quick`` (the CI check of the device script): every GPU
kernel step runs on the CPU (Triton interpreter, numba simulator) at a tiny size and its output
is checked against the CPU backend; the JSON is complete and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_dry_run_quick_checks_every_kernel(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    pytest.importorskip("numba")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "NUMBA_ENABLE_CUDASIM")}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run-cpu", "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    kernels = report["kernels"]
    assert {"nearest_palette[150]", "turbo_decode", "ssim[rgb]", "psnr[rgb]", "connected_components+stats"} <= set(kernels)
    assert all(row["matches_cpu"] for row in kernels.values()) and report["mismatches"] == {}
    assert report["quick"] is True and report["skipped"] == [] and "seconds" in report
