"""``--check``'s cost (icl.run.planning.check_cost): ``--calibrate N`` runs N items per model for real in a
scratch store and estimates the run's time from them; HTTP models' requests are counted (tokens,
images) and priced without calling the API, and the run then sends what was counted.

Real everything: the tiny LLaVA checkpoint, the built-in fast data, the real SQLite store, real
HTTP servers on 127.0.0.1 (``tests/models/vlm/raw_http_server.py``,
``tests/models/t2i/images_server.py``) that record what the run sends."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pytest

from icl.run.__main__ import main
from icl.run.planning.check import CHECK_FILE
from icl.run.planning.check_cost import MESSAGE_TOKENS, REPLY_TOKENS, image_tokens, text_tokens
from tests.models.t2i.images_server import ImagesServer
from tests.models.vlm.raw_http_server import RawServer, Reply, completion
from tests.run.planning.test_check import COST_FACTOR

ROOT = Path(__file__).resolve().parents[3]


def _report(out: Path) -> dict:
    return json.loads((out / CHECK_FILE).read_text())


def _cobsat_fast(out: Path, *extra: str) -> list[str]:
    return ["cobsat", "--fast", "--tasks", "Color-I,Texture-II", "--shots", "0,2", "--prompts", "2", "--out", str(out),
            "--no-progress", "--no-plots", "--device", "cpu", *extra]


@pytest.fixture
def scratch_root(tmp_path, monkeypatch):
    """The system's temporary folder for this test: where --calibrate's scratch store goes."""
    root = tmp_path / "system-tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


# --- --calibrate -----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, says", [
    (["--calibrate", "2"], "--calibrate needs --check"),
    (["--check", "--calibrate", "0"], "--calibrate: expected an integer >= 1, got '0'"),
    (["--check", "--calibrate", "two"], "--calibrate: expected an integer >= 1, got 'two'"),
])
def test_calibrate_needs_check_and_a_positive_count(tmp_path, capsys, args, says):
    out = tmp_path / "out"
    assert main(_cobsat_fast(out, *args)) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("toml, says", [
    ("check = true\ncalibrate = 0\n", "calibrate: expected a positive integer (items per model), got 0"),
    ("check = true\ncalibrate = \"2\"\n", "calibrate: expected a positive integer (items per model), got '2'"),
    ("calibrate = 2\n", "calibrate needs --check"),
])
def test_calibrate_key_of_run_toml_is_checked(tmp_path, capsys, toml, says):
    cfg = tmp_path / "run.toml"
    cfg.write_text(toml)
    out = tmp_path / "out"
    assert main(_cobsat_fast(out, "--config", str(cfg))) == 2
    err = capsys.readouterr().err
    assert f"--config {cfg}: {says}" in err and not out.exists()


def test_calibrate_key_of_run_toml(tmp_path, scratch_root):
    cfg = tmp_path / "run.toml"
    cfg.write_text("check = true\ncalibrate = 2\n")
    out = tmp_path / "out"
    assert main(_cobsat_fast(out, "--config", str(cfg))) == 0
    report = _report(out)
    assert report["calibration"]["items_per_model"] == 2 and report["models"][0]["estimate_basis"] == \
        "calibrated on 2 items"


def test_calibration_estimates_the_models_without_stored_compute_and_writes_nothing(tmp_path, scratch_root, capsys):
    """copy-last has stored compute (a first run), collage has none: only the latter is
    calibrated, on its first 2 remaining items; the store keeps its bytes, the output folder
    gains check.json only, the scratch folder is gone."""
    out = tmp_path / "out"
    assert main(_cobsat_fast(out, "--models", "copy-last")) == 0
    store = out / "store.sqlite"
    before = (store.read_bytes(), store.stat().st_mtime_ns, sorted(p.name for p in out.iterdir()))
    args = _cobsat_fast(out, "--models", "copy-last,collage", "--check")
    assert main(args) == 0
    plain = {m["label"]: m for m in _report(out)["models"]}
    assert plain["collage"]["estimate"].startswith("unknown (no stored compute")
    assert _report(out)["plan"]["estimated_s"] is None
    capsys.readouterr()
    assert main([*args, "--calibrate", "2"]) == 0
    printed = capsys.readouterr().out
    report = _report(out)
    models = {m["label"]: m for m in report["models"]}
    stored, calibrated = models["copy-last"], models["collage"]
    assert stored["estimate_basis"] == "stored compute of 8 items" and "calibrated_items" not in stored
    assert calibrated["estimate_basis"] == "calibrated on 2 items" and calibrated["measured_items"] == 2
    assert calibrated["items_remaining"] == 8 and calibrated["seconds_per_item"] > 0
    assert calibrated["estimated_s"] == pytest.approx(calibrated["load_s"] + 8 * calibrated["seconds_per_item"])
    # the first 2 items of the plan (the run's own order)
    from icl.run.planning.config import RunConfig
    from icl.run.planning.setup import open_benchmark, planned_items

    config = RunConfig("cobsat", options=dict(tasks=("Color-I", "Texture-II"), shots=(0, 2), prompts=2), fast=True)
    items, _ = planned_items(open_benchmark(config), config)
    assert calibrated["calibrated_items"] == [it.key for it in items[:2]]
    judge = next(e for e in report["models"] if e["role"] == "judge")  # cobsat's, measured by the first run
    assert judge["estimate_basis"] == "stored compute of 8 items" and judge["items_remaining"] == 8
    assert report["plan"]["estimated_s"] == pytest.approx(stored["estimated_s"] + calibrated["estimated_s"]
                                                          + judge["estimated_s"])
    assert report["calibration"]["models"] == ["collage"] and report["calibration"]["judges"] == []
    assert "(calibrated on 2 items)" in printed and "(stored compute of 8 items)" in printed
    assert "calibration: the first 2 remaining item(s) of collage run for real" in printed
    assert report["warnings"] == ["--calibrate: model collage: calibrated on 2 item(s), fewer than its batch size 16: "
                                  "the time per item of a partial batch overestimates a batched model's "
                                  "(--calibrate 16 fills one batch)"]
    # nothing written but check.json: the store untouched, the scratch folder removed
    assert (store.read_bytes(), store.stat().st_mtime_ns) == before[:2]
    assert sorted(p.name for p in out.iterdir()) == sorted(before[2] + [CHECK_FILE])
    assert list(scratch_root.iterdir()) == []


def test_a_model_whose_calibration_fails_is_a_problem(tmp_path, scratch_root):
    """An HTTP model whose server is not there: its calibration requests fail, the engine stops
    it as the run would, and the check lists that as a problem (exit 2)."""
    out = tmp_path / "out"
    with RawServer() as srv:
        closed = srv.base_url  # a port nothing listens on once the server is gone
    model = f"openai:model=tiny,base_url={closed},api_key_env=ICL_NO_KEY,max_retries=0"
    args = ["vlicl", "--fast", "--models", model, "--tasks", "clevr", "--seeds", "0", "--shots", "0", "--queries", "2",
            "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress", "--check"]
    assert main(args) == 0  # the check alone calls no API
    assert main([*args, "--calibrate", "1"]) == 2
    report = _report(out)
    (problem,) = report["problems"]
    assert problem["check"] == "calibrate" and problem["where"].startswith("model openai[")
    assert "failed its whole first batch" in problem["message"] and "--calibrate" in problem["fix"]
    assert report["models"][0]["estimated_s"] is None and "calibration failed" in report["models"][0]["estimate"]
    assert sorted(p.name for p in out.iterdir()) == [CHECK_FILE] and list(scratch_root.iterdir()) == []


def test_declared_cuda_is_not_calibrated(tmp_path, scratch_root):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: --device cuda is seen, and calibrated")
    out = tmp_path / "out"
    args = [a if a != "cpu" else "cuda" for a in _cobsat_fast(out)]
    assert main([*args, "--check", "--calibrate", "2"]) == 0
    report = _report(out)
    assert "not calibrated" in report["models"][0]["estimate"] and report["calibration"]["models"] == []
    assert "declared, not seen" in report["calibration"]["skipped"]["copy-last"]


@pytest.fixture
def slow_judge():
    """cobsat's built-in judge taking 0.2 s a question (tests/run/_adapters.py), registered."""
    from icl.models import register_model
    from icl.models.registry import unregister_model

    register_model("slow-cobsat-judge", "tests.run._adapters:SlowCoBSATJudge")
    yield "slow-cobsat-judge"
    unregister_model("slow-cobsat-judge")


