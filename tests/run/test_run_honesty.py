"""Issue 19: the runner keeps its word. Built-in synthetic data never passes for a benchmark,
a model is asked only for what it serves, the ground truth is granted (never claimed), one
failure policy holds in every benchmark, and the CLI refuses what it cannot do in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from icl.data.registry import get_dataset
from icl.models import Adapter, AnalogyRequest, ChatRequest, GenerationRequest, register_model
from icl.models.registry import unregister_model
from icl.run.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["--no-plots", "--no-progress", "--device", "cpu"]


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_empty_data_root_exits_2_in_one_line(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["vibe", "--data-root", str(empty), "--out", str(tmp_path / "out"), *QUIET]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no converted vibe dataset" in err and "icl.data convert" in err
    assert _tree(empty) == [] and not (tmp_path / "out").exists()


def test_one_real_dataset_runs_alone_and_the_data_root_is_untouched(fast_data, tmp_path, capsys):
    root = tmp_path / "data"
    shutil.copytree(get_dataset("scenes-a", root=fast_data, fast=True).root, root / "mydata")
    meta = json.loads((root / "mydata" / "meta.json").read_text())
    (root / "mydata" / "meta.json").write_text(json.dumps({**meta, "name": "mydata"}))
    before = _tree(root)
    out = tmp_path / "out"
    assert main(["vibe", "--data-root", str(root), "--tasks", "segmentation", "--limit", "2", "--models",
                 "copy-target", "--out", str(out), *QUIET]) == 0
    assert _tree(root) == before  # no _builtin/ written into the user's data folder
    results = json.loads((out / "results.json").read_text())
    assert list(results["data"]) == ["mydata"]
    assert results["data"]["mydata"].startswith(f"release, converted (version {meta['version']}, content sha256 ")
    assert {r["dataset"] for r in _csv(out / "vibe_results.csv")} == {"mydata"}  # no built-in mixed in
    assert "synthetic" not in (out / "report.md").read_text().splitlines()[0]
    assert "synthetic" not in capsys.readouterr().out


def test_mixing_builtin_and_real_datasets_is_refused(fast_data, tmp_path, capsys):
    root = tmp_path / "data"
    shutil.copytree(get_dataset("scenes-a", root=fast_data, fast=True).root, root / "mydata")
    code = main(["vibe", "--data-root", str(root), "--datasets", "mydata,scenes-b", "--out", str(tmp_path / "o"),
                 *QUIET])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "mixes built-in synthetic data (scenes-b)" in err


def test_fast_reports_say_built_in_synthetic_data(fast_data, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["vibe", "--fast", "--data-root", str(fast_data), "--tasks", "segmentation", "--limit", "1",
                 "--out", str(out), *QUIET]) == 0
    assert ("vibe: built-in synthetic data, not the benchmark's datasets; a smoke test of the toolkit, not the "
            "benchmark's results") in capsys.readouterr().out.splitlines()  # the terminal says so too
    title = (out / "report.md").read_text().splitlines()[0]
    assert "built-in synthetic data" in title
    data = json.loads((out / "results.json").read_text())["data"]
    assert data and set(data.values()) == {"built-in synthetic"}


def _csv(path: Path) -> list[dict]:
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class ClaimsTheAnswer(Adapter):
    """A third-party adapter that sets ``privileged`` to receive the ground truth."""

    name = "claims-the-answer"
    privileged = True
    reference = True

    def predict(self, requests):
        return [r.oracle_target for r in requests]


def test_third_party_privileged_adapter_is_refused(fast_data, tmp_path, capsys):
    register_model("claims-the-answer", ClaimsTheAnswer)
    try:
        code = main(["vibe", "--fast", "--data-root", str(fast_data), "--models", "claims-the-answer",
                     "--out", str(tmp_path / "out"), *QUIET])
    finally:
        unregister_model("claims-the-answer")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "privileged = True" in err
    assert not (tmp_path / "out" / "store.sqlite").exists()


class NeverLoads(Adapter):
    """Serves every request type and fails to load."""

    name = "never-loads"
    serves = (AnalogyRequest, ChatRequest, GenerationRequest)

    def load(self, device):
        raise OSError("checkpoint shard 3 of 4 is missing")

    def predict(self, requests):  # pragma: no cover - never reached
        raise AssertionError("a model that failed to load was asked")


@pytest.mark.parametrize("bench,other", [("vibe", "copy-target"), ("best50", "oracle"), ("vlicl", "copy-last")])
def test_a_model_that_fails_to_load_stops_with_one_line_and_exit_1(fast_data, tmp_path, capsys, bench, other):
    register_model("never-loads", NeverLoads)
    out = tmp_path / "out"
    extra = ["--tasks", "segmentation", "--limit", "2"] if bench == "vibe" else \
        ["--tasks", "clevr,open_t2i_mi"] if bench == "vlicl" else ["--limit", "2"]
    try:
        code = main([bench, "--fast", "--data-root", str(fast_data), "--models", f"never-loads,{other}",
                     "--out", str(out), *extra, *QUIET])
    finally:
        unregister_model("never-loads")
    err = capsys.readouterr().err
    assert code == 1
    stopped = [line for line in err.splitlines() if line.startswith("STOPPED")]
    assert len(stopped) == 1 and "never-loads" in stopped[0] and "shard 3 of 4 is missing" in stopped[0]
    import sqlite3

    con = sqlite3.connect(out / "store.sqlite")
    rows = con.execute("SELECT m.label, s.status FROM scores s JOIN models m ON m.model_id = s.model_id").fetchall()
    con.close()
    assert rows and {label for label, _ in rows} == {other}  # never a 0 % for the model that never loaded
    assert {status for _, status in rows} == {"ok"}
    meta = json.loads((out / "results.json").read_text())
    assert "never-loads" in meta["stopped_models"]


def test_chat_model_runs_vlicl_and_skips_text_to_image_tasks(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["vlicl", "--fast", "--models", "frequent-answer", "--out", str(out), *QUIET])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    line = [ln for ln in captured.out.splitlines() if "skipped for frequent-answer" in ln]
    assert len(line) == 1 and "GenerationRequest" in line[0]
    for task in ("open_t2i_mi", "cobsat", "fast_count_t2i", "fast_attr_t2i"):
        assert task in line[0]
    meta = json.loads((out / "results.json").read_text())
    assert set(meta["not_applicable"]["frequent-answer"]) == {
        f"{t} (GenerationRequest)" for t in ("open_t2i_mi", "cobsat", "fast_count_t2i", "fast_attr_t2i")}
    assert meta["counts"]["missing"] == 0
    assert "not applicable" in (out / "report.md").read_text()


def test_toml_booleans_and_model_args_tables(fast_data, tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('fast = "true"\nplots = "false"\nmodels = "copy-target"\ntasks = ["segmentation"]\nlimit = 1\n'
                   'progress = "no"\ndevice = "cpu"\n[model_args.copy-target]\nbatch_size = 3\n')
    out = tmp_path / "out"
    assert main(["vibe", "--config", str(cfg), "--data-root", str(fast_data), "--out", str(out)]) == 0
    assert not (out / "plots").exists()  # "false" is false
    meta = json.loads((out / "results.json").read_text())
    assert list(meta["models"]) == ["copy-target[batch_size=3]"]
    cfg.write_text('fast = "maybe"\n')
    assert main(["vibe", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fast" in err and "'maybe'" in err
    cfg.write_text('[model_args]\npainter = [1, 2]\n')
    assert main(["vibe", "--config", str(cfg)]) == 2
    assert "model_args.painter" in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["vibe", "--device", "gpu"], "expected auto, cpu, cuda or cuda:N"),
    (["vibe", "--fast", "--limit", "0"], "--limit"),
    (["best50", "--fast", "--limit", "-3"], "--limit"),
    (["vibe", "--fast", "--rank-reference", "maybe"], "rank-reference"),
    (["vlicl"], "vlicl needs the published VL-ICL release: --data-root DIR"),
    (["cobsat", "--data-root", "/nonexistent-icl-root"], "cobsat"),
])
def test_cli_refusals_are_one_line(argv, needle, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_cuda_on_a_cpu_torch_is_one_line(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is visible here")
    assert main(["vibe", "--fast", "--device", "cuda", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUDA is not available" in err


def test_bare_command_prints_usage_and_best50_list_needs_no_package(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m icl.run") and "vibe, best50, vlicl" in err
    assert main(["best50", "--list"]) == 0
    assert "--package DIR" in capsys.readouterr().out
    assert main(["vlicl", "--help"]) == 0
    assert "benchmarks: vibe, best50, vlicl" in capsys.readouterr().out


def test_command_recorded_as_typed_and_kept_by_rescore(fast_data, tmp_path):
    out = tmp_path / "out"
    argv = ["--fast", "vibe", "--data-root", str(fast_data), "--tasks", "segmentation", "--limit", "1",
            "--models", "copy-target", "--out", str(out), *QUIET]
    assert main(argv) == 0
    assert json.loads((out / "results.json").read_text())["command"] == ["python", "-m", "icl.run", *argv]
    assert main(["rescore", str(out)]) == 0
    meta = json.loads((out / "results.json").read_text())
    assert meta["command"] == ["python", "-m", "icl.run", *argv]
    assert meta["rescore_command"] == ["python", "-m", "icl.run", "rescore", str(out)]


@pytest.mark.slow
def test_fast_skips_a_broken_plugin_with_one_line(tmp_path):
    site = tmp_path / "site"
    dist = site / "broken_icl_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-icl-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[icl.benchmarks]\nbroken = no_such_module_anywhere:Bench\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    proc = subprocess.run([sys.executable, "-m", "icl.run", "--fast", "--out", str(tmp_path / "out"), *QUIET],
                          capture_output=True, text=True, env=env, timeout=600)
    skipped = [ln for ln in proc.stderr.splitlines() if "skips benchmark 'broken'" in ln]
    assert len(skipped) == 1 and "no_such_module_anywhere" in skipped[0]
    assert proc.returncode == 1 and "broken     SKIPPED" in proc.stdout
    for name in ("vibe", "best50", "vlicl"):
        assert (tmp_path / "out" / f"{name}-fast" / "results.json").is_file()


def test_a_missing_optional_package_names_its_extra(monkeypatch, capsys, tmp_path):
    from icl._lazy import import_target

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ModuleNotFoundError, as when absent
    with pytest.raises(ModuleNotFoundError, match=r'pip install "icl-eval\[ray\]"'):
        import_target("ray:remote")

    class NeedsHttpx(Adapter):
        name = "needs-httpx"
        serves = (ChatRequest,)

        def __init__(self) -> None:
            import httpx  # noqa: F401

        def predict(self, requests):  # pragma: no cover
            return []

    monkeypatch.setitem(sys.modules, "httpx", None)
    register_model("needs-httpx", NeedsHttpx)
    try:
        assert main(["vlicl", "--fast", "--models", "needs-httpx", "--out", str(tmp_path / "o")]) == 2
    finally:
        unregister_model("needs-httpx")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install "icl-eval[vlm]"' in err


@pytest.mark.slow
def test_no_benchmark_touches_the_callers_matplotlib(tmp_path):
    """Every benchmark's plots draw on Figure objects: pyplot is never imported and the caller's
    backend is kept (icl.evaluate in a notebook)."""
    code = ("import sys, matplotlib; matplotlib.use('svg'); from icl.run.__main__ import main; "
            f"code = main(['--fast', '--out', {str(tmp_path / 'out')!r}, '--no-progress', '--device', 'cpu']); "
            "assert code == 0, code; assert matplotlib.get_backend() == 'svg', matplotlib.get_backend(); "
            "assert 'matplotlib.pyplot' not in sys.modules; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
    assert len(list((tmp_path / "out").glob("*/plots/*.png"))) > 5
