"""Device evaluation in the runner (``--eval device``; here on the CPU): tensor requests,
half-precision outputs, the overlapped scoring pipeline, resume after interruption.

``ICL_DEVICE_TESTS_DEVICE=cuda`` runs the host-parity run on a GPU (``bench/gpu_check.py``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading

import cv2
import numpy as np
import pytest
import torch

from icl.models import AnalogyRequest, get_model, register_model
from icl.models.builtin import Oracle
from icl.benchmarks.vibe.tasks import list_tasks
from icl.models.registry import unregister_model
from icl.run.__main__ import main
from icl.run.execution.device import ScorePipeline, eval_device, tensor_requests, upload
from icl.store import Store
from tests.run._adapters import BadShape
from tests.run.conftest import icl_run, item_fields, metrics_by_key, score_rows
from tests.run.test_run_resume import _rows
from tests.tolerances import ATOL

# Rotation's identity and copy-target answers have the query's size, not the target's: the
# device resizes them bilinearly in float32, OpenCV in fixed point (within one level per pixel).
RESIZED = {("rotation", "identity"), ("rotation", "copy-target")}
RESIZE_TOL = {"psnr": 0.05, "ssim": 5e-3, "lpips": 5e-3}
DEVICE = os.environ.get("ICL_DEVICE_TESTS_DEVICE", "cpu")


def _args(data, out, *extra):
    return ["vibe", "--fast", "--data-root", str(data), "--out", str(out), "--no-plots", "--no-progress",
            "--qualitative", "0", *extra]


def _assert_close(host: dict, dev: dict) -> None:
    """Same keys and statuses; label metrics exact, depth within float64 tolerance (sums in
    another order), resized image metrics within the bilinear bound, all else exact."""
    assert host.keys() == dev.keys() and host
    for key, (status, m) in host.items():
        dev_status, d = dev[key]
        assert status == dev_status == "ok" and m.keys() == d.keys(), key
        task, model = item_fields(key[0])[1], key[1]
        for name, x in m.items():
            y = d[name]
            if task == "depth":
                assert y == pytest.approx(x, abs=ATOL[torch.float64]), (key, name)
            elif (task, model) in RESIZED and not (math.isinf(x) and x == y):
                assert abs(x - y) <= RESIZE_TOL.get(name, 0.0), (key, name, x, y)
            elif DEVICE != "cpu" and name in ("ssim", "lpips"):  # float32 kernels; TF32 convolutions
                assert y == pytest.approx(x, abs=ATOL[torch.float16]), (key, name)
            else:
                assert x == y or (x != x and y != y), (key, name, x, y)


def test_device_runs_match_the_host_run(fast_data, plugin_env, tmp_path, capsys):
    assert main(_args(fast_data, tmp_path / "host", "--limit", "1", "--device", "cpu")) == 0
    # the overlapped device run in its own process: the CLI sets OMP_WAIT_POLICY before torch loads
    dev = subprocess.run(icl_run(_args(fast_data, tmp_path / "dev", "--limit", "1", "--device", DEVICE,
                                       "--eval", "device")), capture_output=True, text=True, env=plugin_env,
                         timeout=300)
    assert dev.returncode == 0, dev.stderr
    host, dev = (metrics_by_key(tmp_path / d / "store.sqlite") for d in ("host", "dev"))
    assert {item_fields(k)[1] for k, _ in host} == set(list_tasks())
    _assert_close(host, dev)
    data = json.loads((tmp_path / "dev" / "results.json").read_text())
    stages = {(c["model"], c["stage"]) for c in data["compute"]}
    assert {(m, s) for m in ("oracle", "copy-target", "identity") for s in ("model", "score")} <= stages
    assert data["config"]["evaluate"] == "device" and data["config"]["overlap"] is True and data["device"] == DEVICE

    # the same device run without overlap, in bf16, is identical to the byte (on the CPU)
    assert main(_args(fast_data, tmp_path / "bf16", "--limit", "1", "--eval", "device", "--device", DEVICE,
                      "--no-overlap", "--dtype", "bf16")) == 0
    if DEVICE == "cpu":
        assert sorted(_rows(tmp_path / "bf16" / "store.sqlite")) == sorted(_rows(tmp_path / "dev" / "store.sqlite"))
    else:
        _assert_close(host, metrics_by_key(tmp_path / "bf16" / "store.sqlite"))
    # host evaluation takes half-precision tensor outputs through the numpy path: the host run
    # to the byte (as the answers decode to the same uint8 images)
    assert main(_args(fast_data, tmp_path / "host-fp16", "--limit", "1", "--device", "cpu", "--dtype", "fp16")) == 0
    assert sorted(_rows(tmp_path / "host-fp16" / "store.sqlite")) == sorted(_rows(tmp_path / "host" / "store.sqlite"))
    capsys.readouterr()


class Interrupting(Oracle):
    """The oracle on tensor requests, two per batch; the ``stop_at``-th call is interrupted."""

    batch_size = 2
    calls = 0
    stop_at = 0
    answered: list = []

    def predict(self, requests):
        cls = type(self)
        cls.calls += 1
        if cls.calls == cls.stop_at:
            raise KeyboardInterrupt
        assert all(isinstance(r.query, torch.Tensor) and r.device == "cpu" for r in requests)
        cls.answered += [(r.dataset, r.task, r.query_id, r.shots) for r in requests]
        return super().predict(requests)


def test_interrupted_device_run_keeps_scored_batches_and_resumes(fast_data, tmp_path, capsys):
    register_model("interrupting", Interrupting)
    args = _args(fast_data, tmp_path / "out", "--tasks", "keypoints", "--models", "interrupting", "--eval", "device")
    try:
        Interrupting.calls, Interrupting.stop_at, Interrupting.answered = 0, 4, []
        assert main(args) == 130  # interrupted while the third batch is being scored
        before = _rows(tmp_path / "out" / "store.sqlite")
        # every answered batch was scored and committed, the one in flight included
        assert sorted(item_fields(r[0]) for r in before) == sorted(Interrupting.answered) and len(before) == 6
        assert all(r[2] == "ok" for r in before)
        first = set(Interrupting.answered)
        Interrupting.calls, Interrupting.stop_at, Interrupting.answered = 0, 0, []
        assert main(args) == 0
        assert not first & set(Interrupting.answered), "a committed item was computed again"
        assert main(_args(fast_data, tmp_path / "ref", "--tasks", "keypoints", "--models", "interrupting",
                          "--eval", "device")) == 0
    finally:
        unregister_model("interrupting")
    assert sorted(_rows(tmp_path / "out" / "store.sqlite")) == sorted(_rows(tmp_path / "ref" / "store.sqlite"))
    assert "6 already in the store" in capsys.readouterr().out


def test_sigkill_then_resume_on_device(fast_data, plugin_env, tmp_path, monkeypatch, capsys):
    """The runner's kill/resume scenario with every run scoring on the device, overlapped."""
    from tests.run.test_run_resume import kill_and_resume

    kill_and_resume(fast_data, plugin_env, tmp_path, monkeypatch, capsys, ["--eval", "device"])