def test_the_judges_time_is_in_the_estimate_within_a_factor_of_the_following_run(tmp_path, slow_judge, capsys):
    """A judge's time counts as a model's: a first run (cobsat --fast, Color-I, copy-last judged
    by a judge taking 0.2 s a question) stores the judge's compute; the check of the next plan
    (Texture-II too, sharing the store) estimates the judge's 4 items to judge from it (its
    load + judging seconds per item judged x items) beside the model's, the plan sums both, and
    the following real run's ``execute_s`` is within COST_FACTOR of it. The model's part alone
    is below a COST_FACTOR-th of the run: without the judge the estimate would fail."""
    store = tmp_path / "store.sqlite"

    def args(out: str, tasks: str, *extra: str) -> list[str]:
        return ["cobsat", "--fast", "--tasks", tasks, "--shots", "0,2", "--prompts", "2", "--out", str(tmp_path / out),
                "--store", str(store), "--no-progress", "--no-plots", "--device", "cpu", "--models", "copy-last",
                "--judge", slow_judge, *extra]

    assert main(args("first", "Color-I")) == 0
    assert main(args("next", "Color-I,Texture-II", "--check")) == 0
    printed = capsys.readouterr().out
    report = _report(tmp_path / "next")
    entries = {e["label"]: e for e in report["models"]}
    model, judge = entries["copy-last"], entries[slow_judge]
    assert judge["role"] == "judge" and judge["items_remaining"] == model["items_remaining"] == 4
    assert judge["estimate_basis"] == "stored compute of 4 items" and judge["seconds_per_item"] >= 0.2
    assert judge["estimated_s"] == pytest.approx(judge["load_s"] + 4 * judge["seconds_per_item"])
    assert f"(stored compute of 4 items)" in printed.split(slow_judge)[-1]
    estimate = report["plan"]["estimated_s"]
    assert estimate == pytest.approx(model["estimated_s"] + judge["estimated_s"])
    assert main(args("next", "Color-I,Texture-II")) == 0
    real = json.loads((tmp_path / "next" / "results.json").read_text())["timings"]["execute_s"]
    print(f"estimated {estimate:.3f} s (judge {judge['estimated_s']:.3f} s), ran {real:.3f} s: "
          f"ratio {estimate / real:.2f}, the model's part alone {model['estimated_s'] / real:.4f}")
    assert 1 / COST_FACTOR <= estimate / real <= COST_FACTOR, (estimate, real)
    assert model["estimated_s"] < real / COST_FACTOR


