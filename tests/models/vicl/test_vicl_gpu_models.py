"""bench/gpu_models.py's dry run: the full-size throughput script's code path on small CPU
configurations (the device check runs it at full size on a GPU)."""

import json

from bench.gpu_models import run


def test_dry_run_cpu_writes_the_table(tmp_path):
    result = run(tmp_path, "cpu", dry_run=True, families=["painter", "delvm"])
    saved = json.loads((tmp_path / "gpu_models.json").read_text())
    assert saved["size"] == "small" and set(saved["models"]) == {"painter", "delvm"}
    for family, entry in result["models"].items():
        assert "error" not in entry, (family, entry.get("error"))
        assert set(entry) == {"fp32_b1", "bf16_b1", "bf16_b2", "speedup_vs_fp32_b1"}
        for key in ("fp32_b1", "bf16_b1", "bf16_b2"):
            assert entry[key]["images_per_s"] > 0 and entry[key]["seconds"] > 0