def test_bad_outputs_fail_alike_on_host_and_device(fast_data, tmp_path, capsys):
    register_model("bad-shape-local", BadShape)
    try:
        errors = {}
        for where in ("host", "device"):
            out = tmp_path / where
            assert main(_args(fast_data, out, "--datasets", "scenes-a", "--tasks", "edges,detection",
                              "--models", "bad-shape-local", "--eval", where)) == 1
            errors[where] = [(k, s, reason, e) for k, _, s, reason, _, e in score_rows(out / "store.sqlite")]
            with Store(out / "store.sqlite") as store:
                assert [f.stage for f in store.failures()] == ["model"] * sum(r[1] == "failed" for r in errors[where])
    finally:
        unregister_model("bad-shape-local")
    capsys.readouterr()
    assert errors["host"] == errors["device"]
    assert any(status == "failed" and reason == "invalid" and "expected an image of shape [H, W, 3]" in err
               for _, status, reason, err in errors["device"])
    assert any(status == "ok" for _, status, _, _ in errors["device"])


def test_eval_modes():
    assert eval_device("cpu", "auto") is None and eval_device("cuda:1", "auto") == "cuda:1"
    assert eval_device("cuda", "host") is None and eval_device("cpu", "device") == "cpu"
    with pytest.raises(ValueError, match="eval mode"):
        eval_device("cpu", "gpu")