def test_calibration_measures_a_judge_without_stored_compute_on_a_model_whose_time_is_known(
        tmp_path, scratch_root, slow_judge, capsys):
    """copy-last's compute is stored (a first run judged by cobsat's own judge); the check with
    another judge knows the model's time, not the judge's: the plan's time is unknown. With
    ``--calibrate 2`` copy-last's first 2 items run for the judge's sake (its stored estimate
    kept), the judge's estimate is calibrated on them; the store keeps its bytes, the folder
    gains check.json only."""
    out = tmp_path / "out"
    assert main(_cobsat_fast(out, "--models", "copy-last")) == 0
    store = out / "store.sqlite"
    before = (store.read_bytes(), sorted(p.name for p in out.iterdir()))
    args = _cobsat_fast(out, "--models", "copy-last", "--judge", slow_judge, "--check")
    assert main(args) == 0
    entries = {e["label"]: e for e in _report(out)["models"]}
    assert entries["copy-last"]["estimate_basis"] == "stored compute of 8 items"
    assert entries[slow_judge]["estimate"].startswith("unknown (no stored compute")
    assert entries[slow_judge]["items_remaining"] == 8 and _report(out)["plan"]["estimated_s"] is None
    capsys.readouterr()
    assert main([*args, "--calibrate", "2"]) == 0
    printed = capsys.readouterr().out
    report = _report(out)
    entries = {e["label"]: e for e in report["models"]}
    model, judge = entries["copy-last"], entries[slow_judge]
    assert model["estimate_basis"] == "stored compute of 8 items" and model["calibrated_for"] == "judges"
    assert len(model["calibrated_items"]) == 2
    assert judge["estimate_basis"] == "calibrated on 2 items" and judge["seconds_per_item"] >= 0.2
    assert judge["estimated_s"] == pytest.approx(judge["load_s"] + 8 * judge["seconds_per_item"])
    assert report["plan"]["estimated_s"] == pytest.approx(model["estimated_s"] + judge["estimated_s"])
    assert report["calibration"]["models"] == ["copy-last"] and report["calibration"]["judges"] == [slow_judge]
    assert f"of copy-last run for real in a scratch store (removed)" in printed and f"judged by {slow_judge}" in printed
    assert (store.read_bytes(), sorted(p.name for p in out.iterdir() if p.name != CHECK_FILE)) == before
    assert list(scratch_root.iterdir()) == []


