"""The device-check script runs end to end (``--dry-run-cpu --quick``: Triton interpreter,
numba simulator, a tiny size), checking every kernel's output against the CPU backend, so a
GPU session spends its minutes measuring, not debugging the script. Not on the device itself:
the parity step there runs this folder, and a CPU dry run would spend device time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ops.gpu.conftest import DEVICE

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.skipif(DEVICE != "cpu", reason="a CPU dry run; the device runs the real check")
def test_gpu_check_dry_run_quick_checks_every_kernel(tmp_path, triton_backend, cuda_backend, cpu_backend):
    cmd = [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run-cpu", "--quick", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert set(report["kernels"]) == {"nearest_palette[150]", "turbo_decode", "ssim[rgb]", "psnr[rgb]",
                                      "connected_components+stats", "box_iou[16x16]"}
    for name, row in report["kernels"].items():
        assert row["images_per_s"] > 0, name
        assert row["matches_cpu"] is True, (name, row)
        assert not any(str(v).startswith("failed") for v in row.values()), (name, row)
    assert report["mismatches"] == {} and report["skipped"] == [] and report["quick"] is True
