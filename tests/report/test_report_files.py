import csv
import json
import math

import cv2
import numpy as np

from icl.report import write_report
from icl.report.plots import write_rgb

from tests.report._rows import SPECS, hand_rows, row


def _qualitative(root, rng):
    for task in ("seg", "img"):
        for q in ("d1__q1", "d2__q2"):
            d = root / task / q
            for name in ("context_in_0", "context_out_0", "query", "target", "pred_k1_A", "pred_k1_B"):
                write_rgb(d / f"{name}.png", rng.integers(0, 256, (9, 13, 3), dtype=np.uint8))


def test_write_report_files(tmp_path, rng):
    rows = hand_rows() + [row("C", "d1", "img", "q9", dict(psnr=1.0, ssim=0.1, lpips=math.nan))]
    _qualitative(tmp_path / "qual", rng)
    meta = {"protocol": "vibe-1", "name": "t", "git_revision": "abc", "seed": 0, "context_csv_sha256": "f" * 64,
            "timings": {"total_s": 1.0}}
    compute = [dict(model="A", stage="model", device="cpu", samples=4, wall_s=0.5, samples_per_s=8.0,
                    peak_memory_bytes=2**20, memory_kind="process-max-rss")]
    rep = write_report(tmp_path / "out", rows, SPECS, meta, compute, ["sample q7: corrupt file /x.png"],
                       qualitative_dir=tmp_path / "qual")
    out = tmp_path / "out"
    names = {p.relative_to(out).as_posix() for p in rep.files}
    assert {"results.csv", "ranks.csv", "results.json", "report.md", "plots/ranks_k1.png",
            "plots/radar_seg_k1.png", "plots/radar_img_k1.png", "plots/qualitative_seg.png",
            "plots/qualitative_img.png"} <= names
    for p in rep.files:
        assert p.is_file() and p.stat().st_size > 0
        if p.suffix == ".png":
            assert cv2.imread(str(p)) is not None
    grid = cv2.imread(str(out / "plots/qualitative_seg.png"))
    # 2 samples x (context in, context out, query, A, B, C, ground truth) tiles of 128 + 16 + borders
    assert grid.shape[0] == 2 * (128 + 16 + 4) and grid.shape[1] == 7 * (128 + 4)

    with open(out / "results.csv") as f:
        res = list(csv.DictReader(f))
    lp = next(r for r in res if r["model"] == "C" and r["metric"] == "lpips")
    assert lp["mean"] == "nan" and lp["n_missing"] == "1"  # missing, not dropped
    a_psnr = next(r for r in res if r["model"] == "A" and r["metric"] == "psnr")
    assert float(a_psnr["mean"]) == 60.0 and float(a_psnr["std"]) == 40.0

    with open(out / "ranks.csv") as f:
        ranks = list(csv.DictReader(f))
    overall = {r["model"]: float(r["rank"]) for r in ranks if r["task"] == "*"}
    assert overall["A"] < overall["B"] < overall["C"]

    text = (out / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data["protocol"] == "vibe-1" and data["context_csv_sha256"] == "f" * 64
    assert data["failures"]["count"] == 1 and data["compute"][0]["samples_per_s"] == 8.0
    assert any("lpips missing for 1/3 samples" in m for m in data["missing"])
    assert data["task_specs"]["img"]["lower_is_better"] == ["lpips"]
    md = (out / "report.md").read_text()
    assert "lpips missing" in md and "corrupt file /x.png" in md and "plots/ranks_k1.png" in md
    lines = rep.summary.splitlines()
    assert lines[0].startswith("shots=1") and lines[-1].startswith("overall rank")
    assert any(ln.startswith("img") and "60.000 [1.17]" in ln for ln in lines)


def test_report_is_deterministic(tmp_path):
    a = write_report(tmp_path / "a", hand_rows(), SPECS, {"name": "x"}, plots=False)
    b = write_report(tmp_path / "b", list(reversed(hand_rows())), SPECS, {"name": "x"}, plots=False)
    for name in ("results.csv", "ranks.csv", "report.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert a.summary == b.summary


def test_radar_with_few_datasets_and_many(tmp_path):
    from icl.report import aggregate
    from icl.report.plots import radar_plot

    rows = [row(m, f"d{i}", "seg", "q", {"miou": (i + 1) / 10 * (j + 1) / 3})
            for i in range(5) for j, m in enumerate("ABC")]
    aggs = aggregate(rows, SPECS)
    assert radar_plot(SPECS["seg"], aggs, 1, tmp_path / "r.png").is_file()
    assert radar_plot(SPECS["seg"], aggs, 2, tmp_path / "none.png") is None
