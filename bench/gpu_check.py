"""Device check: GPU parity tests, then every GPU kernel beside its GPU peers, then
end-to-end device evaluation beside the host's numpy path.

Run on a CUDA machine: ``python bench/gpu_check.py [--out DIR] [--batch N] [--quick]``.
Prints one line per kernel (images/s at 1024x1024, ratio to each peer, fraction of the
device's memory bandwidth reached) and checks every kernel's output at the measured size
against the CPU backend (integer outputs exactly, floats to 1e-6); then the device-evaluation
parity tests (``Task.evaluate``'s tensor path and a ``--device cuda`` run against the host)
and samples/s of whole batches decoded and scored on the device against the host
(``bench/_device_eval.py``); then whole runs (``bench/gpu_run.py``): ``vibe --fast`` through the
runner with Painter at full size (random weights), bf16 batched with device-resident decoding
and scoring overlapped with the model, against the host path and against fp32 batch 1, and
through ``--ray`` with 2 workers when 2 or more GPUs are visible. Peers are the strongest plain forms: a 2^24-entry lookup table
gathered per pixel for palette/turbo (its build timed apart), SSIM by float32 ``conv2d``
with TF32 off, cupy's ``cupyx.scipy.ndimage.label`` when cupy is installed (the ``gpu``
extra). A global deadline (``--deadline-s``, default 460 s; 8-minute device budgets) skips
what would not fit, and ``gpu_check.json`` is rewritten after every step, so a run cut short
still leaves its results. ``--quick``: batch 8, no end-to-end, run, model or diffusion steps.
``--dry-run-cpu --quick`` runs every kernel step on the CPU (Triton interpreter, numba
simulator) at a tiny size, checking outputs: the CI check of this script.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# nominal HBM bandwidth by device name; the measured copy bandwidth is reported beside it
NOMINAL_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12}


def cuda_time(fn: Callable[[], Any], rounds: int = 10, warmup: int = 2) -> float:
    """Median seconds per call, timed with CUDA events (wall clock in the CPU dry run)."""
    for _ in range(warmup):
        fn()
    if not torch.cuda.is_available():
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return float(np.median(times))
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def copy_bandwidth(device: str) -> float:
    """Achievable bytes/s of a device-to-device copy (read + write)."""
    x = torch.empty(1 << (30 if device == "cuda" else 24), dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    s = cuda_time(lambda: y.copy_(x), rounds=10)
    return 2 * x.numel() / s


def nominal_bandwidth(device: str) -> float | None:
    if device != "cuda":
        return None
    name = torch.cuda.get_device_name()
    for key, value in NOMINAL_BANDWIDTH.items():
        if key in name:
            return value
    return None


def noisy_palette_images(batch: int, size: int, palette: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    device = gen.device
    idx = torch.randint(0, palette.shape[0], (batch, size // 32, size // 32), generator=gen, device=device)
    img = palette.to(device)[idx].repeat_interleave(32, 1).repeat_interleave(32, 2).float()
    img += 8.0 * torch.randn(img.shape, generator=gen, device=device)
    return img.clamp(0, 255).round().to(torch.uint8)


def lut_nearest(palette: torch.Tensor, device: str) -> torch.Tensor:
    """The strongest plain peer of palette decoding: the nearest colour of every possible RGB
    value, a 2^24-entry int64 table, built once (here by our kernel on an image holding every
    colour; its build time is reported apart, the peer is timed on the gathers alone)."""
    from icl import ops

    codes = torch.arange(1 << 24, device=device, dtype=torch.int32)
    every = torch.stack([codes >> 16, (codes >> 8) & 255, codes & 255], 1).to(torch.uint8).view(1, 4096, 4096, 3)
    backend = "triton" if device == "cuda" else "cpu"
    return ops.nearest_palette(every, palette, backend=backend).reshape(-1).to(torch.int64)


def lut_gather(images: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Peer: one table gather per pixel."""
    x = images.to(torch.int64)
    return table[(x[..., 0] << 16) | (x[..., 1] << 8) | x[..., 2]]


