"""The device-check script runs end to end (CPU dry run: Triton interpreter, numba simulator),
so a GPU session spends its minutes measuring, not debugging the script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_gpu_check_dry_run_writes_every_kernel(tmp_path, triton_backend, cuda_backend, cpu_backend):
    cmd = [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run-cpu", "--size", "32", "--batch", "1",
           "--skip-e2e", "--skip-models", "--out", str(tmp_path)]  # the model dry runs have their own tests
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert set(report["kernels"]) == {"nearest_palette[150]", "turbo_decode", "ssim[rgb]", "psnr[rgb]",
                                      "connected_components+stats", "box_iou[64x64]"}
    for name, row in report["kernels"].items():
        assert row["images_per_s"] > 0, name
        assert not any(str(v).startswith("failed") for v in row.values()), (name, row)
