import csv
import tracemalloc

import numpy as np
import pytest

from icl.run.compute import ComputeMeter
from icl.run.errors import ConfigError
from icl.run.plan import RunConfig, load_models, make_plan


def _cfg(fast_data, tmp_path, **kw):
    base = dict(fast=True, data_root=fast_data, out=tmp_path / "o", tasks=["edges"], progress=False)
    return RunConfig(**{**base, **kw})


def test_plan_limit_shots_and_context_csv(fast_data, tmp_path):
    plan = make_plan(_cfg(fast_data, tmp_path, limit=2, shots=[1, 3], qualitative=1))
    assert [(g.dataset, g.task) for g in plan.groups] == [("scenes-a", "edges"), ("scenes-b", "edges")]
    for g in plan.groups:
        assert len(g.queries) == 2 and g.queries == sorted(g.queries)
        for q in g.queries:
            assert len(g.contexts[q]) == 3 and q not in g.contexts[q] and len(set(g.contexts[q])) == 3
    with open(plan.context_csv) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 3 and {r["protocol"] for r in rows} == {"vibe-1"}
    assert len(plan.qualitative) == 1 and plan.n_samples == 2 * 2 * 3 * 2
    again = make_plan(_cfg(fast_data, tmp_path / "again", limit=2, shots=[1, 3], qualitative=1))
    assert again.context_sha256 == plan.context_sha256
    assert again.context_csv.read_bytes() == plan.context_csv.read_bytes()
    other_seed = make_plan(_cfg(fast_data, tmp_path / "seed", limit=2, shots=[1, 3], seed=1))
    assert other_seed.context_sha256 != plan.context_sha256


def test_plan_errors(fast_data, tmp_path):
    with pytest.raises(ConfigError, match="needs 9 contexts"):
        make_plan(_cfg(fast_data, tmp_path, shots=[9]))
    with pytest.raises(ConfigError, match="apply to none"):
        make_plan(_cfg(fast_data, tmp_path, datasets=["photos"]))
    with pytest.raises(ConfigError, match="--limit"):
        make_plan(_cfg(fast_data, tmp_path, limit=0))


def test_dtype_overrides_precision():
    models = load_models(RunConfig(models=["oracle", "identity"], dtype="bf16"))
    assert [m.precision for m in models.values()] == ["bf16", "bf16"]
    assert load_models(RunConfig(models=["oracle"]))["oracle"].precision == "fp32"


@pytest.mark.parametrize("trace", [False, True])
def test_compute_meter(trace):
    meter = ComputeMeter("cpu", trace_memory=trace)
    try:
        with meter.measure("m", "model", 4) as t:
            big = np.ones(2_000_000)  # 16 MB
            del big
        with meter.measure("m", "model", 6):
            pass
        with meter.measure("m", "score", 10):
            pass
        (model, score) = meter.records("run")
    finally:
        meter.close()
    assert not tracemalloc.is_tracing()
    assert t.elapsed > 0 and model.samples == 10 and score.samples == 10 and model.run_id == "run"
    assert model.memory_kind == ("tracemalloc-peak" if trace else "process-max-rss")
    assert model.peak_memory_bytes >= 16_000_000
    assert model.samples_per_s == model.samples / model.wall_s
