"""``bench/bench_e2e.py --against``: the before/after comparison issue 29's target is read from
(each scenario run alternately in two checkouts, every pair's ratio and the median printed),
here with this checkout against itself on the built-in data."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # two real runs in fresh processes
def test_against_runs_interleaved_pairs_and_prints_their_median(builtin_root, tmp_path):
    """``--against HEAD``: the commit exported (``git archive``) beside this checkout's native
    module; each pair's wall, CPU and peak memory and their ratios' medians."""
    out = tmp_path / "pairs.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_e2e.py"), "--only",
                           "vibe-fast-identity-no-plots", "--against", "HEAD", "--pairs", "1",
                           "--data-root", str(builtin_root), "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pair = re.search(r"pair 1: before +([\d.]+) s, after +([\d.]+) s, ratio +([\d.]+)x", proc.stdout)
    assert pair, proc.stdout
    before, after, ratio = map(float, pair.groups())
    assert before > 0 and after > 0 and ratio == pytest.approx(before / after, abs=0.01)
    assert re.search(r"median +[\d.]+x over 1 pairs", proc.stdout)
    rows = json.loads(out.read_text())["vibe-fast-identity-no-plots"]
    assert len(rows) == 1 and rows[0]["ratio"] == pytest.approx(rows[0]["before_s"] / rows[0]["after_s"])
    row = rows[0]
    assert row["before_cpu_s"] > 0 and row["after_cpu_s"] > 0 and row["before_rss_mb"] > 50 and row["after_rss_mb"] > 50
    assert row["cpu_ratio"] == pytest.approx(row["before_cpu_s"] / row["after_cpu_s"])
    assert row["rss_ratio"] == pytest.approx(row["before_rss_mb"] / row["after_rss_mb"])
    assert re.search(r"cpu median +[\d.]+x over 1 pairs", proc.stdout)
    assert re.search(r"peak rss median +[\d.]+x over 1 pairs", proc.stdout)


def test_against_names_a_folder_or_a_commit(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from bench_e2e import checkout
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert checkout(str(ROOT), ROOT, tmp_path) == ROOT
    with pytest.raises(SystemExit, match="--against no-such-ref: neither a folder nor a commit of"):
        checkout("no-such-ref", ROOT, tmp_path)
