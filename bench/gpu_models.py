"""Throughput of the visual in-context models at their full (official) sizes, random weights.

``run(out_dir, device)`` measures, per model family (Painter ViT-L 896x448, MAE-VQGAN ViT-L +
VQGAN f16-1024, LVM 7B and DeLVM 1B over the open-muse f16-8192 tokenizer), images/s and peak
device memory at batch 1, 8 and 32 in bf16, against fp32 at batch 1; writes
``gpu_models.json`` into ``out_dir`` and returns the same dict. ``python bench/gpu_models.py
--dry-run-cpu`` runs the same code path on small configurations on the CPU (seconds).
Random weights are fine here: throughput does not depend on the values (LVM/DeLVM always
generate their 256 tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icl.models.requests import AnalogyRequest  # noqa: E402

FULL_BATCHES = (1, 8, 32)
DRY_BATCHES = (1, 2)

# small configurations: CPU benchmarks and the dry run (same code path as the full sizes)
SMALL = {
    "painter": dict(img_size=(128, 64), patch_size=16, embed_dim=128, depth=6, num_heads=4, decoder_embed_dim=32,
                    pretrain_img_size=64, merge_index=2, feature_indices=(2, 3, 4, 5)),
    "mae-vqgan": dict(img_size=128, patch_size=16, embed_dim=128, depth=4, num_heads=4, decoder_embed_dim=64,
                      decoder_depth=2, decoder_num_heads=4,
                      vqgan=dict(resolution=128, ch=32, ch_mult=(1, 1, 1, 2, 2), num_res_blocks=1,
                                 attn_resolutions=(8,), z_channels=32, n_embed=256, embed_dim=32)),
    "lvm": dict(llm=dict(vocab_size=300, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=512),
                vqgan=dict(resolution=64, ch=32, ch_mult=(1, 1, 1, 1, 2), num_res_blocks=1, attn_resolutions=(4,),
                           z_channels=32, n_embed=256, embed_dim=16, pixel_range="zero_one")),
}
FULL_LLM = {
    # EasyLM llama_model.py 'vqlm_7b' (LVM) and DeLVM's 1B teacher (InternLM configs/kd_1b_to_300m.py)
    "lvm": dict(vocab_size=8292, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                num_attention_heads=32, max_position_embeddings=4096, rms_norm_eps=1e-6),
    # InternLM (convert2hf.py): q/k/v/o biases; intermediate = compute_intermediate_size(2048) = 5632
    "delvm": dict(vocab_size=8192, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                  num_attention_heads=16, max_position_embeddings=2048, rms_norm_eps=1e-6, attention_bias=True),
}
# LVM's published open-muse tokenizer (Emma02/vqvae_ckpts config.json; 146,244,675 parameters = 585 MB)
MUSE_FULL = dict(resolution=256, ch=128, ch_mult=(1, 2, 2, 4, 6), num_res_blocks=2, attn_resolutions=(),
                 z_channels=64, n_embed=8192, embed_dim=64, pixel_range="zero_one", mid_attention=False,
                 attn_min_blocks=2)


def _random_(net: torch.nn.Module, seed: int) -> torch.nn.Module:
    gen = torch.Generator(device=next(net.parameters()).device).manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen, device=p.device, dtype=p.dtype) * 0.02)
    return net


def make_model(family: str, size: str, device: str) -> Any:
    """An adapter of ``family`` ("image-analogies", "painter", "mae-vqgan", "lvm", "delvm") at
    ``size`` ("small" or "full") whose network is built with random weights on ``device``."""
    if family == "image-analogies":
        from icl.models.vicl.image_analogies import ImageAnalogies

        return ImageAnalogies()
    with torch.device(device):
        if family == "painter":
            from icl.models.vicl.painter import Painter, PainterConfig, PainterNet

            model: Any = Painter(config=SMALL["painter"] if size == "small" else None)
            net = _random_(PainterNet(PainterConfig.from_overrides(model.config_overrides)), 0)
        elif family == "mae-vqgan":
            from icl.models.vicl.mae_vqgan import MAEVQGAN, MAEVQGANConfig, MAEVQGANNet

            model = MAEVQGAN(config=SMALL["mae-vqgan"] if size == "small" else None)
            net = _random_(MAEVQGANNet(MAEVQGANConfig.from_overrides(model.config_overrides)), 0)
        elif family in ("lvm", "delvm"):
            from transformers import LlamaConfig, LlamaForCausalLM

            from icl.models.vicl._vqgan import VQGAN, VQGANConfig
            from icl.models.vicl.lvm import LVM, DeLVM, SentenceModel

            model = (LVM if family == "lvm" else DeLVM)()
            small = SMALL["lvm"]
            llm_cfg = small["llm"] if size == "small" else FULL_LLM[family]
            vq_cfg = small["vqgan"] if size == "small" else MUSE_FULL
            llm = LlamaForCausalLM(LlamaConfig(**llm_cfg, num_key_value_heads=llm_cfg["num_attention_heads"]))
            net = SentenceModel(_random_(llm, 0), _random_(VQGAN(VQGANConfig(**vq_cfg)), 1))
        else:
            raise ValueError(f"unknown model family {family!r}")
    model.build = lambda: net  # random weights instead of the official files
    return model


def requests(n: int, size: tuple[int, int] = (128, 128), shots: int = 1) -> list[AnalogyRequest]:
    rng = np.random.default_rng(0)

    def img() -> np.ndarray:
        return rng.integers(0, 256, (*size, 3), dtype=np.uint8)

    return [AnalogyRequest("colorization", "bench", f"q{i}", [img() for _ in range(shots)],
                           [img() for _ in range(shots)], img(), size, seed=i) for i in range(n)]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    elif os.path.exists("/proc/self/clear_refs"):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets the process's peak RSS (VmHWM)
        except OSError:
            pass


def _peak_bytes(device: str) -> Optional[int]:
    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated())
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def measure(model: Any, reqs: list[AnalogyRequest], device: str, rounds: int = 2,
            call: Optional[Callable[[], Any]] = None) -> dict[str, Any]:
    """Median seconds of ``model.predict(reqs)`` (or ``call``) after one warm-up, images/s, and
    the peak memory of the timed calls (device memory on CUDA, process peak RSS on the CPU)."""
    fn = call or (lambda: model.predict(reqs))
    fn()
    _sync(device)
    _reset_peak(device)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    s = float(np.median(times))
    peak = _peak_bytes(device)
    return {"seconds": s, "images_per_s": len(reqs) / s, "peak_mb": None if peak is None else peak / 2 ** 20}


def run(out_dir: Path, device: str, dry_run: bool = False, families: Optional[list[str]] = None) -> dict[str, Any]:
    """Full-size (or, with ``dry_run``, small) throughput table; see the module docstring."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    size = "small" if dry_run else "full"
    batches = DRY_BATCHES if dry_run else FULL_BATCHES
    families = families or ["painter", "mae-vqgan", "lvm", "delvm"]
    result: dict[str, Any] = {"device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
                              "size": size, "models": {}}
    for family in families:
        entry: dict[str, Any] = {}
        try:
            model = make_model(family, size, device)
            model.precision = "fp32"
            model.load(device)
            entry["fp32_b1"] = measure(model, requests(1), device)
            model.net = model.net.to(torch.bfloat16)  # cast in place of a second random build
            if hasattr(model.net, "vqgan"):
                model.net.vqgan.float()  # LVM/DeLVM keep their tokenizer in fp32, as the official code
            model.precision = "bf16"
            for b in batches:
                entry[f"bf16_b{b}"] = measure(model, requests(b), device)
            base = entry["fp32_b1"]["images_per_s"]
            entry["speedup_vs_fp32_b1"] = {k: v["images_per_s"] / base for k, v in entry.items() if k.startswith("bf16")}
        except Exception as exc:  # one family failing must not lose the others' numbers
            entry["error"] = f"{type(exc).__name__}: {exc}"
        result["models"][family] = entry
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        print(f"{family:10s} " + json.dumps(entry, default=float)[:400], flush=True)
    (out_dir / "gpu_models.json").write_text(json.dumps(result, indent=2, default=float))
    return result


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("gpu_models_out"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--dry-run-cpu", action="store_true", help="small configurations on the CPU")
    p.add_argument("--families", help="comma-separated subset of painter,mae-vqgan,lvm,delvm")
    args = p.parse_args(argv)
    families = args.families.split(",") if args.families else None
    result = run(args.out, "cpu" if args.dry_run_cpu else args.device, dry_run=args.dry_run_cpu, families=families)
    return 1 if any("error" in v for v in result["models"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
