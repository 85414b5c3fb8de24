"""Model specs, run.toml, icl.evaluate."""

import json

import pytest

from icl.run.__main__ import main
from icl.run.planning.config import ModelSpec, apply_model_args, parse_models, parse_value
from icl.run.errors import ConfigError


def test_model_specs_parse_names_and_arguments():
    specs = parse_models("painter:weights=/p/x.pth,dtype=bf16,copy-target, lvm:top_k=5,temperature=0.7")
    assert specs == [ModelSpec("painter", {"weights": "/p/x.pth", "dtype": "bf16"}), ModelSpec("copy-target"),
                     ModelSpec("lvm", {"top_k": 5, "temperature": 0.7})]
    assert specs[0].label == "painter[dtype=bf16,weights=/p/x.pth]" and specs[1].label == "copy-target"
    assert [parse_value(v) for v in ("3", "0.5", "true", "null", "abc", "[1]")] == [3, 0.5, True, None, "abc", "[1]"]
    more = apply_model_args(specs, ["lvm:top_k=7", "seed=1"])
    assert more[2].args == {"top_k": 7, "temperature": 0.7, "seed": 1} and more[1].args == {"seed": 1}
    with pytest.raises(ConfigError, match="'nope' is not in --models"):
        apply_model_args(specs, ["nope:x=1"])
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_models("painter:weights")



def test_quoted_values_keep_their_commas():
    """A value that starts with {, [, " or ' runs to its matching close: a call_args with two keys fits
    inside --models, and the adapter gets both."""
    from icl.models import get_model

    text = ('flux-kontext:call_args={"max_area": 4, "max_sequence_length": [48, "a,}"][0]},steps=2,'
            "note='a,b',tag=\"3\",path=/p/x[1].pth, copy-target")
    specs = parse_models(text)
    assert [s.name for s in specs] == ["flux-kontext", "copy-target"]
    args = specs[0].args
    assert args["call_args"] == '{"max_area": 4, "max_sequence_length": [48, "a,}"][0]}'
    assert args["steps"] == 2 and args["note"] == "a,b" and args["tag"] == "3" and args["path"] == "/p/x[1].pth"
    specs = parse_models('flux-kontext:call_args={"max_area": 4, "max_sequence_length": 48},steps=2')
    model = get_model("flux-kontext", **specs[0].args)
    assert model.call_args == {"max_area": 4, "max_sequence_length": 48}
    # the same rule through --model-arg (one value parser)
    more = apply_model_args(parse_models("a"), ['a:x="1,2"', "y='q'", 'z={"k": [1, 2]}'])
    assert more[0].args == {"x": "1,2", "y": "q", "z": '{"k": [1, 2]}'}
    for bad, match in [('a:x={"k": 1', "unclosed '}'"), ("a:x='b,c", "unclosed"), ('a:x={"k": [1}', "closes ']'")]:
        with pytest.raises(ConfigError, match=match):
            parse_models(bad)

def test_run_toml_with_flags_overriding_it(tmp_path, builtin_root, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('models = "oracle,identity"\nfast = true\nplots = false\nprogress = false\n'
                   'tasks = ["edges", "flip"]\n[options]\nlimit = 5\nshots = [1, 2]\n')
    out = tmp_path / "out"
    code = main(["vibe", "--config", str(cfg), "--limit", "2", "--data-root", str(builtin_root), "--out", str(out),
                 "--models", "copy-target"])
    assert code == 0
    meta = json.loads((out / "results.json").read_text())
    c = meta["config"]
    assert c["options"]["limit"] == 2 and c["options"]["shots"] == [1, 2] and c["options"]["tasks"] == ["edges", "flip"]
    assert c["models"] == [{"name": "copy-target", "args": {}}] and c["fast"] is True and c["plots"] is False
    assert meta["command"][:4] == ["python", "-m", "icl.run", "vibe"]
    assert not (out / "plots").exists()


@pytest.mark.parametrize("args, message", [
    (["vibe", "--fast", "--limt", "2"], "unrecognized arguments: --limt"),
    (["vibe", "--fast", "--shots", "one"], "--shots"),
    (["vibee"], "did you mean 'vibe'"),
    (["vibe", "--fast", "--models", "copy_target"], "did you mean 'copy-target'"),
    (["vibe", "--fast", "--datasets", "scenes-c"], "'scenes-c': did you mean 'scenes-b' or 'scenes-a'?"),
])
def test_user_errors_exit_2_with_one_line(args, message, capsys, builtin_root):
    assert main([*args, "--data-root", str(builtin_root)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_toml_is_named(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text("models = [\n")
    assert main(["vibe", "--config", str(cfg)]) == 2
    assert f"--config {cfg}: not valid TOML" in capsys.readouterr().err
    cfg.write_text("modles = 'oracle'\n")
    assert main(["vibe", "--config", str(cfg)]) == 2
    assert "unknown setting(s) modles (did you mean 'models'?)" in capsys.readouterr().err


def test_version(capsys):
    import icl

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"icl {icl.__version__}"


def test_evaluate_returns_the_results_table(tmp_path, builtin_root, capsys):
    import icl
    from icl.api import Results

    import matplotlib

    matplotlib.use("svg")  # the caller's choice, kept
    rows = icl.evaluate("vibe", "oracle,copy-target", fast=True, tasks="edges", datasets=["scenes-a"], limit=2,
                        out=tmp_path / "ev", data_root=builtin_root, plots=True)
    assert isinstance(rows, Results) and isinstance(rows, list) and rows.table == "results"
    assert capsys.readouterr() == ("", "")  # quiet unless asked; the text is kept
    assert "vibe: 4 items computed" in rows.summary
    assert matplotlib.get_backend() == "svg" and (tmp_path / "ev" / "plots").is_dir()
    frame = rows.to_pandas()
    assert set(frame["model"]) == {"oracle", "copy-target"} and set(frame["metric"]) == {"precision", "recall", "f1"}
    assert frame.attrs["outcome"].exit_code == 0
    f1 = frame[(frame.model == "oracle") & (frame.metric == "f1")]["value"].item()  # the long results schema
    assert f1 == 1.0
    again = icl.evaluate("vibe", [("copy-target", {})], fast=True, tasks="edges", datasets=["scenes-a"], limit=2,
                         out=tmp_path / "ev", data_root=builtin_root, plots=False, verbose=True)
    assert again.outcome.stats.computed == 0 and again.outcome.stats.skipped == 2  # nothing computed twice
    assert {r["model"] for r in again} == {"copy-target"}
    assert "2 already in the store" in capsys.readouterr().out
