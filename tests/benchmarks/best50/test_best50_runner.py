"""best50 through the one runner: fast run, predictions replay, a registered model, resume."""

import csv
import json

import cv2
import pytest

from icl.benchmarks.best50 import PROTOCOL_VERSION
from icl.benchmarks.best50.package import load_package
from icl.benchmarks.best50.parse import format_boxes
from icl.benchmarks.best50.report import PLOT_FILES
from icl.models import Adapter, ChatRequest, register_model
from icl.models.registry import unregister_model
from icl.run.__main__ import main


def _rows(out, name="best50_results.csv"):
    with open(out / name, newline="") as f:
        return list(csv.DictReader(f))


def test_fast_runs_the_oracle_on_a_synthetic_package(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["best50", "--fast", "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-progress"]) == 0
    for name in ["results.csv", "best50_results.csv", "per_sample.csv", "results.json", "report.md",
                 *(f"results_k{k}.csv" for k in (1, 2, 4, 8)), *(f"plots/{p}" for p in PLOT_FILES.values())]:
        assert (out / name).is_file(), name
    assert cv2.imread(str(out / "plots" / PLOT_FILES["F1@50"])) is not None
    meta = json.loads((out / "results.json").read_text())
    assert meta["protocol"] == PROTOCOL_VERSION == "best50-1" and meta["benchmark"] == "best50"
    assert meta["config"]["fast"] is True and meta["git_revision"] or meta["icl_version"]
    rows = _rows(out)
    assert {r["k"] for r in rows} == {"1", "2", "4", "8"} and {r["model"] for r in rows} == {"oracle"}
    assert all(float(r["F1@50"]) == pytest.approx(1.0) and float(r["mIoU_best"]) > 0.97 for r in rows)
    md = (out / "report.md").read_text()
    assert "## oracle, K = 8" in md and "pooled (clean7)" in md and "plot_f1_50.png" in md
    assert "pooled clean7" in capsys.readouterr().out


def test_predictions_file_is_replayed_and_scored(tmp_path, package_dir):
    pkg = load_package(package_dir)
    lines = []
    for k in (1, 2):
        for s in pkg.samples[k]:
            # K = 1 answers the ground truth as text, K = 2 as pixel boxes shifted by half a box
            line = {"sample_id": s.sample_id, "class": s.cls, "k": k, "query_image_size": list(s.query_image_size),
                    "query_gt_boxes_pixel": s.query_gt_boxes_pixel.tolist()}
            if k == 1:
                line["response"] = format_boxes(s.query_gt_boxes_tokens)
            else:
                b = s.query_gt_boxes_pixel.copy()
                b[:, [0, 2]] += (b[:, 2:3] - b[:, 0:1]) / 2
                line["pred_boxes_pixel"] = b.tolist()
            lines.append(line)
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    code = main(["best50", "--package", str(package_dir), "--predictions", str(pred), "--ks", "1,2", "--out", str(out),
                 "--no-plots", "--no-progress"])
    assert code == 0
    rows = {(r["k"], r["kind"], r["group"]): r for r in _rows(out)}
    assert float(rows[("1", "pooled", "clean7")]["F1@50"]) == 1.0
    # half-width shift: IoU 1/3 per box, below 0.5, and mIoU_best exactly 1/3
    assert float(rows[("2", "pooled", "all")]["R@50"]) == 0.0
    assert float(rows[("2", "pooled", "all")]["mIoU_best"]) == pytest.approx(1 / 3)
    assert next(iter(rows.values()))["model"].startswith("best50-predictions[path=")


def test_missing_predictions_fail_only_their_samples(tmp_path, package_dir):
    pkg = load_package(package_dir)
    s = pkg.samples[1][0]
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"sample_id": s.sample_id, "class": s.cls, "k": 1,
                                "query_gt_boxes_pixel": s.query_gt_boxes_pixel.tolist(),
                                "pred_boxes_pixel": s.query_gt_boxes_pixel.tolist()}) + "\n")
    out = tmp_path / "out"
    code = main(["best50", "--package", str(package_dir), "--predictions", str(pred), "--ks", "1", "--out", str(out),
                 "--no-plots", "--no-progress"])
    assert code == 1
    md = (out / "report.md").read_text()
    assert f"1 of {len(pkg.samples[1])} planned samples scored" in md and "no prediction for sample" in md
    per = _rows(out, "per_sample.csv")
    assert [r["sample_id"] for r in per] == [s.sample_id] and float(per[0]["F1@50"]) == 1.0


