"""hf-vlm through the one runner: best50's detection prompt and VL-ICL episodes, cached."""

import csv
import json

from icl.run.__main__ import main


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_hf_vlm_answers_best50_and_is_cached(tmp_path, tiny_folders, capsys):
    out = tmp_path / "b"
    model = f"hf-vlm:weights={tiny_folders['llava']},max_batch=4"
    args = ["best50", "--fast", "--models", model, "--ks", "1", "--limit", "3", "--max-new-tokens", "8",
            "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err
    per = _rows(out / "per_sample.csv")
    assert len(per) == 3  # random weights: no boxes, but every answer parsed and scored
    meta = json.loads((out / "results.json").read_text())
    (ident,) = [m["identity"] for m in meta["models"].values()]
    assert ident["adapter"] == "hf-vlm" and len(ident["weights"]) == 1 and ident["args"]["max_batch"] == 4
    capsys.readouterr()
    assert main(args) == 0
    assert "0 items computed" in capsys.readouterr().out


def test_prompt_over_the_context_is_recorded_as_overflow(tmp_path, tiny_folders, capsys):
    out = tmp_path / "v"
    model = f"hf-vlm:weights={tiny_folders['llava']},max_context=64"
    code = main(["vlicl", "--fast", "--models", model, "--tasks", "operator_induction", "--seeds", "0",
                 "--shots", "0,8", "--queries", "2", "--out", str(out), "--data-root", str(tmp_path / "data"),
                 "--no-plots", "--no-progress"])
    assert code == 1  # overflowing items failed (recorded, counted wrong)
    acc = {r["shots"]: r for r in _rows(out / "accuracy.csv")}
    assert float(acc["8"]["overflow"]) == 2 and "Context overflow" in (out / "report.md").read_text()
