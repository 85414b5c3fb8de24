"""The real runner over the neural visual in-context adapters on tiny weights in their
official layouts (LVM: LLaMA + open-muse folders; DeLVM: InternLM + open-muse with the
published structural settings; SegGPT: a transformers folder; VisualCloze: a diffusers
pipeline folder): ``python -m icl.run vibe
--fast`` computes every item of every model, none failed."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _official import TINY_INTERNLM, internlm_folder, muse_folder, visualcloze_folder
from _tiny import MUSE, lvm_folders

ROOT = Path(__file__).resolve().parents[3]


def seggpt_folder(folder: Path) -> Path:
    from transformers import SegGptConfig, SegGptForImageSegmentation

    from test_vicl_seggpt import TINY

    SegGptForImageSegmentation(SegGptConfig(**TINY)).save_pretrained(str(folder))
    return folder


@pytest.mark.slow
def test_vibe_fast_computes_every_item(tmp_path, builtin_root):
    lvm_llm, lvm_vq = lvm_folders(tmp_path / "lvm", max_positions=512)
    delvm_llm = internlm_folder(tmp_path / "delvm" / "llm", dict(TINY_INTERNLM, max_position_embeddings=512))
    delvm_vq = muse_folder(tmp_path / "delvm" / "vqgan", dict(MUSE, attn_resolutions=[], no_attn_mid_block=True))
    seggpt = seggpt_folder(tmp_path / "seggpt")
    cloze = visualcloze_folder(tmp_path / "visualcloze")
    models = (f"lvm:weights={lvm_llm},vqgan_weights={lvm_vq},delvm:weights={delvm_llm},vqgan_weights={delvm_vq},"
              f"seggpt:weights={seggpt},visualcloze:weights={cloze},steps=2")
    cmd = [sys.executable, "-m", "icl.run", "vibe", "--fast", "--models", models, "--out", str(tmp_path / "run"),
           "--data-root", str(builtin_root), "--device", "cpu", "--no-plots", "--no-progress"]
    env = dict(os.environ, ICL_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = re.search(r"vibe: (\d+) items computed, (\d+) already in the store, (\d+) failed", proc.stdout + proc.stderr)
    assert summary, (proc.stdout + proc.stderr)[-3000:]
    computed, _, failed = map(int, summary.groups())
    assert failed == 0 and computed > 0 and computed % 4 == 0  # four models, the same items each