def test_upload_sends_each_array_once_grouped_by_shape(rng):
    a, b = rng.integers(0, 256, (3, 5, 3), dtype=np.uint8), rng.integers(0, 256, (3, 5, 3), dtype=np.uint8)
    c = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    out = upload([a, c, b, a, c], "cpu")
    assert out[0] is out[3] and out[1] is out[4]
    assert out[0].data_ptr() + a.nbytes == out[2].data_ptr()  # a and b share one stacked copy
    for t, x in zip(out, [a, c, b, a, c]):
        assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), x)


def _request(rng, q_hw, c_hw, oracle=True):
    c_in = [rng.integers(0, 256, (*c_hw, 3), dtype=np.uint8)]
    c_out = [rng.integers(0, 256, (*c_hw, 3), dtype=np.uint8)]
    query = rng.integers(0, 256, (*q_hw, 3), dtype=np.uint8)
    return AnalogyRequest("flip", "ds", "q", c_in, c_out, query, q_hw, query if oracle else None)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_builtin_adapters_answer_tensor_requests(rng, precision):
    sizes = [((6, 8), (3, 4)), ((13, 9), (5, 11)), ((1, 1), (7, 3)), ((64, 88), (72, 96)), ((5, 5), (5, 5))]
    reqs = [_request(rng, q, c) for q, c in sizes]
    treqs = tensor_requests(reqs, "cpu")
    assert all(r.device == "cpu" and isinstance(r.context_outputs[0], torch.Tensor) for r in treqs)
    assert treqs[0].oracle_target is treqs[0].query  # the same array crosses once
    for name in ("oracle", "copy-target", "identity"):
        model = get_model(name)
        assert model.accepts_tensors
        model.precision = precision
        picks = get_model(name).predict(reqs)  # fp32: the uint8 images themselves
        host, dev = model.predict(reqs), model.predict(treqs)
        for pick, h, d in zip(picks, host, dev):
            assert isinstance(d, torch.Tensor)
            if precision == "fp32":
                assert d.dtype == torch.uint8 and np.array_equal(d.numpy(), pick) and np.array_equal(h, pick)
                continue
            assert d.dtype == {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
            assert torch.equal(d, h)  # half-precision answers are tensors on both paths
            assert np.array_equal(torch.round(d.float() * 255).to(torch.uint8).numpy(), pick)
    # copy-target's device resize is OpenCV's INTER_NEAREST, pixel for pixel
    for r in reqs:
        (d,) = get_model("copy-target").predict(tensor_requests([r], "cpu"))
        h, w = r.query.shape[:2]
        assert np.array_equal(d.numpy(), cv2.resize(r.context_outputs[0], (w, h), interpolation=cv2.INTER_NEAREST))


def test_score_pipeline_commits_in_order_from_one_worker():
    committed, threads = [], set()
    gate = threading.Event()

    def job(i):
        def run():
            threads.add(threading.current_thread().name)
            if i == 0:
                gate.wait(5)  # the first batch is still scoring while the next ones are submitted
            return i
        return run

    pipe = ScorePipeline("cpu", overlap=True)
    pipe.submit(job(0), committed.append)
    assert committed == []  # returned while the worker scores
    gate.set()
    for i in range(1, 5):
        pipe.submit(job(i), committed.append)
        assert committed == list(range(i))  # everything but the newest is committed, in order
    pipe.close()
    assert committed == list(range(5)) and len(threads) == 1 and threading.current_thread().name not in threads
    sync = ScorePipeline("cpu", overlap=False)
    sync.submit(job(7), committed.append)
    assert committed[-1] == 7