@pytest.mark.slow
def test_the_calibrated_time_estimate_is_within_a_factor_of_the_following_run(tmp_path):
    """tiny LLaVA on vlicl --fast (seeds 1, 2: 144 items), nothing stored: the plain check says
    unknown; ``--calibrate 2`` runs the first 2 items for real (one full batch: ``max_batch=2``)
    and estimates the run (load + seconds per item x 144) within COST_FACTOR of the following
    real run's ``execute_s``, as the estimate from stored compute is (tests/run/planning/test_check.py;
    measured ratios 1.2-1.5: the first batch carries the model's warm-up). Each command its own
    process; the scratch store in the process's $TMPDIR, removed; no store created. (With the
    default ``max_batch=8`` the 2 items are a partial batch, whose time per item overestimates:
    ratios 3-8 were measured, and the check warns.)"""
    from icl.models.vlm.tiny import build_llava

    tiny = build_llava(tmp_path / "tiny", max_positions=2048)
    store, out, system_tmp = tmp_path / "store.sqlite", tmp_path / "next", tmp_path / "system-tmp"
    system_tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(system_tmp))

    def run(*extra: str) -> None:
        args = ["vlicl", "--fast", "--models", f"hf-vlm:weights={tiny},max_batch=2", "--seeds", "1,2", "--shots",
                "0,1,2", "--queries", "4", "--out", str(out), "--store", str(store), "--no-plots", "--no-progress",
                "--device", "cpu", "--data-root", str(tmp_path / "data"), *extra]
        proc = subprocess.run([sys.executable, "-m", "icl.run", *args], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]

    run("--check")
    assert _report(out)["models"][0]["estimate"].startswith("unknown (no stored compute")
    run("--check", "--calibrate", "2")
    report = _report(out)
    model = report["models"][0]
    assert model["estimate_basis"] == "calibrated on 2 items" and model["items_remaining"] == 144
    assert model["load_s"] > 0 and len(model["calibrated_items"]) == 2
    assert not store.exists() and sorted(p.name for p in out.iterdir()) == [CHECK_FILE]
    assert list(system_tmp.iterdir()) == []
    estimate = report["plan"]["estimated_s"]
    assert estimate == model["estimated_s"] > 0
    run()
    real = json.loads((out / "results.json").read_text())["timings"]["execute_s"]
    ratio = estimate / real
    print(f"calibrated estimate {estimate:.3f} s (load {model['load_s']:.3f} s, {model['seconds_per_item']:.4f} s an "
          f"item), ran {real:.3f} s: ratio {ratio:.2f}")
    assert 1 / COST_FACTOR <= ratio <= COST_FACTOR, (estimate, real)


