"""End-to-end evaluation throughput for ``bench/gpu_check.py``: whole batches of predictions
decoded and scored through ``Task.evaluate`` where a model left them (torch tensors on the
device), beside the numpy path on the host (predictions copied back first, as a GPU model's
outputs would be), with the agreement of the two.

``measure(device, n, size)`` also runs on the CPU with small sizes (a smoke check).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from icl.data.dataset import DatasetMeta
from icl.benchmarks.vibe.tasks import get_task
from icl.benchmarks.vibe.tasks.palette import class_colours, max_classes


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], Any], device: str) -> tuple[Any, float]:
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - start


def _segmentation(n: int, size: int, device: str, gen: torch.Generator) -> tuple:
    """Blocky label maps with every class, their colours plus noise as uint8 predictions on the device."""
    classes = max_classes()
    meta = DatasetMeta(name="bench", version="1", tasks=("segmentation",),
                       classes=tuple(f"c{i}" for i in range(classes)))
    cell = max(size // 32, 1)
    labels = torch.randint(0, classes, (n, size // cell, size // cell), generator=gen, device=device)
    labels = labels.repeat_interleave(cell, 1).repeat_interleave(cell, 2)[:, :size, :size].to(torch.uint8)
    colours = torch.from_numpy(class_colours(classes)).to(device)[labels.long()].float()
    preds = (colours + 12.0 * torch.randn(colours.shape, generator=gen, device=device)).clamp(0, 255).round()
    targets = list(labels.cpu().numpy())
    return get_task("segmentation"), meta, preds.to(torch.uint8), targets, [[t] for t in targets]


def _denoising(n: int, size: int, device: str, gen: torch.Generator) -> tuple:
    """Smooth random images as targets; bfloat16 predictions in [0, 1] (target plus noise) on the device."""
    meta = DatasetMeta(name="bench", version="1", tasks=("denoising",), classes=())
    low = torch.rand((n, 3, max(size // 16, 2), max(size // 16, 2)), generator=gen, device=device)
    clean = F.interpolate(low, size=(size, size), mode="bilinear", align_corners=False)
    preds = (clean + 0.05 * torch.randn(clean.shape, generator=gen, device=device)).clamp(0, 1)
    targets = list((clean * 255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy())
    preds = preds.permute(0, 2, 3, 1).contiguous().to(torch.bfloat16)
    return get_task("denoising"), meta, preds, targets, [[] for _ in targets]


def _agreement(host: list[dict], dev: list[dict]) -> dict[str, float]:
    """Largest absolute difference per metric between host and device scores (NaN pairs skipped)."""
    out: dict[str, float] = {}
    for a, b in zip(host, dev):
        for k, x in a.items():
            y = b[k]
            if (math.isnan(x) and math.isnan(y)) or x == y:
                d = 0.0
            else:
                d = abs(x - y)
            out[k] = max(out.get(k, 0.0), d)
    return out


def measure(device: str = "cuda", n: int = 256, size: int = 1024, batch: int = 64,
            host_samples: int = 8) -> dict[str, dict[str, Any]]:
    """Samples/s of device and host evaluation for segmentation and an image task (see module)."""
    gen = torch.Generator(device=device).manual_seed(0)
    report: dict[str, dict[str, Any]] = {}
    for name, make in (("segmentation", _segmentation), ("denoising", _denoising)):
        task, meta, preds, targets, ctx = make(n, size, device, gen)
        task.evaluate(preds[:2], targets[:2], ctx[:2], meta)  # warm-up: kernel compilation, LPIPS weights

        def on_device() -> list[dict]:
            out: list[dict] = []
            for s in range(0, n, batch):
                out += task.evaluate(preds[s:s + batch], targets[s:s + batch], ctx[s:s + batch], meta)
            return out

        dev_scores, dev_s = _timed(on_device, device)
        k = min(host_samples, n)

        def on_host() -> list[dict]:
            host_preds = [p.float().cpu().numpy() if p.dtype == torch.bfloat16 else p.cpu().numpy() for p in preds[:k]]
            return task.evaluate(host_preds, targets[:k], ctx[:k], meta)

        host_scores, host_s = _timed(on_host, device)
        row = {"samples": n, "size": size, "batch": batch, "prediction_dtype": str(preds.dtype).replace("torch.", ""),
               "device_samples_per_s": n / dev_s, "host_samples": k, "host_samples_per_s": k / host_s,
               "ratio": (n / dev_s) / (k / host_s), "max_abs_diff": _agreement(host_scores, dev_scores[:k])}
        if "lpips" in task.metrics:
            row["lpips_computed"] = not all(math.isnan(s["lpips"]) for s in dev_scores)
        report[name] = row
    return report


def print_report(report: dict[str, dict[str, Any]]) -> None:
    for name, r in report.items():
        extra = "" if "lpips_computed" not in r else f", lpips {'on' if r['lpips_computed'] else 'MISSING (NaN)'}"
        print(f"e2e {name:<13} {r['samples']} x {r['size']}^2 {r['prediction_dtype']}: device "
              f"{r['device_samples_per_s']:8.1f} samples/s, host {r['host_samples_per_s']:6.2f} samples/s "
              f"({r['host_samples']} samples) -> {r['ratio']:6.1f}x{extra}; max |host - device| "
              + ", ".join(f"{k} {v:.2g}" for k, v in r["max_abs_diff"].items()), flush=True)


if __name__ == "__main__":
    print_report(measure("cpu", n=8, size=96, batch=4, host_samples=4))
