"""The diffusion GPU check (bench/gpu_diffusion.py) runs end to end on the CPU in its dry-run mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_gpu_diffusion_dry_run_cpu(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_diffusion.py"), "--dry-run-cpu", "--out",
                           str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "gpu_diffusion.json").read_text())
    assert set(result["models"]) == {"prompt-diffusion", "sd-vicl"}
    for name, entry in result["models"].items():
        assert [row["batch"] for row in entry["rows"]] == [1, 2]
        assert all(row["images_per_s"] > 0 for row in entry["rows"]), name
        assert f"[gpu_diffusion] {name} bf16 batch 2" in proc.stdout
