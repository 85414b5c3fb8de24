"""``qwen-image-edit`` (the tiny Qwen-Image-Edit-2509-layout folder of tiny_t2i.build_qwen_image_edit,
loaded through ``QwenImageEditPlusPipeline.from_pretrained``) through VL-ICL's text-to-image tasks
and CoBSAT, as the other generators are (``vif`` is test_qwen_image_edit.py). The pipeline edits
reference images: a request with images (a 1-shot VL-ICL episode, a 2-shot CoBSAT prompt) is
generated and stored; a request without one (0 shots) is refused in one sentence naming the
request and the pipeline's limits, recorded as not applicable (stored, never scored, never a
failure: exit 0), and the other items go on. A second run computes nothing."""

import json
import sqlite3

import pytest
from tiny_t2i import build_qwen_image_edit

from icl.run.__main__ import main

pytestmark = pytest.mark.slow  # each run generates through a 1024 x 1024 VAE pass per reference


@pytest.fixture(scope="module")
def qwen_folder(tmp_path_factory):
    return build_qwen_image_edit(tmp_path_factory.mktemp("qwen-bench") / "qwen-edit")


def _model(folder):
    return f"qwen-image-edit:weights={folder},steps=1,height=32,width=32"


def _run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _samples(out):
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]


def _check_refused_and_generated(out, shots_with_images):
    meta = json.loads((out / "results.json").read_text())
    lines = _samples(out)
    ok = [d for d in lines if d["status"] == "ok"]
    refused = [d for d in lines if d["status"] != "ok"]
    assert ok and refused and all(d["status"] == "not applicable" and d["metrics"] == {} for d in refused)
    for d in ok:
        assert d["request"]["images"] >= 1 and d["generation"]["steps"] == 1 and d["generation"]["guidance"] == 4.0
        assert d["generation"]["size"] == [32, 32] and "png" in d["answer"]
    for d in refused:
        assert d["request"]["images"] == 0
    with sqlite3.connect(out / "store.sqlite") as c:
        errors = [e for (e,) in c.execute("SELECT error FROM responses WHERE status='failed'")]
        reasons = {r for (r,) in c.execute("SELECT reason FROM responses WHERE status='failed'")}
    assert errors and all("RequestRefused" in e and "holds 0 image(s); this pipeline takes at least 1" in e
                          for e in errors), errors
    assert reasons == {"refused"} and meta["counts"]["failed"] == 0 and meta["stopped_models"] == {}
    assert meta["counts"]["computed"] == len(ok) * shots_with_images
    return meta


def test_vlicl_t2i_tasks(tmp_path, qwen_folder, capsys):
    out = tmp_path / "vlicl"
    args = ["vlicl", "--fast", "--models", _model(qwen_folder), "--tasks", "open_t2i_mi,cobsat", "--seeds", "0",
            "--shots", "0,1", "--queries", "1", "--out", str(out), "--data-root", str(tmp_path / "data"),
            "--no-plots", "--no-progress"]
    code, _, err = _run(args, capsys)
    assert code == 0, err[-3000:]  # the refused 0-shot items are not applicable, not failures
    _check_refused_and_generated(out, 1)
    assert "0 items computed" in _run(args, capsys)[1]


def test_cobsat(tmp_path, qwen_folder, capsys):
    out = tmp_path / "cobsat"
    args = ["cobsat", "--fast", "--models", _model(qwen_folder), "--tasks", "Color-I", "--shots", "0,2",
            "--prompts", "1", "--out", str(out), "--no-progress", "--no-plots"]
    code, _, err = _run(args, capsys)
    assert code == 0, err[-3000:]  # the refused 0-shot items are not applicable, not failures
    meta = _check_refused_and_generated(out, 1)
    assert meta["judge"]["adapter"] == "cobsat-judge"
    assert "0 items computed" in _run(args, capsys)[1]