# --- HTTP cost -------------------------------------------------------------------------------------
def _sent_chat(bodies: list[str]) -> dict:
    """What chat-completions bodies hold, counted by the check's documented rule."""
    out = dict(requests=len(bodies), text_tokens=0, image_tokens=0, images=0, max_tokens=0)
    for raw in bodies:
        body = json.loads(raw)
        out["max_tokens"] += body["max_tokens"]
        out["text_tokens"] += REPLY_TOKENS
        for m in body["messages"]:
            parts = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]
            out["text_tokens"] += MESSAGE_TOKENS + text_tokens("".join(p["text"] for p in parts if p["type"] == "text"))
            for p in parts:
                if p["type"] == "image_url":
                    data = base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
                    h, w = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).shape[:2]
                    out["images"] += 1
                    out["image_tokens"] += image_tokens(h, w, p["image_url"].get("detail"))
    return out


def test_http_chat_cost_is_what_the_run_then_sends(tmp_path, capsys):
    """vlicl --fast with a two-pass chain of thought through ``openai``: the check (the server
    up, and not asked) counts the requests, images and maximum output tokens the run then sends,
    the input tokens by its rule with each follow-up's quoted answer at its longest, and prices
    them; the prices leave the model's identity alone; stored answers are reused, not counted."""
    cot_tokens = 40
    with RawServer(lambda body, headers: Reply(body=completion(""))) as srv:
        def args(model_args: str, *extra: str) -> list[str]:
            model = f"openai:model=tiny,base_url={srv.base_url},api_key_env=ICL_NO_KEY{model_args}"
            return ["vlicl", "--fast", "--models", model, "--tasks", "clevr,operator_induction", "--seeds", "0",
                    "--shots", "0,1", "--queries", "3", "--cot", "true", "--cot-tokens", str(cot_tokens), "--out",
                    str(tmp_path / "out"), "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress", *extra]

        priced = args(",price_in=2.5,price_out=10")
        assert main(args("", "--check")) == 0
        unpriced = _report(tmp_path / "out")["models"][0]
        assert unpriced["http"]["money"] is None
        capsys.readouterr()
        assert main([*priced, "--check"]) == 0
        printed = capsys.readouterr().out
        assert srv.received == 0  # no API called
        model = _report(tmp_path / "out")["models"][0]
        http = model["http"]
        assert model["model_id"] == unpriced["model_id"]  # prices are execution arguments
        assert http["family"] == "openai" and http["cached"] == 0 and http["requests"] == 2 * model["items_remaining"]
        assert http["followups"] == model["items_remaining"] == 12
        assert http["prices"] == dict(price_in=2.5, price_out=10.0, price_image=None)
        assert http["money"] == pytest.approx(2.5 * http["input_tokens"] / 1e6 + 10 * http["output_tokens_max"] / 1e6)
        assert "HTTP model" in printed and f"{http['input_tokens']:,}" in printed

        assert main(priced) == 0
        sent = _sent_chat(srv.bodies)
        assert sent["requests"] == http["requests"] and sent["images"] == http["images_sent"] > 0
        assert sent["max_tokens"] == http["output_tokens_max"]
        assert sent["image_tokens"] == http["image_tokens"]
        # each follow-up quotes the empty first answer; the check counted it at cot_tokens tokens
        assert http["text_tokens"] == sent["text_tokens"] + http["followups"] * cot_tokens

        # scored again under another judge: every answer comes from the store, none is counted or sent
        received = srv.received
        assert main([*priced, "--judge", "copy-last", "--check"]) == 0
        again = _report(tmp_path / "out")["models"][0]["http"]
        assert again["requests"] == 0 and again["cached"] == 12 and again["money"] == 0
        assert main([*priced, "--judge", "copy-last"]) == 0
        assert srv.received == received


