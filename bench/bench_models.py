"""Visual in-context model families at small configurations on the CPU (random weights):
a batch of 8 beside a loop of 8 single calls, and bf16 beside fp32 (images/s, peak RSS, ratios).
The full-size GPU table is ``bench/gpu_models.py``."""

from __future__ import annotations

import pytest
import torch

from bench.gpu_models import make_model, measure, requests

FAMILIES = ["image-analogies", "painter", "mae-vqgan", "lvm"]


@pytest.mark.parametrize("family", FAMILIES)
def test_batch8_vs_loop_and_bf16_vs_fp32(benchmark, family):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny layers: a thread team only adds wake-ups on a shared CPU
    try:
        model = make_model(family, "small", "cpu")
        model.load("cpu")
        reqs = requests(8, size=(64, 64))
        batch = measure(model, reqs, "cpu", rounds=1)
        loop = measure(model, reqs, "cpu", rounds=1, call=lambda: [model.predict([r]) for r in reqs])
        benchmark.pedantic(lambda: model.predict(reqs), rounds=1, iterations=1, warmup_rounds=0)
        bf16 = None
        if family != "image-analogies":  # weight-free: no precision to change
            model.net = model.net.to(torch.bfloat16)
            if hasattr(model.net, "vqgan"):
                model.net.vqgan.float()  # LVM keeps its tokenizer in fp32, as the official code
            model.precision = "bf16"
            bf16 = measure(model, reqs, "cpu", rounds=1)
    finally:
        torch.set_num_threads(threads)
    line = (f"\n[{family}] batch 8: {batch['images_per_s']:.1f} img/s (peak {batch['peak_mb']:.0f} MB), "
            f"loop of 8: {loop['images_per_s']:.1f} img/s, batch/loop {batch['images_per_s'] / loop['images_per_s']:.2f}x")
    if bf16 is not None:
        line += (f"; bf16 batch 8: {bf16['images_per_s']:.1f} img/s (peak {bf16['peak_mb']:.0f} MB), "
                 f"bf16/fp32 {bf16['images_per_s'] / batch['images_per_s']:.2f}x")
    print(line)
    benchmark.extra_info.update(batch8=batch, loop8=loop, bf16_batch8=bf16)
    assert batch["images_per_s"] > 0 and loop["images_per_s"] > 0


_LOAD_CHILD = r"""
import json, sys, torch
from pathlib import Path
import transformers  # imported before the baseline: imports (~200 MB for the model classes) are not the load
from transformers import LlamaForCausalLM
import accelerate

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no " + key)

folder, how = Path(sys.argv[1]), sys.argv[2]
from icl.models.vicl.lvm import load_llm
base = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")  # peak RSS (VmHWM) restarts from here
if how == "icl":
    llm = load_llm(folder, torch.bfloat16)
else:  # the former path: built in float32, then cast
    llm = transformers.LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32).to(torch.bfloat16)
print(json.dumps({"peak_over_base": status("VmHWM") - base}))
"""


@pytest.mark.slow
def test_lvm_bf16_load_peak_host_memory(tmp_path):
    """Peak host memory of loading an LVM decoder (LLaMA, ~120M parameters) in bf16 through
    ``icl`` against the bf16 weights' size: from a bf16 file and from a float16 one (LVM's
    converter, ``EasyLM/models/llama/convert_easylm_to_hf.py``, saves float16), beside the
    former build-in-fp32-then-cast path. Each load runs in its own process."""
    import json
    import os
    import subprocess
    import sys

    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=8292, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, max_position_embeddings=4096)
    model = LlamaForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    model.to(torch.bfloat16).save_pretrained(str(tmp_path / "bf16"))
    model.to(torch.float16).save_pretrained(str(tmp_path / "fp16"))
    del model
    weights = 2 * n_params
    env = dict(os.environ, PYTHONPATH=os.getcwd(), OMP_NUM_THREADS="1")
    ratios = {}
    for file, how in (("bf16", "icl"), ("fp16", "icl"), ("fp16", "fp32-then-cast")):
        out = subprocess.run([sys.executable, "-c", _LOAD_CHILD, str(tmp_path / file), how], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        ratios[f"{file} file, {how}"] = json.loads(out.stdout.strip().splitlines()[-1])["peak_over_base"] / weights
    print(f"\n[lvm load] {n_params / 1e6:.0f}M parameters, bf16 weights {weights / 2**20:.0f} MiB; peak host memory "
          "/ bf16 weights: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    assert ratios["bf16 file, icl"] <= 1.3 and ratios["fp16 file, icl"] <= 1.3
