"""VIF-Bench: VI rendering tasks/s, judge-answer parsing answers/s, the judge path's questions/s
on a tiny chat model (batched against one at a time), and the ``--fast`` run through the runner.

- Rendering: every VI image (layout, orientations, arrows) of 64 synthetic tasks at 512 px, the
  benchmark's default. Floor: >= 50 tasks/s.
- Parsing: 3,000 judge answers (clean JSON, JSON needing the repair, the source's line format).
  Floor: >= 2,000 answers/s.
- Judge: 8 of the benchmark's own judge requests (references, VI images at 128 px, the output,
  the rubric; 6 new tokens) through ``hf-vlm`` on a tiny random LLaVA (built here, nothing
  downloaded), one batched ``predict`` beside a batch-1 loop; answers identical. Floor: batched
  >= 1.2x the loop.
- ``python -m icl.run vif --fast``: under 30 s.

Not here: a tiny Qwen-Image-Edit-Plus as the generator (its processor needs torchvision, which
this project does not install).
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from bench._peer import compare, fast_run_seconds, report
from icl.benchmarks.vif.benchmark import VIF
from icl.benchmarks.vif.render import vi_images
from icl.benchmarks.vif.rubric import parse
from icl.benchmarks.vif.synthetic import SyntheticImages
from icl.models.vlm.hf import HFVisionLanguage
from icl.models.vlm.tiny import build_llava

N = 8
FLOOR = 1.2


def test_render_tasks_per_second():
    tasks = SyntheticImages(64).tasks
    t0 = time.perf_counter()
    n_images = sum(len(vi_images(t, 512)) for t in tasks)
    seconds = time.perf_counter() - t0
    report(f"vif rendering: {len(tasks) / seconds:,.0f} tasks/s ({n_images / seconds:,.0f} VI images/s at 512 px)")
    assert len(tasks) / seconds >= 50


def test_parse_answers_per_second():
    full = {"text_instruction_following": 7, "reference_consistency": 8, "visual_instruction_adherence": 5,
            "visual_instruction_cleanliness": 9, "scene_coherence": 6, "visual_quality": 8,
            "boxes_left": 0, "marks_visible": False}
    answers = ["Reasoning: fine.\n" + json.dumps(full),
               str(full).replace("False", "False,"),  # Python literal with a trailing comma: repaired
               "Text Instruction Following: 7.\nReference Consistency: 8.\nVision Instruction Adherence: 5.\n"
               "Visual Instruction Residue: 9.\nScene Coherence: 6.\nVisual Quality: 8."] * 1000
    t0 = time.perf_counter()
    verdicts = [parse(a) for a in answers]
    seconds = time.perf_counter() - t0
    assert all(v.invalid == 0 for v in verdicts)
    report(f"vif judge parsing: {len(answers) / seconds:,.0f} answers/s")
    assert len(answers) / seconds >= 2000


@pytest.fixture(scope="module")
def tiny_llava(tmp_path_factory):
    model = HFVisionLanguage(weights=str(build_llava(tmp_path_factory.mktemp("bench-vif") / "llava",
                                                     max_positions=4096)), max_batch=N)
    model.load("cpu")
    return model


def test_bench_judge_batched_vs_loop(benchmark, tiny_llava):
    bench = VIF({**VIF.fast_config(), "synthetic_tasks": N, "variants": "visual", "judge_tokens": 6})
    reqs = []
    for item in bench.items():
        out = np.full((64, 64, 3), 128, np.uint8)
        reqs += bench.judge_requests(item, out)
    assert len(reqs) == N
    assert tiny_llava.predict(reqs) == [tiny_llava.predict([r])[0] for r in reqs]
    ratio = compare(benchmark, lambda: tiny_llava.predict(reqs), lambda: [tiny_llava.predict([r]) for r in reqs],
                    peer_name="judge questions one at a time", items=N, rounds=2, peer_rounds=2)
    assert ratio >= FLOOR, f"judge questions batched: {ratio:.2f}x one at a time, floor {FLOOR}x"


def test_fast_run_seconds(tmp_path):
    fast_run_seconds("vif", tmp_path / "out")