def test_http_image_cost_is_what_the_run_then_sends(tmp_path):
    """cobsat --fast through ``openai-images``: edits send the context images, every request
    generates one image; ``price_image`` prices each image sent and generated."""
    with ImagesServer() as srv:
        model = (f"openai-images:model=img,base_url={srv.base_url},api_key_env=ICL_NO_KEY,size=64x64,backoff=0,"
                 f"price_in=5,price_image=0.04")
        args = _cobsat_fast(tmp_path / "out", "--models", model)
        assert main([*args, "--check"]) == 0
        assert srv.received == []
        http = _report(tmp_path / "out")["models"][0]["http"]
        assert http["family"] == "openai-images" and http["output_tokens_max"] == 0
        assert http["money"] == pytest.approx(5 * http["input_tokens"] / 1e6
                                              + 0.04 * (http["images_sent"] + http["images_generated"]))
        assert main(args) in (0, 1)  # cobsat scores the images with its judge; the requests are what matters
        assert len(srv.received) == http["requests"] == http["images_generated"] == 8
        assert sum(len(r["images"]) for r in srv.received) == http["images_sent"] > 0
        prompts = [r["fields"]["prompt"] for r in srv.received]
        assert sum(text_tokens(p) for p in prompts) == http["input_tokens"]


@pytest.mark.parametrize("family, arg, value", [("openai", "price_in", "-1"), ("openai", "price_out", "cheap"),
                                                ("openai-images", "price_image", "true")])
def test_a_bad_price_is_refused_naming_it(tmp_path, family, arg, value):
    out = tmp_path / "out"
    model = f"{family}:model=m,api_key_env=ICL_NO_KEY,{arg}={value}"
    bench = (["vlicl", "--fast", "--tasks", "clevr"] if family == "openai"
             else ["cobsat", "--fast", "--tasks", "Color-I"])
    assert main([*bench, "--models", model, "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-plots",
                 "--no-progress", "--check"]) == 2
    (problem,) = _report(out)["problems"]
    unit = "per image" if arg == "price_image" else "per 1M tokens"
    # named once, in where (not "model 'openai': openai: ..." again in the message)
    assert problem["where"].startswith(f"model {family}[")
    assert problem["message"].startswith(f"{arg} must be a non-negative number (the price {unit})"), problem


