import sys
import types
from pathlib import Path

import pytest

from icl.run.__main__ import build_parser, config_from_args, main
from icl.run.plan import DEFAULT_MODELS, RunConfig, context_hash


def _config(argv):
    return config_from_args(build_parser().parse_args(argv))


def test_defaults():
    cfg = _config([])
    assert cfg.benchmark == "vibe" and cfg.models == list(DEFAULT_MODELS) and cfg.shots == [1]
    assert cfg.seed == 0 and cfg.device == "cpu" and cfg.dtype is None and cfg.limit is None
    assert cfg.out_dir == Path("runs/vibe") and cfg.store_path == Path("runs/vibe/store.sqlite")
    assert _config(["--fast"]).out_dir == Path("runs/vibe-fast")


def test_options_map_to_config(tmp_path):
    cfg = _config(["--fast", "--limit", "3", "--tasks", "flip, denoising", "--datasets", "a,b", "--models", "oracle",
                   "--shots", "4,1,2,1", "--data-root", str(tmp_path), "--out", str(tmp_path / "o"),
                   "--device", "cuda:1",
                   "--dtype", "bf16", "--seed", "7", "--jobs", "2", "--no-plots", "--no-progress", "--qualitative", "0",
                   "--store", str(tmp_path / "s.sqlite"), "--name", "mine"])
    assert cfg == RunConfig(benchmark="vibe", name="mine", fast=True, limit=3, tasks=["flip", "denoising"],
                            datasets=["a", "b"], models=["oracle"], shots=[1, 2, 4], data_root=tmp_path,
                            out=tmp_path / "o", store=tmp_path / "s.sqlite", device="cuda:1", dtype="bf16", seed=7,
                            jobs=2, qualitative=0, plots=False, progress=False)
    assert cfg.out_dir == tmp_path / "o" and cfg.store_path == tmp_path / "s.sqlite"


@pytest.mark.parametrize("argv", [["--shots", "0"], ["--shots", "a"], ["--limit", "0"], ["--jobs", "x"],
                                  ["--dtype", "int8"], ["--tasks", ","]])
def test_bad_options_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_unknown_benchmark(capsys):
    assert main(["nope", "--fast"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err


def test_best50_dispatch(monkeypatch):
    seen = []
    cli = types.ModuleType("icl.benchmarks.best50.cli")
    cli.main = lambda rest, prog=None: seen.append((rest, prog)) or 3
    for name in ("icl.benchmarks", "icl.benchmarks.best50"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "icl.benchmarks.best50.cli", cli)
    assert main(["best50", "--k", "8", "--fast"]) == 3
    assert seen == [(["--k", "8", "--fast"], "python -m icl.run best50")]


def test_best50_missing_is_a_clear_message(monkeypatch, capsys):
    import importlib

    real = importlib.import_module

    def fake(name, *a, **k):
        if name.startswith("icl.benchmarks"):
            err = ModuleNotFoundError(f"No module named {name!r}")
            err.name = "icl.benchmarks"
            raise err
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", fake)
    assert main(["best50"]) == 2
    assert "best50 benchmark is not available" in capsys.readouterr().err


def test_context_hash_is_order_sensitive():
    assert context_hash(["a", "b"]) != context_hash(["b", "a"])
    assert context_hash(["a", "b"]) == context_hash(["a", "b"]) and len(context_hash([])) == 16


def test_protocol_matches_context_csv():
    from icl.data.contexts import PROTOCOL as data_protocol
    from icl.run import PROTOCOL

    assert PROTOCOL == data_protocol == "vibe-1"


def test_best50_real_cli_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["best50", "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m icl.run best50")


def test_list(capsys, tmp_path):
    assert main(["--list", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tasks:    segmentation, edges") and "flip" in out[0]
    assert "scenes-a" in out[1] and out[2].startswith("models:   ")
    listed = out[2][len("models:   "):].split(", ")
    assert {"copy-target", "identity", "oracle"} <= set(listed) and listed == sorted(listed)


def test_interrupt_keeps_store_and_says_how_to_resume(monkeypatch, capsys, tmp_path):
    import icl.run.runner as runner

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", interrupted)
    assert main(["--out", str(tmp_path)]) == 130
    assert "rerun the same command to resume" in capsys.readouterr().err