def torch_ssim(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Plain torch peer: separable Gaussian with float32 conv2d over [B*C, 1, H, W], valid
    region (call it with TF32 off: :func:`no_tf32`)."""
    from icl.ops.ssim import gaussian_window

    w = gaussian_window(torch.float32).to(x.device)
    c = x.shape[-1]
    xs = x.permute(0, 3, 1, 2).reshape(-1, 1, x.shape[1], x.shape[2]).float()
    ys = y.permute(0, 3, 1, 2).reshape(-1, 1, y.shape[1], y.shape[2]).float()

    def filt(t: torch.Tensor) -> torch.Tensor:
        t = torch.nn.functional.conv2d(t, w.view(1, 1, 1, -1))
        return torch.nn.functional.conv2d(t, w.view(1, 1, -1, 1))

    mx, my = filt(xs), filt(ys)
    vx, vy, vxy = filt(xs * xs) - mx * mx, filt(ys * ys) - my * my, filt(xs * ys) - mx * my
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    s = (2 * mx * my + c1) * (2 * vxy + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return s.flatten(1).mean(1).view(-1, c).mean(1)


class no_tf32:
    """TF32 off for cuDNN convolutions and matmuls (a float32 peer must compute in float32)."""

    def __enter__(self) -> None:
        self.saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False

    def __exit__(self, *exc: object) -> None:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = self.saved


def check_outputs(ours: Any, reference: Any, exact: bool) -> str | None:
    """None when ``ours`` (a tensor or a tuple of them) equals the CPU backend's ``reference``
    (exactly, or to 1e-6 relative for floats), else what differs."""
    ours_t = ours if isinstance(ours, (tuple, list)) else (ours,)
    ref_t = reference if isinstance(reference, (tuple, list)) else (reference,)
    for i, (a, b) in enumerate(zip(ours_t, ref_t)):
        if a is None and b is None:
            continue
        a, b = torch.as_tensor(a).cpu(), torch.as_tensor(b).cpu()
        if a.shape != b.shape:
            return f"output {i}: shape {tuple(a.shape)} != {tuple(b.shape)}"
        if exact or not a.is_floating_point():
            if not torch.equal(a, b.to(a.dtype)):
                return f"output {i}: {int((a != b.to(a.dtype)).sum())} of {a.numel()} values differ"
        elif not torch.allclose(a.double(), b.double(), rtol=1e-6, atol=1e-9):
            return f"output {i}: max |diff| {float((a.double() - b.double()).abs().max()):.3g}"
    return None


def run_parity_tests(out: Path, paths: list[str] | None = None, name: str = "parity", timeout: int = 240) -> int:
    """GPU parity tests on real CUDA tensors (default tests/ops/gpu), with the log kept."""
    log = out / f"gpu_{name}.log"
    targets = [str(ROOT / p) for p in (paths or ["tests/ops/gpu"])]
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", *targets, "-p", "no:cacheprovider"]
    env = dict(os.environ, ICL_GPU_TESTS_DEVICE="cuda", ICL_DEVICE_TESTS_DEVICE="cuda")
    env.pop("TRITON_INTERPRET", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        log.write_text(str(exc.stdout or "") + str(exc.stderr or ""))
        print(f"{name} tests: timed out after {timeout}s")
        return 124
    log.write_text(proc.stdout + proc.stderr)
    tail = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"{name} tests: exit {proc.returncode} in {time.time() - start:.0f}s: {tail}")
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for gpu_check.json and logs")
    parser.add_argument("--batch", type=int, default=64, help="images per call at 1024x1024")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-e2e", action="store_true", help="skip the end-to-end device evaluation")
    parser.add_argument("--e2e-samples", type=int, default=256, help="predictions per end-to-end task")
    parser.add_argument("--skip-models", action="store_true", help="skip the model families' throughput")
    parser.add_argument("--quick", action="store_true",
                        help="batch 8 and the kernel steps only (no end-to-end, model or diffusion steps)")
    parser.add_argument("--deadline-s", type=float, default=460.0,
                        help="stop starting steps after this many seconds (default 460: an 8-minute budget)")
    parser.add_argument("--dry-run-cpu", action="store_true",
                        help="run every step on the CPU (Triton interpreter, numba simulator) at a tiny size: "
                             "checks the script itself, measures nothing meaningful")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.quick:
        args.batch = min(args.batch, 8)
        args.skip_e2e = args.skip_models = True
    if args.dry_run_cpu:
        # must precede the first import of the kernels
        os.environ.setdefault("TRITON_INTERPRET", "1")
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
        args.skip_tests = True
    elif not torch.cuda.is_available():
        print("no CUDA device: the device check needs a GPU (or --dry-run-cpu)")
        return 2
    dev = "cpu" if args.dry_run_cpu else "cuda"
    rounds = 10  # timing rounds per kernel; one in the dry run (the interpreters are slow)
    if args.dry_run_cpu:
        args.size = min(args.size, 32)
        args.batch = min(args.batch, 2)
        rounds = 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import icl
    from icl.info import collect

    info = collect()
    report: dict[str, Any] = {
        "icl": icl.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu (dry run)",
        "platform": platform.platform(), "backends": info["backends"], "kernels": {},
        "size": args.size, "batch": args.batch, "quick": args.quick, "skipped": [], "mismatches": {},
    }

    def save() -> None:  # after every step: a run cut short keeps what it measured
        tmp = out / "gpu_check.json.tmp"
        tmp.write_text(json.dumps(report, indent=2, default=str))
        tmp.replace(out / "gpu_check.json")

    def time_left(step: str, needs_s: float = 0.0) -> bool:
        left = args.deadline_s - (time.monotonic() - started)
        if left > needs_s:
            return True
        report["skipped"].append(f"{step}: {left:.0f} s left of --deadline-s {args.deadline_s:.0f}")
        print(f"skipped {step}: deadline", flush=True)
        save()
        return False

    print(f"device: {report['device']}; torch {torch.__version__}")
    for name, st in info["backends"].items():
        print(f"  backend {name}: {'yes' if st['available'] else 'no'} ({st['why']})")
    report["parity_exit"] = None if args.skip_tests or not time_left("parity tests", 60) else run_parity_tests(
        out, timeout=int(min(240, args.deadline_s - (time.monotonic() - started) - 30)))
    save()
    bw = copy_bandwidth(dev)
    nominal = nominal_bandwidth(dev)
    report["copy_bandwidth_Bps"], report["nominal_bandwidth_Bps"] = bw, nominal
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s" + (f" (nominal {nominal / 1e12:.2f} TB/s)" if nominal else ""))

    from icl import ops

    gen = torch.Generator(device=dev).manual_seed(0)
    b, s = args.batch, args.size
    palette = torch.tensor(json.loads((ROOT / "icl" / "data" / "ade20k_palette.json").read_text())["palette"],
                           dtype=torch.uint8)
    images = noisy_palette_images(b, s, palette, gen)
    other = (images.float() + 6 * torch.randn(images.shape, generator=gen, device=dev)).clamp(0, 255).to(torch.uint8)
    pix = b * s * s

    def record(kernel: str, fn: Callable[[], Any], bytes_moved: int, peers: dict[str, Callable[[], Any]],
               reference: Callable[[], Any], exact: bool = True) -> None:
        if not time_left(kernel, 20):
            return
        t = cuda_time(fn, rounds=rounds, warmup=min(2, rounds))
        row: dict[str, Any] = {"images_per_s": b / t, "seconds": t, "bytes_per_s": bytes_moved / t,
                               "fraction_of_copy_bandwidth": bytes_moved / t / bw}
        if nominal:
            row["fraction_of_nominal_bandwidth"] = bytes_moved / t / nominal
        line = f"{kernel:<28} {b / t:>10.0f} img/s  {bytes_moved / t / 1e12:5.2f} TB/s ({100 * bytes_moved / t / bw:4.1f}% of copy)"
        for peer, pfn in peers.items():
            try:
                pt = cuda_time(pfn, rounds=min(3, rounds), warmup=1)
            except Exception as exc:  # a peer that cannot run is reported, not fatal
                row[f"peer_{peer}"] = f"failed: {exc}"
                line += f"  | {peer}: failed ({type(exc).__name__})"
                continue
            row[f"ratio_vs_{peer}"] = pt / t
            line += f"  | {pt / t:6.1f}x {peer}"
        # the output at the measured size against the CPU backend on host copies
        t_check = time.perf_counter()
        why = check_outputs(fn(), reference(), exact)
        row["matches_cpu"] = why is None
        row["check_seconds"] = time.perf_counter() - t_check
        if why is not None:
            report["mismatches"][kernel] = why
        line += "  | matches cpu" if why is None else f"  | MISMATCH vs cpu: {why}"
        report["kernels"][kernel] = row
        save()
        print(line, flush=True)

    host = {name: t.cpu() for name, t in (("images", images), ("other", other))}
    lut_start = time.perf_counter()
    palette_lut = lut_nearest(palette, dev)
    turbo_lut = lut_nearest(torch.from_numpy(ops.TURBO_TABLE.copy()), dev)
    if dev == "cuda":
        torch.cuda.synchronize()
    report["lut_build_seconds"] = (time.perf_counter() - lut_start) / 2
    record("nearest_palette[150]", lambda: ops.nearest_palette(images, palette, backend="triton"),
           pix * 3 + pix * 4, {"lut-gather": lambda: lut_gather(images, palette_lut)},
           lambda: ops.nearest_palette(host["images"], palette, backend="cpu"))
    turbo_img = ops.turbo_encode(torch.rand((b, s, s), generator=gen, device=dev) * 10, 0.0, 10.0)
    turbo_host = turbo_img.cpu()
    record("turbo_decode", lambda: ops.turbo_decode(turbo_img, 0.0, 10.0, backend="triton"),
           pix * 3 + pix * 4, {"lut-gather": lambda: lut_gather(turbo_img, turbo_lut)},
           lambda: ops.turbo_decode(turbo_host, 0.0, 10.0, backend="cpu"))
    with no_tf32():
        record("ssim[rgb]", lambda: ops.ssim(images, other, backend="triton"), 2 * pix * 3,
               {"torch-conv2d-fp32": lambda: torch_ssim(images, other)},
               lambda: ops.ssim(host["images"], host["other"], backend="cpu"), exact=False)
    record("psnr[rgb]", lambda: ops.psnr(images, other, backend="triton"), 2 * pix * 3,
           {"torch": lambda: 10 * torch.log10(255.0 ** 2 / ((images.float() - other.float()) ** 2).flatten(1).mean(1))},
           lambda: ops.psnr(host["images"], host["other"], backend="cpu"), exact=False)
    mask = (torch.nn.functional.avg_pool2d(torch.rand((b, 1, s, s), generator=gen, device=dev), 9, 1, 4) > 0.52)[:, 0]
    values = torch.rand((b, s, s), generator=gen, device=dev)
    peers: dict[str, Callable[[], Any]] = {}
    try:
        import cupy
        from cupyx.scipy import ndimage as cnd

        cmask = cupy.asarray(mask)
        structure = cupy.ones((1, 3, 3), dtype=bool)  # 8-connected within each image, none across
        peers["cupyx-label(no stats)"] = lambda: cnd.label(cmask, structure=structure)
    except ImportError:
        print("  (cupy not installed: no cupyx.scipy.ndimage.label peer)")
    mask_host, values_host = mask.cpu(), values.cpu()
    record("connected_components+stats", lambda: tuple(ops.connected_components(mask, 8, values, backend="cuda")),
           pix * (1 + 4 + 4), peers,
           lambda: tuple(ops.connected_components(mask_host, 8, values_host, backend="cpu")), exact=False)
    n_boxes = 4096 if dev == "cuda" else 16
    boxes = torch.rand((n_boxes, 4), generator=gen, device=dev) * 512
    boxes[:, 2:] += boxes[:, :2]
    boxes_host = boxes.cpu()
    record(f"box_iou[{n_boxes}x{n_boxes}]", lambda: ops.box_iou(boxes, boxes, backend="triton"), n_boxes ** 2 * 4,
           {"torch": lambda: ops.box_iou(boxes, boxes, backend="reference")},
           lambda: ops.box_iou(boxes_host, boxes_host, backend="cpu"))
    if not args.skip_tests and time_left("device evaluation tests", 60):
        report["device_eval_exit"] = run_parity_tests(
            out, ["tests/benchmarks/vibe/tasks/test_device_path.py", "tests/run/execution/test_device_run.py::test_device_runs_match_the_host_run"],
            name="device_eval", timeout=150)
    if not args.skip_e2e and time_left("end-to-end", 90):
        from bench._device_eval import measure, print_report

        report["end_to_end"] = measure(dev, n=args.e2e_samples, size=s, batch=b)
        print_report(report["end_to_end"])
        save()
    if not args.skip_e2e and time_left("end-to-end runs", 150):
        from bench import gpu_run

        gpus = torch.cuda.device_count() if dev == "cuda" else 0
        try:
            report["end_to_end_runs"] = gpu_run.run(out / "runs", dev, dry_run=args.dry_run_cpu,
                                                    ray_workers=2 if gpus >= 2 else 0)
        except Exception as exc:  # noqa: BLE001 - reported, the other sections stand
            print(f"[gpu_run] failed: {type(exc).__name__}: {exc}", flush=True)
            report["end_to_end_runs"] = {"error": f"{type(exc).__name__}: {exc}"}
        save()
    if not args.skip_models and time_left("models", 120):  # full-size model families with random weights (small ones on the dry run)
        from bench import gpu_models

        report["models"] = gpu_models.run(out, dev, dry_run=args.dry_run_cpu)
        from bench import gpu_diffusion

        report["diffusion"] = (gpu_diffusion.run(out, dev, scale="tiny", batches=(1, 2), steps=3, resolution=64, rounds=1)
                               if args.dry_run_cpu else gpu_diffusion.run(out, dev))
        report["generators"] = generator_models(out, dev, args.dry_run_cpu)
    report["seconds"] = time.monotonic() - started
    save()
    print(f"wrote {out / 'gpu_check.json'} ({report['seconds']:.0f} s)")
    failed = report["parity_exit"] or report.get("device_eval_exit") or report["mismatches"]
    return 1 if failed else 0


def generator_models(out: Path, dev: str, dry_run: bool) -> dict[str, Any]:
    """The image generators at full size with random weights (``bench/gpu_generators.py``); a
    failure is reported in the JSON and does not stop the rest of the check."""
    from bench import gpu_generators

    try:
        return (gpu_generators.run(out, dev, scale="tiny", batches=(1, 2)) if dry_run
                else gpu_generators.run(out, dev))
    except Exception as exc:  # noqa: BLE001 - reported, the other sections stand
        print(f"[gpu_generators] failed: {type(exc).__name__}: {exc}", flush=True)
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    raise SystemExit(main())
