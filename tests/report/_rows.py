"""Hand-made stored rows for the report tests."""

from __future__ import annotations

import math

from icl.report import Scored, TaskSpec

SPECS = {
    "seg": TaskSpec("seg", ("miou",), ("miou",), frozenset()),
    "img": TaskSpec("img", ("psnr", "ssim", "lpips"), ("psnr", "ssim", "lpips"), frozenset({"lpips"})),
}


def row(model, dataset, task, q, metrics, status="ok", shots=1):
    return Scored(model, "1", dataset, task, shots, q, status, metrics)


def hand_rows():
    """seg over two datasets (A and B tie on the dataset average); img on one dataset with
    an infinite PSNR that is capped, a PSNR tie and an LPIPS tie."""
    rows = []
    seg = {"A": {"d1": 0.8, "d2": 0.6}, "B": {"d1": 0.5, "d2": 0.9}, "C": {"d1": 0.2, "d2": 0.4}}
    for model, per_ds in seg.items():
        for ds, v in per_ds.items():
            # two queries averaging to v
            rows += [row(model, ds, "seg", "q1", {"miou": v - 0.1}), row(model, ds, "seg", "q2", {"miou": v + 0.1})]
    img = {
        "A": [dict(psnr=math.inf, ssim=0.9, lpips=0.1), dict(psnr=20.0, ssim=0.9, lpips=0.1)],
        "B": [dict(psnr=30.0, ssim=0.8, lpips=0.1), dict(psnr=30.0, ssim=0.8, lpips=0.1)],
        "C": [dict(psnr=60.0, ssim=0.7, lpips=0.3), dict(psnr=60.0, ssim=0.7, lpips=0.3)],
    }
    for model, samples in img.items():
        rows += [row(model, "d1", "img", f"q{i}", m) for i, m in enumerate(samples)]
    return rows
