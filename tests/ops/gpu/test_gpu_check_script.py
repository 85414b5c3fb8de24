"""The device-check script runs end to end (``--dry-run-cpu --quick``: Triton interpreter,
numba simulator, a tiny size), checking every kernel's output against the CPU backend, so a
GPU session spends its minutes measuring, not debugging the script. Not on the device itself:
the parity step there runs this folder, and a CPU dry run would spend device time."""

from __future__ import annotations

import json
import os
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


@pytest.mark.slow
@pytest.mark.skipif(DEVICE != "cpu", reason="a CPU dry run; the device runs the real check")
def test_gpu_run_dry_run_compares_the_three_paths(tmp_path, builtin_root):
    """``bench/gpu_run.py`` (gpu_check's end-to-end runs): the same runs with a small Painter on
    the CPU; device and host scoring of the same answers agree."""
    cmd = [sys.executable, str(ROOT / "bench" / "gpu_run.py"), "--dry-run-cpu", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ICL_DATA_ROOT": str(builtin_root)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_run.json").read_text())
    assert set(report["runs"]) == {"bf16_b4_device", "bf16_b4_host", "fp32_b1_host"}
    for name, row in report["runs"].items():
        assert row["items"] > 0 and row["failed"] == 0 and row["samples_per_s"] > 0, (name, row)
    assert report["device_vs_host"] > 0 and report["device_vs_fp32_b1"] > 0
    assert max(report["max_abs_diff_device_vs_host"].values()) < 1e-3
