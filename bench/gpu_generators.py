"""GPU check of the image generators (``diffusers-t2i``, ``janus``) at full size, random weights.

``run(out_dir, device)`` writes randomly initialised full-size folders (Stable Diffusion 1.5
shapes through ``icl.models.vicl._diffusion_random``; Janus-Pro-1B shapes: SigLIP-L tower,
2048-wide 24-layer Llama, 16384-code VQ head, 384 px and 576 image tokens), loads them through
the adapters' real ``from_pretrained`` path and measures images/s and peak device memory in
bf16 at batch 1, 4 and 8 against fp32 at batch 1 (20 steps at 512 px for Stable Diffusion; the
576-token recipe for Janus). Random weights: throughput only, the images mean nothing.
Results go to ``<out_dir>/gpu_generators.json``. ``python bench/gpu_generators.py --out DIR``
runs it on ``cuda``; ``--dry-run-cpu`` runs the same path on tiny configurations in seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from icl.models import GenerationRequest, get_model  # noqa: E402
from icl.models.vicl._diffusion_random import write_random_sd_folder  # noqa: E402
from tests.models.t2i.tiny_t2i import JANUS_CHAT_TEMPLATE, JANUS_PAD, build_janus, janus_tokenizer  # noqa: E402

PROMPTS = ["a red star on sand", "two blue circles", "a green square", "a yellow triangle on grass"]


def write_janus_pro_1b(path: Path, device: str, dtype: torch.dtype) -> Path:
    """A random Janus-Pro-1B-shaped folder (transformers format) with a word-level tokenizer
    carrying the release's special tokens (the text vocabulary is the release's 102400)."""
    from transformers import (JanusConfig, JanusForConditionalGeneration, JanusImageProcessorPil, JanusProcessor,
                              LlamaConfig)

    tok = janus_tokenizer()
    text = LlamaConfig(vocab_size=102400, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                       num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=16384,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    config = JanusConfig(text_config=text, vision_config={}, vq_config={"image_token_embed_dim": 2048},
                         image_token_id=tok.convert_tokens_to_ids("<image_placeholder>"))
    with torch.device(device):
        model = JanusForConditionalGeneration(config).to(dtype).eval()
    model.generation_config.pad_token_id = tok.convert_tokens_to_ids(JANUS_PAD)
    model.generation_config.generation_kwargs = {"boi_token_id": tok.convert_tokens_to_ids("<begin_of_image>")}
    model.save_pretrained(path)
    processor = JanusProcessor(image_processor=JanusImageProcessorPil(image_mean=[0.5] * 3, image_std=[0.5] * 3),
                               tokenizer=tok, chat_template=JANUS_CHAT_TEMPLATE, use_default_system_prompt=True)
    processor.save_pretrained(path)
    return path


def _requests(batch: int) -> list[GenerationRequest]:
    return [GenerationRequest(f"g{i}", (PROMPTS[i % len(PROMPTS)],), size=(256, 256), seed=i) for i in range(batch)]


def _measure(model: Any, batch: int, device: str) -> dict[str, float]:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    model.predict(_requests(batch))
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) if device.startswith("cuda") else 0
    return {"batch": batch, "seconds": seconds, "images_per_s": batch / seconds, "peak_memory_gib": peak / 2 ** 30}


def run(out_dir: Path | str, device: str = "cuda", *, scale: str = "full",
        batches: Sequence[int] = (1, 4, 8)) -> dict[str, Any]:
    """Images/s and peak memory per family: fp32 batch 1, then bf16 at each of ``batches``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build = device if device.startswith("cuda") else "cpu"
    start = time.perf_counter()
    if scale == "full":
        sd = write_random_sd_folder(out / "sd15", "full", dtype=torch.bfloat16, device=build)
        janus = write_janus_pro_1b(out / "janus-pro-1b", build, torch.bfloat16)
        families = {"diffusers-t2i": (sd, {"steps": 20, "height": 512, "width": 512}),
                    "janus": (janus, {})}
    else:
        sd = write_random_sd_folder(out / "sd-tiny", "tiny")
        families = {"diffusers-t2i": (sd, {"steps": 2, "height": 64, "width": 64}),
                    "janus": (build_janus(out / "janus-tiny"), {})}
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
                              "scale": scale, "build_s": time.perf_counter() - start, "models": {}}
    for name, (folder, args) in families.items():
        rows = []
        for precision, sizes in (("fp32", (1,)), ("bf16", tuple(batches))):
            size_arg = {"batch_size": max(sizes)} if name == "diffusers-t2i" else {"max_batch": max(sizes)}
            model = get_model(name, weights=str(folder), precision=precision, **args, **size_arg)
            model.load(device)
            _measure(model, 1, device)  # warm-up: kernel selection, allocator
            for b in sizes:
                rows.append({"precision": precision, **_measure(model, b, device)})
                r = rows[-1]
                print(f"[gpu_generators] {name} {precision} batch {b}: {r['images_per_s']:.2f} images/s, "
                      f"peak {r['peak_memory_gib']:.2f} GiB", flush=True)
            del model
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        base = rows[0]["images_per_s"]
        result["models"][name] = {"arguments": args, "rows": rows,
                                  "speedup_vs_fp32_batch1": {f"{r['precision']}/{r['batch']}": r["images_per_s"] / base
                                                             for r in rows}}
    (out / "gpu_generators.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu_generators_out", help="folder for the random weights and the JSON")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dry-run-cpu", action="store_true", help="tiny configurations on the CPU (seconds)")
    args = p.parse_args(argv)
    if args.dry_run_cpu:
        run(args.out, "cpu", scale="tiny", batches=(1, 2))
    else:
        run(args.out, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