@pytest.mark.slow  # a real check killed in its calibration, then a check
def test_a_calibration_killed_with_sigkill_leaves_a_scratch_folder_the_next_check_removes(
        tmp_path, scratch_root, builtin_root, capsys):
    """``--check --calibrate`` killed (SIGKILL) inside its model's first batch cannot remove its
    scratch store; the next check removes it: a folder of this host's calibrations whose process
    is gone. Nothing else in $TMPDIR is touched: a live process's folder, another host's, a file
    of that name, a folder another program named alike."""
    import signal
    import socket
    import time

    from icl.run.planning.check_cost import SCRATCH_PREFIX, scratch_prefix

    site = tmp_path / "site"
    dist = site / "icl_kill_adapter-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-kill-adapter\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nslow-oracle = tests.run._kill_adapter:SlowOracle\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), TMPDIR=str(scratch_root),
               ICL_TEST_SLEEP="60", ICL_TEST_COUNT_LOG=str(tmp_path / "answered.log"))
    args = ["vibe", "--fast", "--models", "slow-oracle", "--tasks", "edges", "--datasets", "scenes-a", "--limit", "3",
            "--data-root", str(builtin_root), "--no-plots", "--no-progress", "--out", str(tmp_path / "out"), "--check"]
    proc = subprocess.Popen([sys.executable, "-m", "icl.run", *args, "--calibrate", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not list(scratch_root.glob(f"{SCRATCH_PREFIX}*/store.sqlite")) and proc.poll() is None:
            assert time.time() < deadline, "the calibration never made its scratch store"
            time.sleep(0.05)
        time.sleep(1.0)  # inside the model's first batch (60 s)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    (killed,) = scratch_root.glob(f"{SCRATCH_PREFIX}*")
    assert killed.name.startswith(scratch_prefix().replace(str(os.getpid()), str(proc.pid)))

    host = scratch_prefix().split("-")[2]
    live = scratch_root / f"{scratch_prefix()}live1"  # this process: alive
    other_host = scratch_root / f"{SCRATCH_PREFIX}not{host}x-{proc.pid}-abc"  # another node's, same dead pid
    a_file = scratch_root / f"{SCRATCH_PREFIX}{host}-{proc.pid}-file1"
    alike = scratch_root / f"{SCRATCH_PREFIX}notes"
    for folder in (live, other_host, alike):
        folder.mkdir()
        (folder / "keep.txt").write_text("mine")
    a_file.write_text("mine")
    assert socket.gethostname()  # the prefix names this host

    args = [a if a != "slow-oracle" else "oracle" for a in args]  # the plugin is the subprocess's
    assert main(args) == 0
    report = _report(tmp_path / "out")
    assert not killed.exists()
    assert report["warnings"] == [f"removed 1 scratch folder(s) of --calibrate checks that were killed before removing "
                                  f"them: {killed}"], report["warnings"]
    for kept in (live, other_host, alike):
        assert (kept / "keep.txt").read_text() == "mine"
    assert a_file.read_text() == "mine"
    assert main(args) == 0 and _report(tmp_path / "out")["warnings"] == []  # once


@pytest.fixture
def slow_model():
    """cobsat's copy-last taking 2 s to load and 0.05 s a request (tests/run/_adapters.py), registered."""
    from icl.models import register_model
    from icl.models.registry import unregister_model

    register_model("slow-copy-last", "tests.run._adapters:SlowCopyLast")
    yield "slow-copy-last"
    unregister_model("slow-copy-last")


@pytest.mark.slow  # three real runs, one loading a model for 2 s
def test_a_finished_run_judged_anew_is_estimated_as_its_new_judge_s_work(tmp_path, slow_model, slow_judge, capsys):
    """A finished run (cobsat --fast, a model taking 2 s to load, judged by cobsat's judge) judged
    again by another judge: the run reuses every stored answer (the model is neither loaded nor
    asked) and only the new judge works. The check counts the answers stored, estimates the model
    at its scoring seconds alone (no load) and the new judge from its stored compute (a run of it
    on one task), and the following run's ``execute_s`` is within COST_FACTOR of the estimate."""
    store = tmp_path / "store.sqlite"

    def args(out: str, tasks: str, *extra: str) -> list[str]:
        return ["cobsat", "--fast", "--tasks", tasks, "--shots", "0,2", "--prompts", "2", "--out", str(tmp_path / out),
                "--store", str(store), "--no-progress", "--no-plots", "--device", "cpu", "--models", slow_model,
                *extra]

    assert main(args("first", "Color-I,Texture-II")) == 0  # the finished run, cobsat's own judge
    assert main(args("judged", "Texture-II", "--judge", slow_judge)) == 0  # the new judge's compute, on one task
    assert main(args("next", "Color-I,Texture-II", "--judge", slow_judge, "--check")) == 0
    report = _report(tmp_path / "next")
    entries = {e["label"]: e for e in report["models"]}
    model, judge = entries[slow_model], entries[slow_judge]
    assert model["items_remaining"] == judge["items_remaining"] == 4  # Color-I, not yet judged by the new judge
    assert model["answers_stored"] == 4 and model["load_s"] == 0.0, model
    assert "4 answers stored, only scored" in model["estimate"]
    assert judge["estimate_basis"] == "stored compute of 4 items"
    estimate = report["plan"]["estimated_s"]
    assert estimate == pytest.approx(model["estimated_s"] + judge["estimated_s"])
    capsys.readouterr()
    assert main(args("next", "Color-I,Texture-II", "--judge", slow_judge)) == 0
    real = json.loads((tmp_path / "next" / "results.json").read_text())["timings"]["execute_s"]
    old = estimate + 2.0 + 4 * 0.05  # what counting the model's load and its calls added
    with capsys.disabled():
        print(f"\nre-judged: estimated {estimate:.3f} s, ran {real:.3f} s: ratio {estimate / real:.2f} "
              f"(counting the model's load and calls: {old / real:.2f})")
    assert 1 / COST_FACTOR <= estimate / real <= COST_FACTOR, (estimate, real)
    assert model["estimated_s"] < real / COST_FACTOR  # the model only scores: its part is the judge's fraction
