import dataclasses
import json
from pathlib import Path

import pytest

from icl.benchmarks.registry import get_benchmark
from icl.benchmarks.vibe.plan import DEFAULT_MODELS
from icl.run.__main__ import add_benchmark_options, build_config, common_parser, main
from icl.run.planning.config import ModelSpec, RunConfig, apply_model_args, parse_models, parse_value
from icl.run.errors import ConfigError
from icl.run.planning.setup import open_benchmark


def _config(argv, bench="vibe"):
    cls = get_benchmark(bench)
    parser = common_parser("test")
    add_benchmark_options(parser, cls)
    return build_config(bench, parser.parse_args(argv), cls, ["python", "-m", "icl.run", bench, *argv])


def test_defaults():
    cfg = _config([])
    assert cfg.benchmark == "vibe" and cfg.models is None and cfg.options == {} and cfg.judges == []
    assert cfg.device == "auto" and cfg.dtype is None and cfg.evaluate == "auto" and cfg.overlap and cfg.plots
    assert cfg.out_dir == Path("runs/vibe") and cfg.store_path == Path("runs/vibe/store.sqlite")
    assert cfg.command == ["python", "-m", "icl.run", "vibe"]
    assert _config(["--fast"]).out_dir == Path("runs/vibe-fast")
    bench = open_benchmark(cfg)
    assert bench.config == dict(tasks=None, datasets=None, shots=(1,), limit=None, seed=0, qualitative=3,
                                sensitivity_fraction=0.1, rank_reference=False)
    assert bench.default_models == DEFAULT_MODELS == ("oracle", "copy-target", "identity")


def test_options_map_to_config(tmp_path):
    argv = ["--fast", "--limit", "3", "--tasks", "flip, denoising", "--datasets", "a,b", "--models", "oracle",
            "--shots", "4,1,2,1", "--data-root", str(tmp_path), "--out", str(tmp_path / "o"), "--device", "cuda:1",
            "--dtype", "bf16", "--seed", "7", "--no-plots", "--no-progress", "--qualitative", "0",
            "--store", str(tmp_path / "s.sqlite"), "--name", "mine", "--eval", "device", "--no-overlap",
            "--rank-reference", "true", "--trace-memory"]
    cfg = _config(argv)
    assert dataclasses.replace(cfg, command=None) == RunConfig(
        benchmark="vibe", options=dict(limit=3, tasks=("flip", "denoising"), datasets=("a", "b"), shots=(4, 1, 2, 1),
                                       seed=7, qualitative=0, rank_reference=True),
        models=[ModelSpec("oracle")], fast=True, data_root=tmp_path, name="mine", out=tmp_path / "o",
        store=tmp_path / "s.sqlite", device="cuda:1", dtype="bf16", evaluate="device", overlap=False, plots=False,
        progress=False, trace_memory=True)
    assert cfg.out_dir == tmp_path / "o" and cfg.store_path == tmp_path / "s.sqlite"
    assert cfg.command == ["python", "-m", "icl.run", "vibe", *argv]


def test_model_lists_and_model_args():
    assert parse_models("painter:weights=/p/x.pth,dtype=bf16,copy-target, identity:level=3,gain=0.5,on=true") == [
        ModelSpec("painter", {"weights": "/p/x.pth", "dtype": "bf16"}), ModelSpec("copy-target"),
        ModelSpec("identity", {"level": 3, "gain": 0.5, "on": True})]
    assert [parse_value(v) for v in ("3", "0.5", "true", "null", "abc", "[1]", "1e3")] == [3, 0.5, True, None, "abc",
                                                                                              "[1]", 1000.0]
    specs = apply_model_args(parse_models("a,b"), ["a:x=1", "y=two", "b:x=2"])
    assert specs == [ModelSpec("a", {"x": 1, "y": "two"}), ModelSpec("b", {"y": "two", "x": 2})]
    assert specs[0].label == "a[x=1,y=two]" and ModelSpec("c").label == "c"
    for bad, match in [(",", "names no model"), (":x=1", "empty model name"), ("a:x", "key=value")]:
        with pytest.raises(ConfigError, match=match):
            parse_models(bad)
    with pytest.raises(ConfigError, match="model 'c' is not in --models"):
        apply_model_args(parse_models("a,b"), ["c:x=1"])
    cfg = _config(["--model-arg", "oracle:batch_size=2"])  # defaults filled in before the arguments
    assert cfg.models == [ModelSpec("oracle", {"batch_size": 2}), ModelSpec("copy-target"), ModelSpec("identity")]


