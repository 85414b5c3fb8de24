"""``--check`` (icl.run.planning.check): one check lists every problem a run would meet before its first
model call, with its fix, writes only ``check.json`` and exits 0 or 2; its counts are the run's.

Real everything: tiny LLaVA / Idefics3 checkpoints (``icl.models.vlm.tiny``,
``tests/models/vlm/tiny_vlm.py``), a fabricated CoBSAT release (``tests/benchmarks/cobsat``), the
real SQLite store and a FolderLock held by another process. Only the free space is injected
(``main(..., free_space=...)``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icl.run.__main__ import main
from icl.run.planning.check import CHECK_FILE
from tests.models.hub_server import REPO, hf_env, hub_llava, server  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "benchmarks" / "cobsat"))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A good tiny LLaVA, the same with its safetensors cut in half, and the LLaVA folder holding an
    Idefics3 checkpoint (another architecture: keys and shapes differ)."""
    from icl.models.vlm.tiny import build_llava
    from tests.models.vlm.tiny_vlm import build_idefics3

    root = tmp_path_factory.mktemp("check-ckpt")
    llava = build_llava(root / "llava", max_positions=1024)
    trunc = root / "truncated"
    shutil.copytree(llava, trunc)
    data = (trunc / "model.safetensors").read_bytes()
    (trunc / "model.safetensors").write_bytes(data[: len(data) // 2])
    other = root / "other"
    shutil.copytree(llava, other)
    shutil.copy(build_idefics3(root / "idefics3") / "model.safetensors", other / "model.safetensors")
    return dict(llava=llava, truncated=trunc, other=other, none=root / "no-such-judge")


@pytest.fixture
def release(tmp_path):
    """A CoBSAT release missing the images of one object (``datasets/style_car``)."""
    from test_cobsat_data import fabricate

    root = fabricate(tmp_path / "release")
    shutil.rmtree(root / "datasets" / "style_car")
    return root


@pytest.fixture
def held(tmp_path):
    """A live FolderLock on ``tmp_path/out`` held by another process (the real lock)."""
    out = tmp_path / "out"
    code = ("import sys; from icl.run.outputs.lock import FolderLock; "
            f"FolderLock({str(out)!r}, ['python', '-m', 'icl.run', 'cobsat', '(the other run)']).acquire(); "
            "print('held', flush=True); sys.stdin.read()")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield out, proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def _report(out: Path) -> dict:
    return json.loads((out / CHECK_FILE).read_text())


def test_one_check_lists_all_five_problems_and_the_disk_warning(checkpoints, release, held, capsys):
    out, pid = held
    c = checkpoints
    args = ["cobsat", "--data-root", str(release), "--gen-mode", "description", "--family", "qwen", "--tasks",
            "Style-II", "--shots", "2", "--prompts", "3", "--no-progress", "--out", str(out), "--device", "cpu",
            "--models", f"hf-vlm:weights={c['truncated']},hf-vlm:weights={c['other']},hf-vlm:weights={c['llava']}",
            "--judge", f"hf-vlm:weights={c['none']}", "--check"]
    t0 = time.perf_counter()
    code = main(args, free_space=lambda path: 1000)
    elapsed = time.perf_counter() - t0
    printed = capsys.readouterr().out
    assert code == 2 and elapsed < 5, elapsed
    report = _report(out)
    problems = report["problems"]
    by = {(p["check"], p["where"]): p for p in problems}
    # 1. the dataset missing files: the prompt that needs a car image, naming the file
    data = [p for p in problems if p["check"] == "data"]
    assert len(data) == 1 and "style_car" in data[0]["message"] and "restore" in data[0]["fix"]
    # 2. the judge whose weights are absent
    judge = by[("judges", f"judge hf-vlm[weights={c['none']}]")]
    assert "not found" in judge["message"] and "--judge" in judge["fix"]
    # 3. the truncated safetensors file (its header does not cover the file)
    trunc = by[("checkpoint", f"model hf-vlm[weights={c['truncated']}]")]
    assert "not a complete safetensors file" in trunc["message"] and str(c["truncated"]) in trunc["message"]
    assert trunc["kind"] == "damaged checkpoint" and "copy the weight file again" in trunc["fix"]
    # 4. the checkpoint of another architecture: names and shapes against LLaVA built on the meta device
    other = by[("checkpoint", f"model hf-vlm[weights={c['other']}]")]
    assert "does not fit the architecture" in other["message"] and "LlavaForConditionalGeneration" in other["message"]
    assert "missing" in other["message"] and "shapes differ" in other["message"]
    # 5. the output folder another live run holds, naming its process
    lock = by[("output", str(out))]
    assert f"process {pid}" in lock["message"] and "(the other run)" in lock["message"]
    # the disk too small for the outputs: an estimate, so a warning, as the run warns (one policy)
    (disk,) = [w for w in report["warnings"] if w.startswith("the outputs need about")]
    assert f"and {out} has 1000 B free; the run goes on" in disk and report["disk"]["free_bytes"] == 1000
    assert len(problems) == 5 and report["runnable"] is False and report["exit_code"] == 2
    # every problem printed with its fix, in one listing; each names its model once
    assert "5 problem(s):" in printed and printed.count("fix: ") == 5 and "NOT runnable (exit 2)" in printed
    assert judge["message"].startswith("weights 'config.json' not found"), judge["message"]
    # the good model is still planned and measured; nothing but check.json was written
    good = next(m for m in report["models"] if m["label"] == f"hf-vlm[weights={c['llava']}]")
    assert good["params"] > 0 and good["bytes"] == 4 * good["params"] and good["remaining"] == 2
    assert report["lock"]["held"] and report["lock"]["holder"]["pid"] == pid
    assert sorted(p.name for p in out.iterdir()) == [".icl.lock", CHECK_FILE]


def _cobsat_fast(out: Path) -> list[str]:
    return ["cobsat", "--fast", "--tasks", "Color-I,Texture-II", "--shots", "0,2", "--prompts", "2", "--out", str(out),
            "--no-progress", "--no-plots", "--device", "cpu"]


def _run_counts(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())["counts"]


def test_a_clean_plan_checks_runnable_and_counts_what_the_run_computes(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*_cobsat_fast(out), "--check"]) == 0
    report = _report(out)
    assert report["runnable"] and report["problems"] == [] and not (out / "store.sqlite").exists()
    assert sorted(p.name for p in out.iterdir()) == [CHECK_FILE]
    plan = report["plan"]
    assert plan["stored"] == 0 and plan["remaining"] == plan["planned"] == 8
    assert {(c["task"], c["planned"]) for c in plan["cells"]} == {("Color-I", 4), ("Texture-II", 4)}
    assert report["models"][0]["estimate"].startswith("unknown (no stored compute")
    assert "runnable (exit 0)" in capsys.readouterr().out
    # the run then computes exactly what the check counted
    assert main(_cobsat_fast(out)) == 0
    counts = _run_counts(out)
    assert counts["computed"] == plan["remaining"] and counts["skipped"] == plan["stored"]
    assert counts["planned"] == plan["planned"]


def test_after_a_run_the_check_reports_the_resume_and_writes_nothing_to_the_store(tmp_path):
    out = tmp_path / "out"
    assert main(_cobsat_fast(out)) == 0
    store = out / "store.sqlite"
    before = (store.read_bytes(), store.stat().st_mtime_ns, sorted(p.name for p in out.iterdir()))
    assert main([*_cobsat_fast(out), "--check"]) == 0
    report = _report(out)
    assert report["plan"]["stored"] == report["plan"]["planned"] == 8 and report["plan"]["remaining"] == 0
    assert all(c["remaining"] == 0 for c in report["plan"]["cells"])
    assert report["resume"] == dict(store_exists=True, stored=8, remaining=0)
    # the cost of this model identity comes from the compute the store holds
    model = report["models"][0]
    assert model["measured_items"] == 8 and model["seconds_per_item"] > 0 and model["estimated_s"] == 0
    # the store untouched: same bytes, same mtime, no -wal/-shm left beside it; only check.json added
    assert (store.read_bytes(), store.stat().st_mtime_ns) == before[:2]
    assert sorted(p.name for p in out.iterdir()) == sorted(before[2] + [CHECK_FILE])
    # and the run agrees: nothing to compute
    assert main(_cobsat_fast(out)) == 0
    assert _run_counts(out)["computed"] == 0 and _run_counts(out)["skipped"] == 8


def test_check_key_of_run_toml(tmp_path):
    out = tmp_path / "out"
    cfg = tmp_path / "run.toml"
    cfg.write_text("check = true\n")
    assert main([*_cobsat_fast(out), "--config", str(cfg)]) == 0
    assert _report(out)["runnable"] and not (out / "store.sqlite").exists()


def test_declared_cuda_is_checked_as_declared(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: --device cuda is seen, not only declared")
    out = tmp_path / "out"
    args = [a if a != "cpu" else "cuda" for a in _cobsat_fast(out)]
    assert main([*args, "--check"]) == 0
    report = _report(out)
    assert report["device"] == dict(declared="cuda", used="cuda", seen=False, memory=None)
    assert any("checked as declared, not as seen" in w for w in report["warnings"])


def _as_if_run_on(store: Path, gpu: str) -> None:
    """Rewrite a store written here as a GPU node's would be: every model's and judge's identity
    holds ``device`` ``cuda:<gpu>`` (icl.run.planning.models.device_kind), so its id is another, in every
    table (no GPU here to write such a store for real)."""
    import hashlib
    import sqlite3

    con = sqlite3.connect(store)
    with con:
        for mid, identity in con.execute("SELECT model_id, identity FROM models").fetchall():
            ident = dict(json.loads(identity), device=f"cuda:{gpu}")
            new = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
            con.execute("UPDATE models SET model_id=?, identity=? WHERE model_id=?",
                        (new, json.dumps(ident, sort_keys=True), mid))
            for table, column in (("scores", "model_id"), ("scores", "judge_id"), ("responses", "model_id"),
                                  ("links", "model_id")):
                con.execute(f"UPDATE {table} SET {column}=? WHERE {column}=?", (new, mid))
    con.close()


def test_declared_cuda_counts_the_resume_of_a_gpu_nodes_store_with_its_judge(tmp_path):
    """A store written on a GPU node (its identities hold the GPU's name) checked on a login
    node with ``--device cuda`` as declared: the model's and the judge's stored ids stand for
    theirs, so the scores stored count as stored (the judge's too: before, a judged benchmark
    counted every item as remaining) and both times are known."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: --device cuda is seen, not only declared")
    out = tmp_path / "out"
    assert main([*_cobsat_fast(out), "--models", "copy-last"]) == 0
    _as_if_run_on(out / "store.sqlite", "NVIDIA H100 80GB HBM3")
    args = [a if a != "cpu" else "cuda" for a in _cobsat_fast(out)]
    assert main([*args, "--models", "copy-last,collage", "--check"]) == 0
    report = _report(out)
    entries = {e["label"]: e for e in report["models"]}
    assert (report["resume"]["stored"], report["resume"]["remaining"]) == (8, 8)  # copy-last's, collage's
    assert entries["copy-last"]["items_remaining"] == 0 and entries["collage"]["items_remaining"] == 8
    judge = entries["cobsat-judge"]
    assert judge["items_remaining"] == 8 and judge["estimate_basis"] == "stored compute of 8 items"


def test_the_run_refuses_a_truncated_checkpoint_before_loading(tmp_path, checkpoints, capsys):
    out = tmp_path / "out"
    code = main(["cobsat", "--fast", "--gen-mode", "description", "--family", "qwen", "--tasks", "Color-I",
                 "--shots", "0", "--prompts", "1", "--no-progress", "--out", str(out), "--device", "cpu",
                 "--models", f"hf-vlm:weights={checkpoints['truncated']}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not a complete safetensors file" in err
    assert not (out / "store.sqlite").exists()


@pytest.mark.slow
def test_check_of_every_fast_run(tmp_path, fast_data, monkeypatch):
    monkeypatch.setenv("ICL_DATA_ROOT", str(fast_data))
    assert main(["--fast", "--check", "--out", str(tmp_path), "--no-progress"]) == 0
    from icl.benchmarks.registry import list_benchmarks

    for name in list_benchmarks():
        report = json.loads((tmp_path / f"{name}-fast" / CHECK_FILE).read_text())
        assert report["runnable"] and report["plan"]["remaining"] > 0, name
        assert not (tmp_path / f"{name}-fast" / "store.sqlite").exists()


def test_hub_weights_not_in_the_cache_need_a_download_and_nothing_is_downloaded(hf_env, server, tmp_path, capsys):
    """``hf:`` references resolve from the Hugging Face cache only: one not there is a problem
    whose fix is ``--prefetch``, and the plan is shown all the same (the model's items, marked as
    waiting for the download); after it, the same check is runnable and plans the same cells."""
    out = tmp_path / "run"
    args = ["vlicl", "--fast", "--models", "hf-vlm", "--model-arg", f"weights=hf:{REPO}", "--tasks", "clevr",
            "--seeds", "0", "--shots", "0,1", "--queries", "2", "--out", str(out), "--data-root",
            str(tmp_path / "data"), "--no-plots", "--no-progress", "--device", "cpu"]
    assert main([*args, "--check"]) == 2
    printed = capsys.readouterr().out
    before = _report(out)
    (problem,) = before["problems"]
    assert problem["check"] == "models" and f"hf:{REPO}" in problem["message"]
    assert "--check never downloads" in problem["message"] and "--prefetch" in problem["fix"]
    assert problem["kind"] == "needs download"  # from the error's type (icl.models.hub.HubNotCached)
    assert not (hf_env / "models--org--tiny" / "snapshots").exists()  # nothing came down
    # the plan is shown all the same, the model marked as waiting for its download
    label = f"hf-vlm[weights=hf:{REPO}]"
    cells = before["plan"]["cells"]
    assert cells and all(c["model"] == label and c["needs_download"] and c["stored"] == 0 for c in cells), cells
    assert before["plan"]["models"] == 1 and before["plan"]["remaining"] == sum(c["planned"] for c in cells) > 0
    (entry,) = [e for e in before["models"] if e["label"] == label]
    assert entry["estimate"] == "unknown (needs download (--prefetch))" and before["plan"]["estimated_s"] is None
    assert f"{label} (needs download (--prefetch))" in printed
    assert main([*args, "--prefetch"]) == 0
    assert main([*args, "--check"]) == 0
    report = _report(out)
    assert report["runnable"] and report["models"][0]["params"] > 0 and report["plan"]["remaining"] > 0
    # the plan the download waited for is the plan
    assert [(c["task"], c["planned"]) for c in report["plan"]["cells"]] == [(c["task"], c["planned"]) for c in cells]


@pytest.mark.parametrize("name", ["not in the Hugging Face cache", "HF_HUB_OFFLINE cached snapshot"])
def test_a_problem_whose_text_only_mentions_the_cache_is_not_a_download(tmp_path, capsys, name):
    """What a problem is comes from the type of the error that said it, never from its text: a
    local weights folder that is missing, whose name merely reads like a Hub cache miss, is a
    model problem to fix (not a download that --prefetch would fetch), and no plan waits on it."""
    out = tmp_path / "run"
    weights = tmp_path / name
    args = ["vlicl", "--fast", "--models", "hf-vlm", "--model-arg", f"weights={weights}", "--tasks", "clevr",
            "--seeds", "0", "--shots", "0", "--queries", "1", "--out", str(out), "--no-plots", "--no-progress",
            "--device", "cpu", "--check"]
    assert main(args) == 2
    printed = capsys.readouterr().out
    (problem,) = _report(out)["problems"]
    assert problem["check"] == "models" and name in problem["message"]
    assert "--prefetch" not in problem["fix"] and "weights=PATH" in problem["fix"], problem["fix"]
    assert "needs download" not in printed and not _report(out)["plan"]["cells"]
    assert problem["kind"] == ""


def test_what_a_problem_is_comes_from_the_type_of_its_error_through_the_errors_that_wrap_it():
    from icl.models.errors import CheckpointDamaged, CheckpointRefused, WeightsError
    from icl.models.hub import HubCacheDamaged, HubNotCached
    from icl.run.errors import CannotServe, ConfigError
    from icl.run.planning import check_parts as parts
    from icl.run.planning.check import fix_for

    missing = ModuleNotFoundError("No module named 'torchvision'", name="torchvision")
    cases = [(HubNotCached("a"), parts.NEEDS_DOWNLOAD), (HubCacheDamaged("b"), parts.CACHE_DAMAGED),
             (CheckpointDamaged("c"), parts.CHECKPOINT_DAMAGED), (CheckpointRefused("d"), parts.CHECKPOINT_REFUSED),
             (CannotServe("e"), parts.CANNOT_SERVE), (missing, parts.MISSING_PACKAGE),
             (WeightsError("not in the Hugging Face cache (--prefetch repairs it)"), ""), (None, "")]
    assert {kind for _, kind in cases} == set(parts.KINDS) | {""}
    for error, kind in cases:
        assert parts.kind_of(error) == kind and parts.kind_of(ConfigError("model 'm': ...", error)) == kind
    assert parts.package_of(ConfigError("model 'm': ...", missing)) == "torchvision"
    assert fix_for("models", parts.MISSING_PACKAGE, "torchvision").startswith("install the package torchvision")
    assert fix_for("models", parts.NEEDS_DOWNLOAD).startswith("the weights need a download")


COST_FACTOR = 3  # docs/runs.md "Before a long run": the time estimate against the following run


@pytest.mark.slow
def test_the_time_estimate_from_stored_compute_is_within_a_factor_of_the_following_run(tmp_path):
    """A first run (tiny LLaVA on vlicl --fast, seed 0: 72 items) fills the store with its
    compute; the check of another plan sharing that store (seeds 1, 2) estimates its time from
    it (load + seconds per item x items), and the following real run's ``execute_s`` (loading,
    answering, scoring) is within :data:`COST_FACTOR` of it. Each run is its own process, as real
    runs are (a warm process would make the second run faster than the first's items)."""
    from icl.models.vlm.tiny import build_llava

    tiny = build_llava(tmp_path / "tiny", max_positions=2048)
    store = tmp_path / "store.sqlite"
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def run(out: Path, seeds: str, *extra: str) -> None:
        args = ["vlicl", "--fast", "--models", f"hf-vlm:weights={tiny}", "--seeds", seeds, "--shots", "0,1,2",
                "--queries", "4", "--out", str(out), "--store", str(store), "--no-plots", "--no-progress", "--device",
                "cpu", "--data-root", str(tmp_path / "data"), *extra]
        proc = subprocess.run([sys.executable, "-m", "icl.run", *args], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]

    run(tmp_path / "first", "0")
    run(tmp_path / "next", "1,2", "--check")
    report = _report(tmp_path / "next")
    model = report["models"][0]
    assert model["measured_items"] > 50 and model["items_remaining"] == 2 * model["measured_items"]
    assert model["load_s"] > 0
    estimate = report["plan"]["estimated_s"]
    assert estimate == model["estimated_s"] > 0
    run(tmp_path / "next", "1,2")
    real = json.loads((tmp_path / "next" / "results.json").read_text())["timings"]["execute_s"]
    ratio = estimate / real
    print(f"estimated {estimate:.3f} s, ran {real:.3f} s: ratio {ratio:.2f}")
    assert 1 / COST_FACTOR <= ratio <= COST_FACTOR, (estimate, real)


MEMORY_FACTOR = 4  # docs/runs.md "Before a long run": the peak memory estimate against the measured peak


def _measured_peak(run) -> int:
    """The peak of torch's CPU allocations while ``run()`` runs (the profiler's per-op memory,
    summed in the order the ops end)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    current = peak = 0
    for e in sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.end):
        current += e.self_cpu_memory_usage
        peak = max(peak, current)
    return peak


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llava", "idefics3", "gemma3"])
def test_the_memory_estimate_is_within_a_factor_of_the_measured_peak(family, tmp_path):
    """The tiny checkpoint of each hf-vlm family, loaded and generating for a batch of 2 requests
    of T = max_context tokens on the CPU: the peak of torch's allocations (weights included) is
    within :data:`MEMORY_FACTOR` of ``W + 2 x A`` (icl.run.planning.check.memory_estimate). Measured
    ratios: 0.82 (LLaVA), 0.82-0.94 (Idefics3), 0.52-0.58 (Gemma 3)."""
    import torch
    from transformers import AutoModelForImageTextToText

    from icl.models.vlm.hf import HFVisionLanguage
    from icl.models.vlm.tiny import build_llava
    from icl.run.planning.check import inspect_weights, memory_estimate, peak_bytes
    from tests.models.vlm import tiny_vlm

    build = build_llava if family == "llava" else getattr(tiny_vlm, f"build_{family}")
    weights = build(tmp_path / family, max_positions=1024)
    tokens, batch = 256, 2
    adapter = HFVisionLanguage(weights=str(weights), max_context=tokens)
    estimate = memory_estimate(adapter, inspect_weights(adapter).params * 4, 4)
    assert estimate["tokens"] == tokens and estimate["activation_bytes_per_request"] > 0

    def generate() -> None:
        model = AutoModelForImageTextToText.from_pretrained(weights, dtype=torch.float32)
        ids = torch.randint(5, model.config.get_text_config().vocab_size, (batch, tokens - 4))
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False)

    measured = _measured_peak(generate)
    ratio = peak_bytes(estimate, batch) / measured
    print(f"{family}: estimated {peak_bytes(estimate, batch)} B, measured {measured} B: ratio {ratio:.2f}")
    assert 1 / MEMORY_FACTOR <= ratio <= MEMORY_FACTOR


def test_the_check_reports_the_memory_estimate(tmp_path):
    out = tmp_path / "out"
    assert main([*_cobsat_fast(out), "--check"]) == 0
    report = _report(out)
    memory = report["models"][0]["memory"]
    assert set(memory) >= {"weights_bytes", "activation_bytes_per_request", "peak_bytes", "basis", "batch_size"}
    assert "memory" in report["device"]  # None without a visible CUDA device


def test_the_run_warns_of_a_disk_too_small_and_goes_on_and_a_resume_with_nothing_left_says_nothing(
        tmp_path, monkeypatch, capsys):
    """The run counts the disk its outputs need as --check does (icl.run.planning.check.to_load); the count
    is an estimate, so a run warns in one line naming the output folder and goes on (a disk that
    does fill is one line keeping the store: tests/reliability/test_reliability_disk.py); a run
    with nothing left to compute needs no room and says nothing."""
    import icl.run.planning.check as check

    monkeypatch.setattr(check, "disk_free", lambda path: 1024)
    out = tmp_path / "out"
    args = _cobsat_fast(out)
    assert main([*args, "--check"]) == 0  # one policy: the check warns the same line and says runnable
    checked = _report(out)
    (said,) = checked["warnings"]
    capsys.readouterr()
    (out / CHECK_FILE).unlink()
    assert main(args) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warning == [f"icl.run: warning: {said}"], (warning, said)
    assert f"and {out} has 1.0 KiB free; the run goes on" in said
    assert (out / "results.json").is_file()
    # the estimate is an upper bound of what the run wrote, within 3x
    written = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    needed = checked["disk"]["needed_bytes"]
    with capsys.disabled():
        print(f"disk: estimated {needed} B, written {written} B: {needed / written:.2f}x")
    assert written <= needed <= 3 * written
    assert main(args) == 0  # everything is in the store: nothing to write, nothing to say
    assert "warning" not in capsys.readouterr().err


def test_the_own_network_class_is_named_as_the_check_names_it():
    """The run-start checkpoint check finds the families that build their own network by the class's
    name (importing it imports torch): the name must be the class's."""
    from icl.models.vicl._torch import CheckpointNetworkAdapter
    from icl.run.planning.check import OWN_NETWORK_ADAPTER

    assert f"{CheckpointNetworkAdapter.__module__}.{CheckpointNetworkAdapter.__qualname__}" == OWN_NETWORK_ADAPTER


@pytest.mark.slow  # a run in a fresh process
def test_a_run_of_models_without_checkpoints_never_imports_torch(fast_data, tmp_path):
    """The built-in baselines load no checkpoint: a run of them (its checkpoint check before loading
    included) imports no torch in the main process (about 1 s and 50 MB a run)."""
    code = ("import sys\nfrom icl.run.__main__ import main\n"
            f"status = main(['vibe', '--fast', '--no-plots', '--no-progress', '--data-root', {str(fast_data)!r}, "
            f"'--out', {str(tmp_path / 'out')!r}])\n"
            "print('status', status, 'torch', 'torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "status 0 torch False", proc.stdout[-2000:]


def qwen2_vl_folder(tmp_path):
    """A real Qwen2-VL folder (the tiny LLaVA's tokenizer, a Qwen2-VL configuration and image
    processor), whose processor needs torchvision; skips where torchvision is installed."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed: Qwen2-VL's processor loads")
    from transformers import Qwen2VLConfig, Qwen2VLImageProcessor

    from icl.models.vlm.tiny import build_llava

    folder = build_llava(tmp_path / "qwen2-vl")
    Qwen2VLConfig(vision_config=dict(depth=1, embed_dim=16, hidden_size=16, num_heads=2), hidden_size=32,
                  intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                  vocab_size=128).save_pretrained(folder)
    Qwen2VLImageProcessor().save_pretrained(folder)
    processor = folder / "processor_config.json"
    processor.write_text(json.dumps({**json.loads(processor.read_text()), "processor_class": "Qwen2VLProcessor"}))
    return folder


@pytest.mark.slow  # a tiny checkpoint and the built-in VL-ICL data
def test_a_missing_package_is_named_with_where_it_comes_from(tmp_path, capsys):
    """Qwen2-VL's processor needs torchvision (its video processor), which neither lock carries:
    a real Qwen2-VL folder (the tiny LLaVA's tokenizer, a Qwen2-VL configuration and image
    processor) is one problem naming the package and how to install it, not "fix the model's
    arguments or weights", in one line."""
    folder = qwen2_vl_folder(tmp_path)
    out = tmp_path / "out"
    args = ["vlicl", "--fast", "--models", f"hf-vlm:weights={folder}", "--tasks", "clevr", "--seeds", "0", "--shots",
            "0", "--queries", "2", "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-plots",
            "--no-progress", "--device", "cpu", "--check"]
    assert main(args) == 2
    printed = capsys.readouterr().out
    # (the tiny LLaVA's weights under a Qwen2-VL configuration are a checkpoint problem besides)
    problems = [p for p in _report(out)["problems"] if p["check"] == "models"]
    assert len(problems) == 1 and problems[0]["where"] == f"model hf-vlm[weights={folder}]", problems
    (problem,) = problems
    assert problem["message"].startswith("needs the package torchvision, which is not installed ("), problem
    assert "\n" not in problem["message"]
    assert problem["fix"].startswith("install the package torchvision, the release built for torch ")
    assert "requirements/lock-gpu.txt" in problem["fix"] and "arguments or weights" not in problem["fix"]
    assert "fix: install the package torchvision" in printed


@pytest.mark.parametrize("where, message, expected", [
    ("judge hf-vlm[weights=/w/j]", "judge 'hf-vlm[weights=/w/j]': model 'hf-vlm': hf-vlm: weights 'config.json' not found",
     "weights 'config.json' not found"),
    ("model openai[model=m]", "model 'openai': openai: price_in must be a non-negative number",
     "price_in must be a non-negative number"),
    ("model copy-last", "hf-vlm: not this model's prefix", "hf-vlm: not this model's prefix"),
    ("output /x", "model 'x': kept (not a model's problem)", "model 'x': kept (not a model's problem)"),
])
def test_a_problem_names_its_model_once(where, message, expected):
    from icl.run.planning.check import unstacked

    assert unstacked(where, message) == expected


@pytest.mark.slow  # a tiny checkpoint and the built-in VL-ICL data
def test_a_judge_missing_a_package_stops_the_run_in_one_line(tmp_path, capsys):
    """The run's own judge check (icl.run.planning.setup.check_judges), not only ``--check``: a judge
    whose processor needs torchvision (a real Qwen2-VL folder) stops the run before any model is
    called, in one line naming the package and its fix, never a traceback."""
    folder = qwen2_vl_folder(tmp_path)
    out = tmp_path / "out"
    args = ["vlicl", "--fast", "--models", "copy-last", "--judge", f"hf-vlm:weights={folder}", "--tasks", "open_t2i_mi",
            "--seeds", "0", "--shots", "1", "--queries", "2", "--out", str(out), "--data-root", str(tmp_path / "data"),
            "--no-plots", "--no-progress", "--device", "cpu"]
    capsys.readouterr()  # the folder's own making (transformers' progress bars)
    assert main(args) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert "needs the package torchvision, which is not installed" in lines[0], lines
    assert "install the package torchvision" in lines[0], lines