class RecordingVLM(Adapter):
    """Answers a full-image box; logs every call."""

    name = "recording-vlm"
    version = "1"
    serves = (ChatRequest,)
    batch_size = 3
    calls: list = []

    def __init__(self, temperature: float = 0.0, mode: str = "greedy", fail_on: str = ""):
        self.temperature, self.mode, self.fail_on = temperature, mode, fail_on

    def predict(self, requests):
        RecordingVLM.calls.append([r.id for r in requests])
        return [None if self.fail_on and self.fail_on in r.id else "<bbox_start><x0><y0><x1024><y1024><bbox_end>"
                for r in requests]


@pytest.fixture
def recording_vlm():
    register_model("recording-vlm", RecordingVLM, replace=True)
    RecordingVLM.calls = []
    yield RecordingVLM.calls
    unregister_model("recording-vlm")


def test_model_runs_batched_with_arguments_and_resumes(tmp_path, package_dir, recording_vlm):
    out = tmp_path / "out"
    args = ["best50", "--package", str(package_dir), "--models", "recording-vlm:temperature=0.5,mode=beam",
            "--ks", "1,8", "--limit", "4", "--out", str(out), "--no-plots", "--no-progress"]
    assert main(args) == 0
    assert [len(b) for b in recording_vlm] == [3, 3, 2]
    rows = _rows(out)
    assert {r["k"] for r in rows} == {"1", "8"} and all(0.0 < float(r["mIoU_best"]) < 0.5 for r in rows)
    meta = json.loads((out / "results.json").read_text())
    ident = meta["models"]["recording-vlm[mode=beam,temperature=0.5]"]["identity"]
    assert ident["args"] == {"fail_on": "", "mode": "beam", "temperature": 0.5}
    recording_vlm.clear()
    assert main(args) == 0
    assert recording_vlm == []  # nothing asked twice
    # another argument is another model: everything is asked again, both kept in the store
    assert main([*args[:4], "recording-vlm:temperature=0.7,mode=beam", *args[5:]]) == 0
    assert sum(map(len, recording_vlm)) == 8


def test_an_answer_that_is_not_text_fails_only_its_item(tmp_path, package_dir, recording_vlm, capsys):
    out = tmp_path / "out"
    code = main(["best50", "--package", str(package_dir), "--models", "recording-vlm:fail_on=cross_000", "--ks", "1",
                 "--out", str(out), "--no-plots", "--no-progress"])
    assert code == 1
    assert "expected a str answer, got NoneType" in capsys.readouterr().err
    per = _rows(out, "per_sample.csv")
    assert len(per) == len(load_package(package_dir).samples[1]) - 1
    assert "cross_000" not in {r["sample_id"] for r in per}


def test_repeated_predictions_fail_their_sample_and_exit_1(tmp_path, package_dir):
    pkg = load_package(package_dir)
    lines = []
    for s in pkg.samples[1]:
        lines.append({"sample_id": s.sample_id, "class": s.cls, "k": 1,
                      "query_gt_boxes_pixel": s.query_gt_boxes_pixel.tolist(),
                      "pred_boxes_pixel": s.query_gt_boxes_pixel.tolist()})
    lines.append(dict(lines[0]))  # the first sample again, on the last line
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    code = main(["best50", "--package", str(package_dir), "--predictions", str(pred), "--ks", "1", "--out", str(out),
                 "--no-plots", "--no-progress"])
    assert code == 1
    first = pkg.samples[1][0].sample_id
    assert f"is answered on lines 1, {len(lines)}" in (out / "report.md").read_text()
    per = _rows(out, "per_sample.csv")
    assert first not in {r["sample_id"] for r in per} and len(per) == len(pkg.samples[1]) - 1


def test_model_args_reach_the_predictions_model_that_stands_in_for_the_models(tmp_path):
    """``--predictions`` makes best50-predictions the run's default model; ``--model-arg`` without
    ``--models`` read the benchmark class's defaults (the oracle) instead and answered "model
    'best50-predictions' is not in --models (oracle)" (a plain ``k=v`` went to the oracle)."""
    from icl.benchmarks.registry import get_benchmark
    from icl.run.__main__ import add_benchmark_options, build_config, common_parser

    pred = tmp_path / "pred.jsonl"
    argv = ["--fast", "--predictions", str(pred), "--model-arg", "best50-predictions:batch_size=4"]
    cls = get_benchmark("best50")
    parser = common_parser("t")
    add_benchmark_options(parser, cls)
    config = build_config("best50", parser.parse_args(argv), cls, ["t", *argv])
    assert [m.label for m in config.models] == [f"best50-predictions[batch_size=4,path={pred}]"]
    assert cls.models_by_default({}) == ("oracle",)  # without a predictions file, the class's own