def test_config_file_and_flags_override_it(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('models = ["identity", "oracle"]\nmodel_args = ["oracle:dtype=fp16"]\ntasks = ["edges"]\n'
                    'device = "cpu"\nplots = false\n[options]\nlimit = 2\n')
    cfg = _config(["--config", str(toml), "--limit", "1", "--device", "cuda"])
    assert cfg.models == [ModelSpec("identity"), ModelSpec("oracle", {"dtype": "fp16"})]
    assert cfg.options == {"tasks": ("edges",), "limit": 1} and cfg.device == "cuda" and cfg.plots is False
    toml.write_text('tasks = ["edges"]\nlimt = 2\n')
    with pytest.raises(ConfigError, match="unknown setting.*limt.*did you mean 'limit'"):
        _config(["--config", str(toml)])
    toml.write_text("tasks = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        _config(["--config", str(toml)])


@pytest.mark.parametrize("argv,words", [(["--shots", "0"], "--shots"), (["--shots", "a"], "--shots"),
                                        (["--limit", "0"], "--limit"), (["--dtype", "int8"], "int8"),
                                        (["--eval", "gpu"], "gpu"), (["--no-such-flag"], "--no-such-flag"),
                                        (["--models", "oracle:x"], "key=value"),
                                        (["--models", "oracle:batch_size=0"], "batch_size"),
                                        (["--models", "oracle:dtype=int8"], "dtype"),
                                        (["--models", "oracle:level=3"], "no argument(s) level"),
                                        (["--model-arg", "nope:x=1"], "'nope' is not in --models"),
                                        (["--models", "oracle,oracle"], "twice")])
def test_bad_options_exit_2(argv, words, capsys, tmp_path, builtin_root):
    assert main(["vibe", *argv, "--fast", "--data-root", str(builtin_root), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("icl.run: ") and err.count("\n") == 1 and words in err  # one line, no traceback
    assert not (tmp_path / "o").exists()


def test_unknown_benchmark(capsys):
    assert main(["nope", "--fast"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err
    assert main(["vibes"]) == 2
    assert "did you mean 'vibe'" in capsys.readouterr().err


def test_model_that_cannot_serve_the_benchmark(tmp_path, capsys, builtin_root):
    from icl.models import Adapter, ChatRequest, register_model
    from icl.models.registry import unregister_model

    class ChatOnly(Adapter):
        name = "chat-only"
        serves = (ChatRequest,)

        def predict(self, requests):
            return ["x" for _ in requests]

    register_model("chat-only", ChatOnly)
    try:
        assert main(["vibe", "--fast", "--models", "chat-only", "--data-root", str(builtin_root),
                     "--tasks", "edges", "--out", str(tmp_path / "o")]) == 2
    finally:
        unregister_model("chat-only")
    assert "cannot run benchmark 'vibe': the benchmark sends AnalogyRequest and the model serves ChatRequest" \
        in capsys.readouterr().err


def test_protocol_matches_context_csv():
    from icl.benchmarks.vibe.benchmark import Vibe
    from icl.benchmarks.vibe.plan import PROTOCOL
    from icl.data.contexts import PROTOCOL as data_protocol

    assert PROTOCOL == data_protocol == Vibe.protocol == "vibe-1"


def test_benchmark_help_lists_its_options(capsys):
    assert main(["best50", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m icl.run best50") and "best50 options" in out and "--fast" in out
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m icl.run vibe") and "--rank-reference" in out and "--tasks" in out


def test_version(capsys):
    import icl

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"icl {icl.__version__}\n"


def test_list(capsys, tmp_path):
    assert main(["--list", "--data-root", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    shown = {k: v.strip() for k, _, v in (ln.partition(":") for ln in lines if not ln.startswith(" "))}
    assert shown["tasks"].startswith("segmentation, edges") and "flip" in shown["tasks"]
    assert "scenes-a" in shown["datasets"] and lines[-2].startswith("models:")
    assert shown["benchmarks"].split(", ")[:3] == ["vibe", "best50", "vlicl"]
    names = shown["models"].split(", ")
    assert names == sorted(names) and {"copy-target", "identity", "oracle", "image-analogies", "sd-vicl"} <= set(names)


def test_interrupt_keeps_store_and_says_how_to_resume(monkeypatch, capsys, tmp_path):
    import icl.run.runner as runner

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", interrupted)
    assert main(["--out", str(tmp_path)]) == 130
    assert "rerun the same command to resume" in capsys.readouterr().err


@pytest.mark.parametrize("args, line", [
    ([b"vibe", b"--fast", b"--out", b"o\xff"], "--out 'o\\xff': not UTF-8 (byte 0xff at position 1)"),
    ([b"vibe", b"--fast", b"--models", b"oracle:x=\xfe"], "--models 'oracle:x=\\xfe': not UTF-8 (byte 0xfe at position 9)"),
    ([b"vibe", b"--fast", b"--datasets=sc\xc3"], "--datasets 'sc\\xc3': not UTF-8 (byte 0xc3 at position 2)"),
    ([b"merge", b"out", b"shard\xff"], "argument 3 'shard\\xff': not UTF-8"),
])
def test_non_utf8_argument_is_one_line(tmp_path, args, line):
    """Bytes that are not UTF-8 in an argument (a path, a model argument, a dataset name) used to
    give raw tracebacks (a UnicodeEncodeError writing results.json or the report); now one line
    naming the argument, exit 2, before anything is written."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    got = subprocess.run([sys.executable.encode(), b"-m", b"icl.run", *args], capture_output=True, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)}, timeout=120)
    err = got.stderr.decode()
    assert got.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("icl.run: " + line) and "give paths, models and names as UTF-8 text" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_profile_writes_pstats_through_the_real_exit(tmp_path, builtin_root):
    """``python -m cProfile -m icl.run`` writes nothing (the CLI ends with os._exit); ``--profile
    FILE`` does, in the process that runs the command, and is not recorded as part of it."""
    import pstats
    import subprocess
    import sys

    prof, out = tmp_path / "run.pstats", tmp_path / "out"
    cmd = [sys.executable, "-m", "icl.run", "vibe", "--fast", "--tasks", "edges", "--limit", "1", "--shots", "1",
           "--models", "identity", "--no-plots", "--no-progress", "--data-root", str(builtin_root), "--out", str(out),
           "--profile", str(prof)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"profile written to {prof}" in done.stderr
    stats = pstats.Stats(str(prof))
    files = {f for f, _line, _name in stats.stats}  # type: ignore[attr-defined]
    assert any(f.endswith("icl/run/runner.py") for f in files) and stats.total_tt > 0  # type: ignore[attr-defined]
    # the model's batch ran in the guard's worker thread, profiled there too (issue 39)
    names = {(f.rsplit("/", 1)[-1], name) for f, _line, name in stats.stats}  # type: ignore[attr-defined]
    assert ("guard.py", "guarded") in names and ("builtin.py", "pick") in names
    assert "1 thread(s)" in done.stderr
    assert "--profile" not in json.loads((out / "results.json").read_text())["command"]
    from icl.run.__main__ import take_profile

    assert take_profile(["a", "--profile=p", "b", "--profile", "q"]) == (["a", "b"], Path("q"))
    assert take_profile(["a", "--profile"]) == (["a", "--profile"], None)  # argparse says what is missing
