"""The generators' GPU check (bench/gpu_generators.py) runs end to end on the CPU in its dry-run
mode: random folders written, loaded through the adapters, fp32 batch 1 and bf16 batches timed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_gpu_generators_dry_run_cpu(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_generators.py"), "--dry-run-cpu", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "gpu_generators.json").read_text())
    for name in ("diffusers-t2i", "janus"):
        rows = result["models"][name]["rows"]
        assert [(r["precision"], r["batch"]) for r in rows] == [("fp32", 1), ("bf16", 1), ("bf16", 2)]
        assert all(r["images_per_s"] > 0 for r in rows)
        assert f"[gpu_generators] {name} bf16 batch 2" in proc.stdout
