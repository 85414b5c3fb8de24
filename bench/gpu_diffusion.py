"""GPU check of the diffusion adapters (Prompt Diffusion, SD-VICL) at full size.

``run(out_dir, device)`` writes randomly initialised full-size folders (Stable Diffusion 1.5
shapes, the Prompt Diffusion ControlNet), loads them through the adapters' real loading path
and measures images/s and peak device memory at batch 1 and 8, bf16, 20 steps, 512 x 512
(random weights: throughput only, the images mean nothing). Results go to
``<out_dir>/gpu_diffusion.json`` and are returned. ``python bench/gpu_diffusion.py --out DIR``
runs it on ``cuda``; ``--dry-run-cpu`` runs the same path on a tiny configuration on the CPU in
seconds (what the test suite exercises).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from icl.data.seeds import derive_seed  # noqa: E402
from icl.models import AnalogyRequest, get_model  # noqa: E402
from icl.models.vicl._diffusion_random import write_random_sd_folder  # noqa: E402


def _requests(batch: int, size: int, seed: int = 0) -> list[AnalogyRequest]:
    rng = np.random.default_rng(derive_seed(seed, "gpu-diffusion", "*", str(batch), "images") % (1 << 63))
    out = []
    for i in range(batch):
        def im() -> np.ndarray:
            return rng.integers(0, 256, (size, size, 3), dtype=np.uint8)

        out.append(AnalogyRequest("bench", "random", f"q{i}", [im()], [im()], im(), (size, size),
                                  seed=derive_seed(seed, "gpu-diffusion", "*", f"q{i}", "request")))
    return out


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _measure(predict: Callable[[list[AnalogyRequest]], Any], reqs: list[AnalogyRequest], device: str,
             rounds: int) -> dict[str, float]:
    predict(reqs[:1])  # warm-up (kernel selection, allocator)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(rounds):
        _sync(device)
        start = time.perf_counter()
        predict(reqs)
        _sync(device)
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    peak = torch.cuda.max_memory_allocated(device) if device.startswith("cuda") else 0
    return {"batch": len(reqs), "seconds": seconds, "images_per_s": len(reqs) / seconds,
            "peak_memory_gib": peak / 2 ** 30}


def model_arguments(name: str, steps: int, resolution: int, precision: str) -> dict[str, Any]:
    """The measured configuration: ``steps`` denoising steps; SD-VICL's skipped steps and
    re-wiring / AdaIN ranges scaled from their 100-step defaults so that every mechanism runs."""
    args: dict[str, Any] = {"steps": steps, "resolution": resolution, "precision": precision}
    if name == "sd-vicl":
        f = steps / 100
        args.update(skip_steps=int(round(32 * f)), rewire_full_start=int(10 * f), rewire_full_end=int(90 * f),
                    rewire_half_start=int(10 * f), rewire_half_end=int(70 * f), adain_start=int(20 * f),
                    adain_end=steps)
    return args


def run(out_dir: Path | str, device: str = "cuda", *, scale: str = "full", batches: Sequence[int] = (1, 8),
        steps: int = 20, resolution: int = 512, precision: str = "bf16", rounds: int = 2) -> dict[str, Any]:
    """Images/s and peak memory of both diffusion adapters per batch size (see the module doc)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build_device = device if device.startswith("cuda") else "cpu"
    dtype = torch.bfloat16 if scale == "full" else torch.float32
    start = time.perf_counter()
    folder = write_random_sd_folder(out / "weights", scale, controlnet=True, dtype=dtype, device=build_device)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
                              "scale": scale, "steps": steps, "resolution": resolution, "precision": precision,
                              "build_s": time.perf_counter() - start, "models": {}}
    for name in ("prompt-diffusion", "sd-vicl"):
        args = model_arguments(name, steps, resolution, precision)
        model = get_model(name, weights=str(folder), batch_size=max(batches), **args)
        model.load(device)
        rows = [_measure(model.predict, _requests(b, resolution), device, rounds) for b in batches]
        for row in rows:
            print(f"[gpu_diffusion] {name} {precision} batch {row['batch']}: {row['images_per_s']:.2f} images/s, "
                  f"peak {row['peak_memory_gib']:.2f} GiB", flush=True)
        base = rows[0]["images_per_s"]
        result["models"][name] = {"arguments": args, "rows": rows,
                                  "speedup_vs_batch1": {str(r["batch"]): r["images_per_s"] / base for r in rows}}
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    (out / "gpu_diffusion.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu_diffusion_out", help="folder for the random weights and the JSON")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dry-run-cpu", action="store_true", help="tiny configuration on the CPU (seconds)")
    args = p.parse_args(argv)
    if args.dry_run_cpu:
        run(args.out, "cpu", scale="tiny", batches=(1, 2), steps=3, resolution=64, rounds=1)
    else:
        run(args.out, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
