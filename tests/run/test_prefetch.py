"""``--prefetch`` (icl.run.prefetch): a run's Hub weights downloaded into the Hugging Face cache
from the test Hub (tests/models/hub_server.py), with the offline command line; nothing runs."""

from __future__ import annotations

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
