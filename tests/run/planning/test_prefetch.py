"""``--prefetch`` (icl.run.planning.prefetch): a run's Hub weights downloaded into the Hugging Face cache
from the test Hub (tests/models/hub_server.py), with the offline command line; nothing runs. Its
data: a missing VL-ICL or CoBSAT release fetched from the Hub (tests/data/test_fetch.py's fabricated
ones), the fetch command named without --data-root, a release not fetched said so."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from tests.data.test_fetch import cobsat_hub, vlicl_hub  # noqa: F401 (fixtures)
from tests.models.hub_server import REPO, hf_env, hub_llava, server  # noqa: F401 (fixtures)

from icl.run.__main__ import main


def _vlicl(out, data, weights):
    return ["vlicl", "--fast", "--models", "hf-vlm", "--model-arg", f"weights={weights}", "--tasks", "clevr",
            "--seeds", "0", "--shots", "0,1", "--queries", "2", "--out", str(out), "--data-root", str(data),
            "--no-plots", "--no-progress"]


def test_prefetch_downloads_prints_and_runs_nothing(hf_env, server, tmp_path, capsys):
    out = tmp_path / "run"
    args = _vlicl(out, tmp_path / "data", f"hf:{REPO}") + ["--prefetch"]
    assert main(args) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"hf:{REPO}@{server.a}  7 files" in printed and "MiB" in printed
    assert "HF_HUB_OFFLINE=1 python -m icl.run vlicl" in printed and "--prefetch" not in printed
    assert (hf_env / "models--org--tiny" / "snapshots" / server.a / "model.safetensors").is_file()
    assert not out.exists()  # nothing ran


def test_prefetch_without_hub_weights_says_so(tmp_path, capsys):
    args = ["vlicl", "--fast", "--models", "copy-last", "--out", str(tmp_path / "o"), "--prefetch"]
    assert main(args) == 0, capsys.readouterr().err
    assert "nothing to prefetch" in capsys.readouterr().out


# --- the run's data ----------------------------------------------------------------------------

def test_prefetch_fetches_a_missing_vlicl_release_then_the_offline_run_reads_it(vlicl_hub, tmp_path, monkeypatch,
                                                                                capsys):
    srv, commit, _ = vlicl_hub
    data, out = tmp_path / "data" / "vlicl", tmp_path / "run"
    args = ["vlicl", "--models", "copy-last", "--tasks", "clevr", "--seeds", "0", "--shots", "0,1", "--queries", "2",
            "--data-root", str(data), "--out", str(out), "--no-plots", "--no-progress"]
    assert main(args + ["--prefetch"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"data: --data-root {data} is missing: python -m icl.data fetch vlicl --out {data}" in printed
    assert f"ys-zong/VL-ICL@{commit}" in printed and (data / "fetch-manifest.json").is_file()
    assert not out.exists()  # nothing ran
    line = printed.strip().splitlines()[-1]
    assert line == "HF_HUB_OFFLINE=1 " + shlex.join(["python", "-m", "icl.run", *args])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = len(srv.requests)
    assert main(args) == 0, capsys.readouterr().err
    assert len(srv.requests) == asked and (out / "results.json").is_file()


@pytest.mark.slow  # the printed command runs in a subprocess (~8 s)
def test_prefetch_without_a_data_root_fetches_into_the_default_one_and_the_printed_command_runs(
        vlicl_hub, tmp_path, monkeypatch, capsys):
    """No --data-root: the release goes where ``icl.data fetch vlicl`` puts it ($ICL_DATA_ROOT/vlicl);
    the offline command names it, keeps ICL_HUB_DEFAULTS, and runs as printed (a shell, offline)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    srv, commit, _ = vlicl_hub
    monkeypatch.setenv("ICL_DATA_ROOT", str(tmp_path / "default-root"))
    monkeypatch.setenv("ICL_HUB_DEFAULTS", "1")
    out = tmp_path / "o"
    args = ["vlicl", "--models", "copy-last", "--tasks", "clevr", "--seeds", "0", "--shots", "0,1", "--queries", "2",
            "--out", str(out), "--no-plots", "--no-progress"]
    assert main(args + ["--prefetch"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    root = tmp_path / "default-root" / "vlicl"
    assert f"as python -m icl.data fetch vlicl --out {root}" in printed and (root / "fetch-manifest.json").is_file()
    line = printed.strip().splitlines()[-1]
    assert line == "HF_HUB_OFFLINE=1 ICL_HUB_DEFAULTS=1 " + shlex.join(
        ["python", "-m", "icl.run", *args, "--data-root", str(root)])
    assert not out.exists()
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(repo)}
    env.pop("ICL_HUB_DEFAULTS")
    asked = len(srv.requests)
    done = subprocess.run(line, shell=True, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(srv.requests) == asked and json.loads((out / "results.json").read_text())["counts"]["failed"] == 0


def test_prefetch_lists_every_bad_reference(hf_env, server, tmp_path, capsys):
    args = ["vlicl", "--fast", "--models", "hf-vlm:weights=hf:org/nope,hf-vlm:weights=hf:org/gone,"
            f"hf-vlm:weights=hf:{REPO}@..%2F..%2FX", "--tasks", "clevr", "--out", str(tmp_path / "o"),
            "--no-progress", "--prefetch"]
    assert main(args) == 2
    printed = capsys.readouterr()
    lines = printed.err.strip().splitlines()
    assert len(lines) == 3 and "org/nope not found" in lines[0] and "org/gone not found" in lines[1]
    assert "'..'" in lines[2] and all(line.startswith("icl.run: model 'hf-vlm': ") for line in lines)
    assert "HF_HUB_OFFLINE=1" not in printed.out  # no offline command for a prefetch that failed


def test_prefetch_of_a_release_not_on_the_hub_says_so(tmp_path, capsys):
    args = ["vif", "--models", "copy-last", "--out", str(tmp_path / "o"), "--data-root", str(tmp_path / "none"),
            "--prefetch"]
    code = main(args)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "data: vif: VIF-Bench is on the Hub (shim0114/VIF-Bench)" in printed.out and "not fetched" in printed.out


def test_prefetch_fetches_cobsat_into_the_missing_data_root_then_runs_offline(cobsat_hub, tmp_path, monkeypatch,
                                                                              capsys):
    """CoBSAT's images from the Hub (huggingface.co/datasets/yzeng58/CoBSAT's datasets.zip, our
    server: tests/data/test_fetch.py) into --data-root, then --check with HF_HUB_OFFLINE=1 plans
    the release's items from it (no request)."""
    srv, commit, _, _ = cobsat_hub
    root = tmp_path / "cobsat-data"
    args = ["cobsat", "--models", "copy-last", "--tasks", "Color-I", "--shots", "2", "--prompts", "2",
            "--out", str(tmp_path / "o"), "--data-root", str(root), "--no-progress"]
    assert main(args + ["--prefetch"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"data: --data-root {root} is missing: python -m icl.data fetch cobsat --out {root}" in printed
    assert f"yzeng58/CoBSAT@{commit}" in printed
    assert json.loads((root / "fetch-manifest.json").read_text())["counts"]["images"] == 500
    asked = len(srv.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # --check offline: the release's items planned from the fetched folder; the one problem left is
    # the judge (cobsat-judge judges CoBSAT-lite only: the release needs a vision-language judge)
    assert main(args + ["--check"]) == 2
    report = json.loads((tmp_path / "o" / "check.json").read_text())
    assert len(srv.requests) == asked
    assert [p["check"] for p in report["problems"]] == ["judges"], report["problems"]
    assert re.search(r"Color-I\s+copy-last\s+2\s+0\s+2", capsys.readouterr().out)


def test_prefetch_lists_the_data_and_the_weights_that_cannot_be_fetched(vlicl_hub, hf_env, tmp_path, monkeypatch,
                                                                        capsys):
    """The release's Hub answers a commit that is a path; the weights' repository does not exist:
    both are told, one line each, exit 2."""
    srv, *_ = vlicl_hub
    srv.commit_id = "../../X"
    monkeypatch.setenv("HF_ENDPOINT", srv.url)
    args = ["vlicl", "--models", "hf-vlm:weights=hf:org/nope", "--tasks", "clevr", "--data-root",
            str(tmp_path / "data"), "--out", str(tmp_path / "o"), "--no-progress", "--prefetch"]
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "data: ys-zong/VL-ICL@" in lines[0] and "not 40 hex digits" in lines[0]
    assert "org/nope" in lines[1]
