"""What the runner adds to a generated image over the adapter alone (issue 39: 470-490 ms against
344 ms per image, tiny Stable Diffusion on the CPU).

The tiny Stable Diffusion folder of the tests (``tests/models/t2i/tiny_t2i.py``, 16 x 16 px,
2 steps, fp32, one torch thread) generates VL-ICL's built-in text-to-image items (``--variant
text``) through ``python -m icl.run``'s ``main`` into a fresh folder; the runner's own compute
records give the time of its execute phase less the model's load and the judge's stage, per
generated image. Beside it, in the same process, the same adapter object type answers requests of
the same count, batch, sizes and prompt lengths (CLIP truncates every prompt to its 16 tokens, so
the diffusion work is the same) with ``predict`` alone. The ratio, runner per image over adapter
per image, less 1, is the runner's overhead (target: below 10 %).

Run: ``python -m pytest bench/bench_generation_overhead.py -q -s`` (or ``python
bench/bench_generation_overhead.py``); ``--profile FILE`` on the command of the run inside it
shows where the time goes (``python -m pstats``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERIES = 8  # per task and shot count: 2 tasks x 2 shot counts x 8 = 32 images
BATCH = 4
ROUNDS = 3


def measure(work: Path, profile: Path | None = None) -> dict[str, float]:
    import torch

    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "models" / "t2i")]
    from tiny_t2i import build_sd

    from icl.models import GenerationRequest, get_model
    from icl.run.__main__ import main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sd = build_sd(work / "sd")
        runner = []
        for r in range(ROUNDS):
            out = work / f"run{r}"
            args = ["vlicl", "--fast", "--models", f"diffusers-t2i:weights={sd},steps=2,batch_size={BATCH}",
                    "--tasks", "open_t2i_mi,cobsat", "--variant", "text", "--seeds", "0", "--shots", "0,2",
                    "--queries", str(QUERIES), "--out", str(out), "--data-root", str(work / "data"), "--no-plots",
                    "--no-progress", "--log-samples", "false"] + (["--profile", str(profile)] if profile and r == 0 else [])
            assert main(args) == 0
            meta = json.loads((out / "results.json").read_text())
            stages = {(c["model"], c["stage"]): c for c in meta["compute"]}
            gen = [c for (m, s), c in stages.items() if m.startswith("diffusers-t2i") and s == "model"][0]
            load = [c for (m, s), c in stages.items() if m.startswith("diffusers-t2i") and s == "load"][0]
            judge = sum(c["wall_s"] for (m, s), c in stages.items() if s == "judge")
            images = gen["samples"]
            runner.append(((meta["timings"]["execute_s"] - load["wall_s"] - judge) / images, gen["wall_s"] / images))
        sizes = [(16, 16)] * images
        model = get_model("diffusers-t2i", weights=str(sd), steps=2, batch_size=BATCH)
        model.load("cpu")
        prompt = "in context examples , induce the concept and generate the image of the given class . a kiki"
        reqs = [GenerationRequest(f"r{i}", (prompt,), size=s, seed=i) for i, s in enumerate(sizes)]
        model.predict(reqs[:BATCH])  # warm
        alone = []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            for i in range(0, len(reqs), BATCH):
                model.predict(reqs[i:i + BATCH])
            alone.append((time.perf_counter() - t0) / len(reqs))
    finally:
        torch.set_num_threads(threads)
    per_image = min(r[0] for r in runner)
    in_model = min(r[1] for r in runner)
    adapter = min(alone)
    return {"images": images, "runner_ms": 1e3 * per_image, "runner_model_stage_ms": 1e3 * in_model,
            "adapter_ms": 1e3 * adapter, "overhead": per_image / adapter - 1}


def report(result: dict[str, float]) -> str:
    return (f"generation overhead: {result['images']} images, runner {result['runner_ms']:.1f} ms/image "
            f"(its model stage {result['runner_model_stage_ms']:.1f}), adapter alone {result['adapter_ms']:.1f} "
            f"ms/image: overhead {100 * result['overhead']:+.1f} % (target < 10 %)")


def test_generation_overhead(tmp_path):
    from bench._peer import RESULTS

    line = report(measure(tmp_path))
    RESULTS.append(line)
    print(line)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(report(measure(Path(tmp), Path(sys.argv[1]) if len(sys.argv) > 1 else None)))
