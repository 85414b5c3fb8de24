"""Runner overhead per item with an instant model, and store throughput.

- vibe at 256x256 (segmentation, edges, depth, keypoints on a generated 256^2 dataset) and best50
  (a synthetic package, 8 classes x 8 queries x 4 K) with an instant model, run by ``icl.run.run`` into a fresh store,
  beside the bare work of the same items in the same process (requests built, the model
  called, the benchmark's ``score_batch``; no store, no cache keys, no files). The
  difference per item is what the runner adds (content hashing, PNG responses, SQLite,
  summaries and files).
- Store: responses (256^2 PNG bodies) and scores written in batches of 64 per second.
"""

from __future__ import annotations

import io
import tempfile
from dataclasses import replace
import time
from pathlib import Path

import pytest

from icl.run import ModelSpec, RunConfig, run


def _vibe_data(root: Path) -> Path:
    """A canonical 64-sample dataset of 256x256 procedural indoor scenes."""
    from icl.benchmarks.vibe.builtin import BUILTINS
    from icl.benchmarks.vibe.builtin.scenes import INDOOR, make_scene
    from icl.data.seeds import ANY, rng
    from icl.data.writer import DatasetWriter

    out = root / "scenes-256"
    if not (out / "meta.json").is_file():
        meta = replace(BUILTINS["scenes-a"].meta("scenes-a", "bench-1"), name="scenes-256")
        writer = DatasetWriter(out, meta)
        for k in range(64):
            sid = f"s{k:04d}"
            writer.add(sid, **make_scene(INDOOR, rng("bench", "scenes-256", ANY, sid, "render"), 256, 256))
    return out


def _bare(config: RunConfig, model_name: str) -> tuple[float, int]:
    """The same items through request -> predict -> score_batch, no runner."""
    from icl.models import get_model
    from icl.run.execution.responses import to_uint8_image
    from icl.run.planning.setup import open_benchmark

    bench = open_benchmark(config)
    items = list(bench.items())
    model = get_model(model_name)
    model.load("cpu")
    t0 = time.perf_counter()
    bs = model.batch_size
    for start in range(0, len(items), bs):
        batch = items[start:start + bs]
        reqs = [bench.request(it, model.privileged) for it in batch]
        outs = model.predict(reqs)
        if not all(isinstance(o, str) for o in outs):
            outs = [to_uint8_image(o) for o in outs]
        bench.score_batch(batch, outs, [[] for _ in batch])
    return time.perf_counter() - t0, len(items)


def _runner(config: RunConfig) -> tuple[float, int]:
    t0 = time.perf_counter()
    outcome = run(config, stdout=io.StringIO(), stderr=io.StringIO())
    assert outcome.exit_code == 0
    return time.perf_counter() - t0, outcome.stats.computed


@pytest.mark.parametrize("bench_name", ["vibe", "best50"])
def test_runner_overhead_per_item(benchmark, bench_name, tmp_path):
    if bench_name == "vibe":
        _vibe_data(tmp_path / "data")
        options = dict(datasets=("scenes-256",), tasks=("segmentation", "edges", "depth", "keypoints"))
        model, fast = "identity", False
    else:
        from icl.benchmarks.best50.synthetic import write_package

        options = {"package": write_package(tmp_path / "package", n_per_class=8, seed=0)}
        model, fast = "oracle", False
    counter = iter(range(1000))

    def config() -> RunConfig:
        return RunConfig(bench_name, options=dict(options), models=[ModelSpec(model)], fast=fast,
                         data_root=tmp_path / "data", out=tmp_path / f"run{next(counter)}", plots=False,
                         progress=False)

    _runner(config())  # warm: data generated, kernels loaded
    bare_s, n = min(_bare(config(), model) for _ in range(2))
    result = {}

    def ours() -> None:
        result["t"] = _runner(config())

    benchmark.pedantic(ours, rounds=2, iterations=1)
    runner_s = benchmark.stats.stats.min
    per_item = (runner_s - bare_s) / n
    benchmark.extra_info.update(items=n, runner_s=runner_s, bare_s=bare_s, overhead_ms_per_item=per_item * 1e3,
                                ratio_vs_bare=runner_s / bare_s)
    print(f"\n[{bench_name}] {n} items: runner {runner_s * 1e3 / n:.2f} ms/item, bare loop {bare_s * 1e3 / n:.2f} "
          f"ms/item, runner overhead {per_item * 1e3:.2f} ms/item (ratio {runner_s / bare_s:.2f}x of the bare work)")


def test_store_throughput(benchmark):
    from icl.run.execution.responses import encode_png
    from icl.store import Response, Score, ScoreKey, Store

    import cv2
    from skimage import data

    img = cv2.resize(data.astronaut(), (256, 256), interpolation=cv2.INTER_AREA)  # a photograph's PNG size
    body = encode_png(img)
    n, batch = 2048, 64
    folder = tempfile.TemporaryDirectory()
    counter = iter(range(1000))

    def write() -> None:
        with Store(Path(folder.name) / f"s{next(counter)}.sqlite") as store:
            for start in range(0, n, batch):
                rs = [Response(f"h{i}", "m", "ok", "png", body, seconds=0.0, run_id="r") for i in range(start, start + batch)]
                ss = [Score(ScoreKey("b", "p", f"k{i}", "m", "", "1"), "ok", {"x": 1.0, "y": 0.5}, run_id="r")
                      for i in range(start, start + batch)]
                store.write_batch(rs, [(f"k{i}", "m", "answer:0", f"h{i}") for i in range(start, start + batch)], ss)

    benchmark.pedantic(write, rounds=3, iterations=1)
    s = benchmark.stats.stats.median
    benchmark.extra_info.update(responses_per_s=n / s, scores_per_s=n / s, png_bytes=len(body))
    print(f"\n[store] {n} responses ({len(body)} B PNG each) + {n} scores + links in batches of {batch}: "
          f"{n / s:.0f} items/s ({s * 1e3:.1f} ms)")
    folder.cleanup()
