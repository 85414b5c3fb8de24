"""``python -m icl.run cobsat --fast`` through the one runner: CoBSAT-lite end to end with the
copy-last generator and ``cobsat-judge``; a second run computes nothing; ``prompts.csv`` and its
SHA-256 in results.json; ``--list``; description mode and a chat-model judge with a tiny LLaVA
checkpoint (``icl.models.vlm.tiny``)."""

import csv
import hashlib
import json

import pytest

from icl.run.__main__ import main


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_fast_run_end_to_end_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["cobsat", "--fast", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    acc = _rows(out / "accuracy.csv")
    drawable = {"Color-I", "Color-II", "Background-I", "Background-II", "Style-I", "Style-II", "Texture-I",
                "Texture-II"}
    assert {r["task"] for r in acc} == drawable  # no action task in CoBSAT-lite
    assert {r["shots"] for r in acc} == {"0", "2", "4", "6", "8"}
    for r in acc:
        # copy-last repeats the last demonstration: its latent part is right from 2 shots on, its text part
        # is another value (text values are distinct within a prompt); at 0 shots it answers grey
        shots = int(r["shots"])
        assert float(r["visual"]) == (100.0 if shots else 0.0) and float(r["textual"]) == 0.0
        assert float(r["overall"]) == 0.0 and r["failed"] == "0"
    meta = json.loads((out / "results.json").read_text())
    text = (out / "prompts.csv").read_bytes()
    assert meta["artifacts"]["prompts.csv"] == hashlib.sha256(text).hexdigest()
    assert meta["judge"]["adapter"] == "cobsat-judge" and meta["counts"]["failed"] == 0
    assert meta["data"]["cobsat"].startswith("built-in synthetic")
    assert len(_rows(out / "prompts.csv")) == 8 * 5 * 2
    assert list((out / "plots").glob("cobsat_shots_*.png"))
    assert "CoBSAT" in (out / "report.md").read_text()
    capsys.readouterr()
    assert main([*args, "--no-plots"]) == 0
    assert "0 items computed" in capsys.readouterr().out
    assert (out / "prompts.csv").read_bytes() == text


def test_list_says_actions_are_not_drawable(capsys):
    assert main(["cobsat", "--fast", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "Action-I (not drawable: CoBSAT-lite skips it)" in listed and "cobsat-judge" in listed


@pytest.mark.slow
def test_description_mode_with_a_tiny_chat_model(tmp_path, tiny_llava):
    out = tmp_path / "out"
    common = ["cobsat", "--fast", "--gen-mode", "description", "--family", "qwen", "--tasks", "Color-I,Texture-II",
              "--shots", "0,2", "--prompts", "1", "--max-new-tokens", "4", "--no-progress",
              "--models", f"hf-vlm:weights={tiny_llava},max_batch=4"]
    assert main([*common, "--out", str(out)]) == 0
    acc = _rows(out / "accuracy.csv")
    assert len(acc) == 4 and all(r["mode"] == "description" and int(r["prompts_scored"]) == 1 for r in acc)
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["planned"] == meta["counts"]["computed"] == 4 and meta["counts"]["failed"] == 0
    # the chain of thought: two passes of the same model, then the judge
    cot = tmp_path / "cot"
    assert main([*common, "--variant", "cot", "--cot-tokens", "3", "--out", str(cot)]) == 0
    meta = json.loads((cot / "results.json").read_text())
    assert meta["counts"]["computed"] == 4 and meta["counts"]["failed"] == 0


@pytest.mark.slow
def test_a_chat_model_judges_lite_images(tmp_path, tiny_llava):
    out = tmp_path / "out"
    assert main(["cobsat", "--fast", "--tasks", "Color-II", "--shots", "2", "--prompts", "2", "--out", str(out),
                 "--no-progress", "--judge", f"hf-vlm:weights={tiny_llava},max_batch=4"]) == 0
    meta = json.loads((out / "results.json").read_text())
    assert meta["judge"]["adapter"] == "hf-vlm" and meta["counts"]["planned"] == 2


def test_an_empty_data_root_is_one_line_and_untouched(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["cobsat", "--data-root", str(empty), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no datasets/ folder" in err and "--fast" in err
    assert list(empty.iterdir()) == [] and not (tmp_path / "out").exists()
    # CoBSAT-lite on request, outside --fast: drawn in memory, reported as synthetic, the data root untouched
    out = tmp_path / "lite"
    assert main(["cobsat", "--lite", "true", "--data-root", str(empty), "--tasks", "Color-II", "--shots", "2",
                 "--prompts", "2", "--out", str(out), "--no-progress", "--no-plots"]) == 0
    assert "built-in synthetic" in (out / "report.md").read_text().splitlines()[0]
    assert list(empty.iterdir()) == []


def test_an_unusable_judge_is_refused_before_any_generation(tmp_path, capsys, tiny_clip):
    """The runner checks every judge before the first generation (``icl.run.planning.setup.check_judges``:
    ``Adapter.check_loadable`` and ``Adapter.would_refuse`` on ``Benchmark.judge_probe``'s stand-in
    judge requests), as vlicl refuses its built-in judge on release data: exit 2, one line, no
    output folder (nothing generated)."""
    from test_cobsat_data import fabricate

    root = fabricate(tmp_path / "release")
    common = ["cobsat", "--data-root", str(root), "--tasks", "Style-II", "--shots", "2", "--prompts", "1",
              "--no-progress", "--no-plots"]
    # the default cobsat-judge reads CoBSAT-lite drawings only
    out = tmp_path / "out1"
    assert main([*common, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cobsat-judge judges only CoBSAT-lite answers" in err and not out.exists()
    # a judge folder that exists but cannot be read
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    out = tmp_path / "out2"
    assert main([*common, "--out", str(out), "--judge", f"hf-vlm:weights={broken}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(broken) in err and "cannot be loaded" in err and not out.exists()
    # a missing judge folder
    out = tmp_path / "out3"
    assert main([*common, "--out", str(out), "--judge", f"hf-vlm:weights={tmp_path / 'none'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not found" in err and not out.exists()
    # clip-judge can answer CoBSAT's numbered questions about one image: accepted by the check
    from icl.benchmarks.cobsat.benchmark import CoBSAT
    from icl.models import get_model

    bench = CoBSAT({"data_root": str(root), "tasks": "Style-II", "shots": "2", "prompts": 1})
    probe = bench.judge_probe(list(bench.items()))
    assert len(probe) == 2 and all(get_model("clip-judge", weights=str(tiny_clip)).would_refuse(r) is None
                                   for r in probe)
