"""samples.jsonl / requests.jsonl / samples/*.png of a run (icl.run.outputs.samples) and
``python -m icl.run export``, on the fast built-in data of vibe (image answers of analogy
models), vlicl (text answers and image answers judged by the built-in judge) and cobsat
(generated images, judged). Fields and order follow lm-evaluation-harness's per-sample log
(EleutherAI/lm-evaluation-harness, lm_eval/loggers/evaluation_tracker.py ``save_results_samples``:
one JSON object per document and its metrics); the ``compute`` sub-object is the part two runs
may differ in."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from icl.run.__main__ import main
from icl.run.outputs.samples import AUTO_LIMIT, image_name, log_samples, request_summary, stable_digest

KEYS = ["item", "group", "model", "model_id", "judge", "status", "reason", "error", "request", "answer", "metrics",
        "judge_answers", "generation", "compute"]


def _run(args, capsys, code=0):
    got = main(args)
    captured = capsys.readouterr()
    assert got == code, captured.err[-3000:]
    return captured


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _without_compute(path: Path) -> str:
    return "".join(json.dumps({k: v for k, v in d.items() if k != "compute"}) + "\n" for d in _lines(path))


def _check_common(out: Path, planned: int) -> list[dict]:
    meta = json.loads((out / "results.json").read_text())
    lines = _lines(out / "samples.jsonl")
    assert len(lines) == meta["counts"]["planned"] >= planned  # vibe adds its diagnostic items
    assert all(list(d) == KEYS for d in lines)
    models = list(meta["models"])
    # plan order, then model label order (results.json's)
    assert models == sorted(models)
    order = [(d["item"], models.index(d["model"])) for d in lines]
    keys = list(dict.fromkeys(d["item"] for d in lines))
    assert order == sorted(order, key=lambda x: (keys.index(x[0]), x[1]))
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()
    assert digest == meta["plan"]["sha256"]  # every planned item, in the plan's own order
    assert meta["artifacts"]["samples.jsonl"] == stable_digest(out / "samples.jsonl")
    assert meta["artifacts"]["requests.jsonl"] == hashlib.sha256((out / "requests.jsonl").read_bytes()).hexdigest()
    requests = {r["text_sha256"]: r for r in _lines(out / "requests.jsonl")}
    for d in lines:
        assert d["request"]["text_sha256"] in requests and len(d["request"]["hash"]) == 64
        assert d["model_id"] == meta["models"][d["model"]]["model_id"]
        c = d["compute"]
        assert c["model_s"] >= 0 and c["score_s"] >= 0 and c["peak_memory_bytes"] > 0
        assert c["memory_kind"] == "process-max-rss" and c["energy_j"] is None  # CPU: no NVML
        if d["answer"] and "png" in d["answer"]:
            png = (out / d["answer"]["png"]).read_bytes()
            assert hashlib.sha256(png).hexdigest() == d["answer"]["sha256"] and png[:8] == b"\x89PNG\r\n\x1a\n"
            assert d["answer"]["png"] == "samples/" + image_name(d["item"], d["model_id"])
    per_sample = meta["compute_per_sample"]
    assert set(per_sample) == set(models)
    for label, c in per_sample.items():
        mine = [d for d in lines if d["model"] == label]
        assert c["items"] == len(mine) and c["measured"] == sum(d["compute"]["model_s"] > 0 for d in mine)
        assert c["model_s_total"] == pytest.approx(sum(d["compute"]["model_s"] for d in mine), rel=1e-9)
    assert "## Compute per sample" in (out / "report.md").read_text()
    return lines


@pytest.mark.slow
def test_vibe_samples_are_reproducible_and_exported_byte_for_byte(fast_data, tmp_path, capsys):
    args = ["vibe", "--fast", "--data-root", str(fast_data), "--tasks", "inpainting,colorization", "--limit", "2",
            "--no-plots", "--no-progress"]
    a, b = tmp_path / "a", tmp_path / "b"
    _run(args + ["--out", str(a)], capsys)
    lines = _check_common(a, 3 * 2 * 2 * 3)  # 3 datasets x 2 tasks x 2 queries x 3 models, at least
    assert all(d["status"] == "ok" and "png" in d["answer"] and d["request"]["type"] == "AnalogyRequest"
               for d in lines)
    oracle = [d for d in lines if d["model"] == "oracle"]
    assert all(d["metrics"]["ssim"] == pytest.approx(1.0) for d in oracle)
    # a second run of the same plan: byte-identical apart from the compute sub-object
    _run(args + ["--out", str(b)], capsys)
    assert _without_compute(a / "samples.jsonl") == _without_compute(b / "samples.jsonl")
    assert (a / "requests.jsonl").read_bytes() == (b / "requests.jsonl").read_bytes()
    # export of a run whose log was deleted: the same bytes (compute included: it is stored)
    before = (a / "samples.jsonl").read_bytes()
    pngs = {p.name: p.read_bytes() for p in (a / "samples").glob("*.png")}
    (a / "samples.jsonl").unlink()
    for p in (a / "samples").glob("*.png"):
        p.unlink()
    assert main(["export", str(a)]) == 0
    assert (a / "samples.jsonl").read_bytes() == before
    assert {p.name: p.read_bytes() for p in (a / "samples").glob("*.png")} == pngs
    # export again: its own files are replaced, a file of the user's in the way is never touched
    assert main(["export", str(a)]) == 0
    mine = a / "samples" / next(iter(sorted(pngs)))
    manifest = json.loads((a / "samples" / ".samples-manifest.json").read_text())
    del manifest["files"][mine.name]
    (a / "samples" / ".samples-manifest.json").write_text(json.dumps(manifest))
    mine.write_bytes(b"the user's own file")
    capsys.readouterr()
    assert main(["export", str(a)]) == 2
    assert "a file icl did not write is in the way" in capsys.readouterr().err
    assert mine.read_bytes() == b"the user's own file"


def test_vlicl_text_and_judged_answers(fast_data, tmp_path, capsys):
    out = tmp_path / "vlicl"
    _run(["vlicl", "--fast", "--data-root", str(tmp_path / "data"), "--tasks", "open_mi,cobsat", "--seeds", "0",
          "--shots", "0,1", "--queries", "2", "--out", str(out), "--no-plots", "--no-progress"], capsys)
    lines = _check_common(out, 2 * 2 * 2)
    text = [d for d in lines if d["group"]["task"] == "open_mi"]
    assert text and all(d["request"]["type"] == "ChatRequest" and isinstance(d["answer"]["text"], str)
                        and d["judge_answers"] == [] for d in text)
    requests = {r["text_sha256"]: r for r in _lines(out / "requests.jsonl")}
    shot1 = [requests[d["request"]["text_sha256"]] for d in text if d["group"]["shots"] == 1]
    assert all(r["images"] >= 2 and r["text"].count("<image>") == r["images"] for r in shot1)
    judged = [d for d in lines if d["group"]["task"] == "cobsat"]
    assert judged and all("png" in d["answer"] and d["judge_answers"] and d["judge"]["judge_id"]
                          and all(isinstance(v, str) for v in d["judge_answers"]) for d in judged)


def test_cobsat_image_answers_and_log_switch(fast_data, tmp_path, capsys):
    args = ["cobsat", "--fast", "--data-root", str(tmp_path / "data"), "--tasks", "Color-I", "--shots", "0,2",
            "--prompts", "2", "--no-plots", "--no-progress"]
    out = tmp_path / "cobsat"
    _run(args + ["--out", str(out)], capsys)
    lines = _check_common(out, 1 * 2 * 2)
    assert all("png" in d["answer"] and d["judge_answers"] and d["request"]["type"] == "GenerationRequest"
               for d in lines)
    assert json.loads((out / "results.json").read_text())["config"]["log_samples"] is None  # auto: on
    off = tmp_path / "off"
    _run(args + ["--out", str(off), "--log-samples", "off"], capsys)
    assert not (off / "samples.jsonl").exists() and not (off / "samples").exists()
    assert "samples.jsonl" not in json.loads((off / "results.json").read_text())["artifacts"]
    # rescore keeps the run's setting; export writes the log all the same
    assert main(["rescore", str(off)]) == 0 and not (off / "samples.jsonl").exists()
    assert main(["export", str(off)]) == 0
    assert _without_compute(off / "samples.jsonl") == _without_compute(out / "samples.jsonl")
    capsys.readouterr()
    assert main(["cobsat", "--fast", "--log-samples", "maybe"]) == 2
    assert "--log-samples: expected true/false" in capsys.readouterr().err


def test_log_samples_default_and_request_summary():
    assert log_samples(None, AUTO_LIMIT - 1) and not log_samples(None, AUTO_LIMIT)
    assert log_samples(True, 10**9) and not log_samples(False, 1)
    import numpy as np

    from icl.models.requests import ChatRequest, GenerationRequest

    img = np.zeros((2, 2, 3), np.uint8)
    assert request_summary(ChatRequest.user("q", "look", img, "what?", system="be brief")) == \
        ("system: be brief\nuser: look <image> what?", 1)
    assert request_summary(GenerationRequest("g", ("a", img, img, "b"))) == ("a <image> <image> b", 2)
    # names never come from raw keys: a key that climbs out of the folder stays a hex name
    name = image_name("../../etc/passwd", "m")
    assert name.endswith(".png") and set(name[:-4]) <= set("0123456789abcdef") and len(name) == 36


def test_export_refuses_what_is_not_a_run(tmp_path, capsys):
    assert main(["export", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["export", str(tmp_path)]) == 2
    assert "not a run folder (no results.json in it)" in capsys.readouterr().err
    (tmp_path / "results.json").write_text("[1, 2]")
    assert main(["export", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a finished run's results.json" in err and err.count("\n") == 1
