"""Runner-side planning: benchmark options, the plan's key check, model instantiation and
identity (PROTOCOL §1.4 cache keys), compute records."""

import tracemalloc

import numpy as np
import pytest

from icl.benchmarks import registry as bench_registry
from icl.benchmarks.base import Benchmark, Item
from icl.models import register_model
from icl.models.registry import unregister_model
from icl.run.execution.compute import ComputeMeter
from icl.run.planning.config import ModelSpec, RunConfig
from icl.run.errors import ConfigError
from icl.run.planning.models import make_model
from icl.run.planning.setup import open_benchmark, plan_items
from tests.run._adapters import Constant


def test_open_benchmark_fast_and_options(builtin_root):
    bench = open_benchmark(RunConfig("vibe", {"limit": 2}, fast=True, data_root=builtin_root))
    assert bench.fast and bench.data_root == builtin_root and bench.config["limit"] == 2
    assert not open_benchmark(RunConfig("vibe")).fast
    with pytest.raises(ConfigError, match="no option.*lmit"):
        open_benchmark(RunConfig("vibe", {"lmit": 2}))
    with pytest.raises(ConfigError, match="unknown benchmark 'vib'.*did you mean 'vibe'"):
        open_benchmark(RunConfig("vib"))


class _Twice(Benchmark):
    name = "twice"

    def items(self):
        return [Item("a", {}), Item("b", {}), Item("a", {})]

    def request(self, item, privileged=False):
        return None

    def score(self, item, response, judgements=()):
        return {}

    def summarise(self, rows):
        return {}


def test_plan_refuses_duplicate_item_keys(monkeypatch):
    monkeypatch.setitem(bench_registry._registered, "twice", _Twice)
    with pytest.raises(ConfigError, match="planned item 'a' twice"):
        plan_items(open_benchmark(RunConfig("twice")))


def test_model_identity_and_precision():
    a = make_model(ModelSpec("oracle"), "cpu")
    assert a.adapter.precision == "fp32" and a.identity["precision"] == "fp32" and a.identity["device"] == "cpu"
    assert a.identity["adapter"] == "oracle" and a.identity["cls"] == "icl.models.builtin.Oracle"
    assert a.model_id == make_model(ModelSpec("oracle"), "cpu").model_id and len(a.model_id) == 20
    bf16 = make_model(ModelSpec("oracle"), "cpu", dtype="bf16")
    assert bf16.adapter.precision == "bf16" and bf16.model_id != a.model_id
    own = make_model(ModelSpec("oracle", {"dtype": "fp16"}), "cpu", dtype="bf16")  # the model's own dtype wins
    assert own.adapter.precision == "fp16" and own.model_id not in (a.model_id, bf16.model_id)
    batched = make_model(ModelSpec("oracle", {"batch_size": 3}), "cpu")
    assert batched.adapter.batch_size == 3 and batched.model_id == a.model_id  # not part of the answers
    timed = make_model(ModelSpec("oracle", {"timeout": 2.5}), "cpu")
    assert timed.timeout == 2.5 and timed.model_id == a.model_id


def test_model_arguments_with_defaults_are_identity():
    register_model("constant-local", Constant)
    try:
        zero = make_model(ModelSpec("constant-local"), "cpu")
        assert zero.identity["args"] == {"level": 0} and zero.adapter.level == 0
        explicit = make_model(ModelSpec("constant-local", {"level": 0}), "cpu")
        assert explicit.model_id == zero.model_id and explicit.label == "constant-local[level=0]"
        seven = make_model(ModelSpec("constant-local", {"level": 7}), "cpu")
        assert seven.adapter.level == 7 and seven.model_id != zero.model_id
        with pytest.raises(ConfigError, match="no argument.*gain.*it takes: batch_size, dtype, level, published_as, timeout"):
            make_model(ModelSpec("constant-local", {"gain": 2}), "cpu")
    finally:
        unregister_model("constant-local")
    with pytest.raises(ConfigError, match="unknown model 'oracel'.*did you mean 'oracle'"):
        make_model(ModelSpec("oracel"), "cpu")
    with pytest.raises(ConfigError, match="timeout must be a positive number"):
        make_model(ModelSpec("oracle", {"timeout": -1}), "cpu")


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
    assert (model.stage, score.stage, model.device) == ("model", "score", "cpu")
    assert model.memory_kind == ("tracemalloc-peak" if trace else "process-max-rss")
    assert model.peak_memory_bytes >= 16_000_000
    assert model.samples_per_s == model.samples / model.wall_s
