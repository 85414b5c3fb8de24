"""Compute per sample (icl.run.execution.compute): the energy arithmetic on a fake counter (a function
returning millijoules, as ``pynvml.nvmlDeviceGetTotalEnergyConsumption`` does: NVML API
reference, "nvmlDeviceGetTotalEnergyConsumption: total energy consumption in mJ since the driver
was last reloaded"), the path where no GPU reports energy, per-request shares and the per-model
summary."""

from __future__ import annotations

import sys

import pytest

from icl.run.execution.compute import (CallCost, ComputeMeter, call_costs, energy_joules, nvml_energy_reader,
                             summarise_costs)
from icl.store import Score, ScoreKey


def test_energy_of_a_measured_call_from_two_readings():
    readings = iter([1_000_000.0, 1_004_500.0])  # mJ before and after: 4.5 J
    meter = ComputeMeter("cpu", energy=lambda: next(readings))
    with meter.measure("m", "model", 3) as timing:
        pass
    assert timing.energy_j == pytest.approx(4.5) and timing.peak > 0 and timing.elapsed >= 0
    share = call_costs(timing, meter.kind, 3)
    assert share.energy_j == pytest.approx(1.5) and share.seconds == pytest.approx(timing.elapsed / 3)
    assert share.peak_memory_bytes == timing.peak and share.memory_kind == "process-max-rss"


def test_energy_not_reported():
    assert nvml_energy_reader("cpu") is None
    saved = sys.modules.get("pynvml")
    sys.modules["pynvml"] = None  # not importable: energy is simply absent
    try:
        assert nvml_energy_reader("cuda:0") is None
    finally:
        if saved is None:
            del sys.modules["pynvml"]
        else:
            sys.modules["pynvml"] = saved
    meter = ComputeMeter("cpu")
    assert meter.energy is None
    with meter.measure("m", "model", 1) as timing:
        pass
    assert timing.energy_j is None and call_costs(timing, meter.kind, 1).energy_j is None

    def broken() -> float:
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    with ComputeMeter("cpu", energy=broken).measure("m", "model", 1) as timing:
        pass
    assert timing.energy_j is None  # a failing reading is a reading not taken
    assert energy_joules(5000.0, 4000.0) is None  # the counter went back (driver reload)
    assert energy_joules(None, 1.0) is None and energy_joules(1000.0, 3500.0) == 2.5


def test_item_cost_over_follow_ups():
    a = CallCost(0.5, 100, "process-max-rss", None)
    b = CallCost(0.25, 300, "process-max-rss", 2.0, {"seed": 1})
    total = a.plus(b)
    assert total == CallCost(0.75, 300, "process-max-rss", 2.0, {"seed": 1})
    assert CallCost().plus(CallCost()) == CallCost()


def test_summary_per_model():
    def score(item, model_s, peak, energy):
        return Score(ScoreKey("b", "p", item, "m", "", "1"), "ok", {}, None, None, model_s, 0.01, "r", peak,
                     "process-max-rss", energy)

    rows = [score("a", 1.0, 10, 2.0), score("b", 3.0, 30, None), score("c", 0.0, None, None)]  # c: from the store
    (s,) = summarise_costs({"m": rows}).values()
    assert s["items"] == 3 and s["measured"] == 2
    assert s["model_s_mean"] == 2.0 and s["model_s_median"] == 2.0 and s["model_s_total"] == 4.0
    assert s["model_s_p95"] == pytest.approx(2.9)
    assert s["peak_memory_bytes"] == 30 and s["memory_kind"] == "process-max-rss"
    assert s["energy_items"] == 1 and s["energy_j_total"] == 2.0 and s["energy_j_mean"] == 2.0
    assert s["score_s_mean"] == pytest.approx(0.01)
