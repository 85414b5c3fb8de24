import csv
import json
import sys
import types

import cv2
import pytest

from icl.benchmarks.best50 import PROTOCOL_VERSION
from icl.benchmarks.best50.cli import main
from icl.benchmarks.best50.package import DetectionRequest, load_package
from icl.benchmarks.best50.parse import format_boxes
from icl.benchmarks.best50.report import PLOT_FILES
from icl.benchmarks.best50.score import THRESHOLDS


def _rows(out):
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_fast_runs_the_oracle_on_a_synthetic_package(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--fast", "--out", str(out)]) == 0
    for name in ["results.csv", "per_sample.csv", "results.json", "report.md", "predictions.jsonl",
                 *(f"results_k{k}.csv" for k in (1, 2, 4, 8)), *PLOT_FILES.values()]:
        assert (out / name).is_file(), name
    for name in PLOT_FILES.values():
        assert cv2.imread(str(out / name)) is not None
    meta = json.loads((out / "results.json").read_text())
    assert meta["protocol"] == PROTOCOL_VERSION == "best50-1"
    assert meta["thresholds"] == list(THRESHOLDS) and meta["icl_version"] and meta["timestamp"]
    assert meta["package"]["sha256"] == load_package(out / "package").sha256
    assert meta["model"] == "baseline:oracle"
    rows = _rows(out)
    assert {r["k"] for r in rows} == {"1", "2", "4", "8"}
    assert all(float(r["F1@50"]) == 1.0 and float(r["mIoU_best"]) > 0.97 for r in rows)
    md = (out / "report.md").read_text()
    assert "## K = 8" in md and "pooled (clean7)" in md and "plot_f1_50.png" in md
    assert "pooled clean7" in capsys.readouterr().out


def test_score_predictions_file_against_package(tmp_path, package_dir):
    pkg = load_package(package_dir)
    lines = []
    for k in (1, 2):
        for s in pkg.samples[k]:
            # K = 1 answers the ground truth, K = 2 answers nothing usable
            text = format_boxes(s.query_gt_boxes_tokens) if k == 1 else "I cannot tell."
            lines.append({"sample_id": s.sample_id, "class": s.cls, "k": k, "query_image_size": list(s.query_image_size),
                          "query_gt_boxes_pixel": s.query_gt_boxes_pixel.tolist(), "response": text})
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    assert main(["--package", str(package_dir), "--predictions", str(pred), "--out", str(out), "--no-plots"]) == 0
    rows = {(r["k"], r["kind"], r["group"]): r for r in _rows(out)}
    assert float(rows[("1", "pooled", "clean7")]["F1@50"]) == 1.0
    assert float(rows[("2", "pooled", "all")]["R@50"]) == 0.0
    assert not (out / "plot_p50.png").exists()
    meta = json.loads((out / "results.json").read_text())
    assert meta["coverage"]["8"] == {"package": 16, "scored": 0} and meta["coverage"]["1"]["scored"] == 16
    assert meta["source"] == "predictions" and meta["predictions"]["records"] == 32


def test_predictions_without_package(tmp_path):
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"class": "a", "k": 4, "query_gt_boxes_pixel": [[0, 0, 4, 4]],
                                "pred_boxes_pixel": [[0, 0, 4, 2]]}) + "\n")
    assert main(["--predictions", str(pred), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    meta = json.loads((tmp_path / "o" / "results.json").read_text())
    assert meta["package"] is None
    assert float(_rows(tmp_path / "o")[0]["mIoU_best"]) == 0.5


def test_malformed_predictions_exit_2_with_line_number(tmp_path, capsys):
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"class": "a", "k": 1, "query_gt_boxes_pixel": [], "pred_boxes_pixel": []})
                    + "\n{oops\n" + json.dumps({"class": "a", "query_gt_boxes_pixel": [], "pred_boxes_pixel": []}) + "\n")
    assert main(["--predictions", str(pred), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "line 2: not valid JSON" in err and "line 3: missing field 'k'" in err


def test_out_defaults_to_runs_folder(tmp_path, monkeypatch):
    # the command, `... best50 --package DIR --predictions FILE.jsonl`, needs no --out
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"class": "a", "k": 1, "query_gt_boxes_pixel": [[0, 0, 4, 4]],
                                "pred_boxes_pixel": [[0, 0, 4, 4]]}) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--predictions", str(pred), "--no-plots"]) == 0
    assert float(_rows(tmp_path / "runs" / "best50")[0]["F1@50"]) == 1.0
    assert main(["--fast", "--no-plots"]) == 0
    assert (tmp_path / "runs" / "best50-fast" / "results.json").is_file()


def test_no_source_is_an_error(tmp_path, package_dir, capsys):
    assert main(["--package", str(package_dir), "--out", str(tmp_path / "o")]) == 2
    assert "--predictions, --model or --baseline" in capsys.readouterr().err


class FakeAdapter:
    batch_size = 3

    def __init__(self, calls, answer, **kwargs):
        self.calls, self.answer, self.kwargs = calls, answer, kwargs

    def load(self, device):
        self.calls.append(("load", device, self.kwargs))

    def predict(self, requests):
        self.calls.append(("predict", list(requests)))
        return [self.answer(r) for r in requests]


@pytest.fixture
def fake_models(monkeypatch):
    calls = []
    state = {"answer": lambda r: "<bbox_start><x0><y0><x1024><y1024><bbox_end>"}
    registry = types.ModuleType("icl.models.registry")
    registry.get_model = lambda name, **kw: FakeAdapter(calls, state["answer"], name=name, **kw)
    monkeypatch.setitem(sys.modules, "icl.models.registry", registry)
    return calls, state


def test_model_runs_through_the_registry_and_resumes(tmp_path, package_dir, fake_models):
    calls, _ = fake_models
    out = tmp_path / "out"
    args = ["--package", str(package_dir), "--model", "fake-vlm", "--model-arg", "temperature=0.5",
            "--model-arg", "mode=greedy", "--ks", "1", "8", "--limit", "4", "--out", str(out), "--no-plots"]
    assert main(args) == 0
    assert calls[0] == ("load", "cpu", {"name": "fake-vlm", "temperature": 0.5, "mode": "greedy"})
    batches = [c[1] for c in calls if c[0] == "predict"]
    assert [len(b) for b in batches] == [3, 3, 2]
    req = batches[0][0]
    assert isinstance(req, DetectionRequest) and len(req.images) == 2 and req.images[0].ndim == 3
    assert "1 example(s)" in req.prompt
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 8 and json.loads(lines[0])["model"] == "fake-vlm"
    rows = _rows(out)
    assert {r["k"] for r in rows} == {"1", "8"} and all(0.0 < float(r["mIoU_best"]) < 0.5 for r in rows)
    # a second run into the same directory asks the model nothing new
    calls.clear()
    assert main(args) == 0
    assert [c[0] for c in calls] == []
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 8


def test_model_answer_that_is_not_text_keeps_finished_batches(tmp_path, package_dir, fake_models, capsys):
    calls, state = fake_models
    state["answer"] = lambda r: None if r.sample_id.startswith("cross") else "no boxes"
    out = tmp_path / "out"
    assert main(["--package", str(package_dir), "--model", "m", "--ks", "1", "--out", str(out)]) == 2
    assert "answered sample 'cross_000' (k=1) with NoneType" in capsys.readouterr().err
    # batches of 3 in file order (circle, square, triangle, cross, ...): the third one fails,
    # the two before it stay on disk
    kept = [json.loads(x)["sample_id"] for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert kept == ["circle_000", "circle_001", "square_000", "square_001", "triangle_000", "triangle_001"]
