"""Issue 45.1: a request a model refuses (``Adapter.would_refuse``, or a ``RequestRefused`` in its
slot) is the recorded outcome "not applicable": stored, shown in samples.jsonl and the report,
never scored 0, never a failure, never counted toward stopping the model; a rerun asks nothing.
VL-ICL plans its 0-shot items first, so a model taking one image exactly refuses its whole first
batch: it must go on to its 1-shot items."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from icl.models import Adapter, GenerationRequest, register_model
from icl.models.base import RequestRefused
from icl.models.registry import unregister_model
from icl.run.__main__ import main

QUIET = ["--no-plots", "--no-progress", "--device", "cpu"]
CALLS: list[list[str]] = []  # request ids per predict call, of every adapter below


class OneImage(Adapter):
    """Takes exactly one image (like flux-kontext): the rule alone refuses the others."""

    name = "test-one-image"
    serves = (GenerationRequest,)
    batch_size = 2

    def would_refuse(self, request):
        n = len(request.images)
        return None if n == 1 else f"{self.name}: request {request.id!r} holds {n} image(s); it takes exactly 1"

    def predict(self, requests):
        CALLS.append([r.id for r in requests])
        return [RequestRefused(why) if (why := self.would_refuse(r)) else np.full((*(r.size or (8, 8)), 3), 90, np.uint8)
                for r in requests]


class SlotRefuser(Adapter):
    """No rule: refuses requests without images in their slot only when asked (a remote model
    that learns it from the call)."""

    name = "test-slot-refuser"
    serves = (GenerationRequest,)
    batch_size = 2

    def predict(self, requests):
        CALLS.append([r.id for r in requests])
        return [np.full((*(r.size or (8, 8)), 3), 90, np.uint8) if r.images else
                RequestRefused(f"{self.name}: request {r.id!r} has no image") for r in requests]


class RefusesThenCrashes(SlotRefuser):
    """Refuses the 0-shot items, then fails every request it takes: the policy must still stop it."""

    name = "test-refuse-crash"

    def predict(self, requests):
        CALLS.append([r.id for r in requests])
        if any(r.images for r in requests):
            raise RuntimeError("the GPU caught fire")
        return [RequestRefused(f"{self.name}: request {r.id!r} has no image") for r in requests]


@pytest.fixture(autouse=True)
def _adapters():
    for cls in (OneImage, SlotRefuser, RefusesThenCrashes):
        register_model(cls.name, cls, replace=True)
    CALLS.clear()
    yield
    for cls in (OneImage, SlotRefuser, RefusesThenCrashes):
        unregister_model(cls.name)


def _args(model, out, data):
    return ["vlicl", "--fast", "--tasks", "cobsat", "--seeds", "0", "--shots", "0,1", "--queries", "3", "--models",
            model, "--out", str(out), "--data-root", str(data), *QUIET]


def _samples(out):
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("model", ["test-one-image", "test-slot-refuser"])
def test_refused_items_are_not_applicable_and_the_others_run(model, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(_args(model, out, tmp_path / "data")) == 0  # nothing failed
    o = capsys.readouterr()
    assert "STOPPED" not in o.err and "FAILED" not in o.err, o.err
    assert "3 items of cobsat 0-shot not applicable to " + model in o.out and "stored, not scored" in o.out
    lines = _samples(out)
    na = [d for d in lines if d["group"]["shots"] == 0]
    ok = [d for d in lines if d["group"]["shots"] == 1]
    assert len(na) == 3 and all(d["status"] == "not applicable" and d["reason"] == "refused" and d["metrics"] == {}
                                and d["answer"] is None and "0 image(s)" in d["error"] or "no image" in d["error"]
                                for d in na)
    assert len(ok) == 3 and all(d["status"] == "ok" and "png" in d["answer"] for d in ok)
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["failed"] == 0 and meta["stopped_models"] == {}
    assert meta["refused"][model]["cobsat 0-shot"]["items"] == 3
    # never scored 0: results.csv has no 0-shot row of this model
    rows = (out / "results.csv").read_text().splitlines()
    shots = rows[0].split(",").index("shots")
    assert {r.split(",")[shots] for r in rows[1:]} == {"1"}
    assert "not applicable" in (out / "report.md").read_text() and "it refuses them" in (out / "report.html").read_text()
    with sqlite3.connect(f"file:{out / 'store.sqlite'}?mode=ro", uri=True) as c:
        assert c.execute("SELECT COUNT(*) FROM responses WHERE reason='refused'").fetchone()[0] == 3
        assert c.execute("SELECT COUNT(*) FROM failures").fetchone()[0] == 0
    sent = [i for call in CALLS for i in call]
    if model == "test-one-image":  # the rule refuses before sending: no 0-shot request reaches predict
        assert sent and all("shot1" in i for i in sent)
    CALLS.clear()
    assert main(_args(model, out, tmp_path / "data")) == 0  # stored: a rerun asks nothing
    assert "0 items computed, 6 already in the store" in capsys.readouterr().out and CALLS == []


def test_a_model_failing_its_first_answered_batch_is_still_stopped(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(_args("test-refuse-crash", out, tmp_path / "data")) == 1
    err = capsys.readouterr().err
    assert "STOPPED test-refuse-crash" in err and "failed its whole first batch" in err and "GPU caught fire" in err
    # batch 2 holds the last 0-shot item (refused) and the first 1-shot one (failed, retried alone by
    # the guard): that was the model's first batch it was asked, and its other 1-shot items never were
    assert len({i for call in CALLS for i in call if "shot1" in i}) == 1


def test_check_lists_the_cells_the_run_then_records_as_not_applicable(tmp_path, capsys):
    """Issue 50.6: ``--check`` puts every planned request to the same rule (``would_refuse``) and
    lists the refused cells per (task, shots) and model with why; the run then refuses exactly
    those (nothing of them sent to the model)."""
    out = tmp_path / "out"
    args = _args("test-one-image", out, tmp_path / "data")
    assert main([*args, "--check"]) == 0  # a recorded outcome, not a problem
    text = capsys.readouterr().out
    assert "refused requests (not applicable" in text
    row = next(line for line in text.splitlines() if "3 of 3" in line)
    assert row.split()[:3] == ["cobsat", "0", "test-one-image"] and "holds 0 image(s)" in row
    report = json.loads((out / "check.json").read_text())
    assert report["refusals"]["refused"] == 3 and [(c["task"], c["shots"]) for c in report["refusals"]["cells"]] == [
        ("cobsat", 0)]
    assert [w for w in report["warnings"] if "refuses" in w] == [
        "model test-one-image refuses 3 planned items (cobsat 0 shots; why: the refused requests table): the run "
        "records them as not applicable, stored, never scored"]
    assert CALLS == []  # the check called no model
    # what the run never computes is not remaining, timed or given disk: the check's remaining
    # scores are exactly those the run then computes
    (entry,) = [e for e in report["models"] if e["label"] == "test-one-image"]
    assert entry["not_applicable"].get("cobsat (refused)") == 3, entry
    assert main(args) == 0
    meta = json.loads((out / "results.json").read_text())
    assert meta["refused"]["test-one-image"]["cobsat 0-shot"]["items"] == report["refusals"]["refused"]
    assert entry["remaining"] == meta["counts"]["computed"], (entry, meta["counts"])
