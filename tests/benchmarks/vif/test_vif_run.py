"""``python -m icl.run vif --fast`` through the one runner: synthetic tasks, the collage baseline,
the deterministic spatial judge and, as the fast run's second judge, ``tiny-chat-judge`` (``hf-vlm``
on the built-in tiny random LLaVA of ``icl.models.vlm.tiny``) exercising the JSON path; a second
run computes nothing; the plugin passes ``check_benchmark``; the spatial judge refuses release data."""

import csv
import json
import math
import re

import numpy as np
import pytest

from icl.benchmarks import check_benchmark
from icl.benchmarks.registry import get_benchmark
from icl.benchmarks.vif.benchmark import VIF
from icl.benchmarks.vif.models import SpatialJudge, collage, spatial_answer
from icl.benchmarks.vif.render import render_layout
from icl.benchmarks.vif.rubric import CRITERIA
from icl.models.registry import get_model
from icl.models.requests import ChatRequest, GenerationRequest
from icl.run.__main__ import main


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_fast_run_end_to_end_and_resumes(tmp_path, capsys):
    """Every variant and table with the spatial judge alone (``--judge``: no transformers, fast);
    the default two-judge fast run is ``test_the_fast_run_s_two_default_judges``."""
    out = tmp_path / "out"
    args = ["vif", "--fast", "--out", str(out), "--no-progress", "--judge", "vif-spatial-judge"]
    assert main(args) == 0
    crit = {r["variant"]: r for r in _rows(out / "criteria.csv")}
    assert set(crit) == {"visual", "ti-dense", "ti-medium", "ti-sparse"}
    vis = crit["visual"]
    # the collage pastes every subject into its box and leaves no marks: found (10), clean (10); the judge
    # cannot see text, coherence or quality (NaN), so the average is NaN
    assert float(vis["reference_consistency"]) == 10.0 and float(vis["visual_instruction_cleanliness"]) == 10.0
    assert vis["scene_coherence"] == "nan" and vis["average"] == "nan" and vis["failed"] == "0"
    spatial = {r["variant"]: r for r in _rows(out / "spatial.csv")}
    # shapes fill the middle 3/4 of their reference: pasted into a box, IoU ~ 0.75^2, centres inside
    assert float(spatial["visual"]["centre_in_region"]) == 1.0
    assert 0.45 < float(spatial["visual"]["layout_iou"]) < 0.65
    # without a layout image the collage tiles the references: worse placement
    assert float(spatial["ti-dense"]["layout_iou"]) < float(spatial["visual"]["layout_iou"])
    meta = json.loads((out / "results.json").read_text())
    assert meta["judge"]["adapter"] == "vif-spatial-judge" and meta["counts"]["failed"] == 0
    assert meta["data"]["vif"].startswith("built-in synthetic")
    tasks = (out / "vif_tasks.jsonl").read_text().splitlines()
    assert len(tasks) == 6 and json.loads(tasks[0])["id"] == "syn000"
    assert {p.name for p in (out / "plots").glob("vif_*.png")} >= {"vif_tradeoff.png", "vif_by_refs.png", "vif_by_vis.png"}
    assert "## VIF-Bench" in (out / "report.md").read_text()
    capsys.readouterr()
    assert main([*args, "--no-plots"]) == 0
    assert "0 items computed" in capsys.readouterr().out


def test_registered_and_passes_the_plugin_check():
    assert get_benchmark("vif") is VIF
    counts = check_benchmark(VIF)
    assert counts


def test_requests_interleave_references_vis_and_instruction():
    bench = VIF(VIF.fast_config())
    items = {i.key: i for i in bench.items()}
    req = bench.request(items["synthetic/visual/syn003"])
    texts = [p for p in req.prompt if isinstance(p, str)]
    task = items["synthetic/visual/syn003"].payload
    n = len(task.references)
    assert texts[:n + task.n_vis] == [f"Image {i}:" for i in range(n + task.n_vis)]
    assert texts[-1] == task.instruction and req.size == (192, 192) and len(req.images) == n + task.n_vis
    ti = bench.request(items["synthetic/ti-medium/syn002"])
    assert len(ti.images) == len(items["synthetic/ti-medium/syn002"].payload.references)
    assert "in the" in ti.prompt[-1]
    # the judge always sees the original visual task
    judge = bench.judge_requests(items["synthetic/ti-medium/syn002"], np.zeros((8, 8, 3), np.uint8))[0]
    assert judge.id == "vif-synthetic/synthetic/ti-medium/syn002"
    assert len(judge.images) == len(items["synthetic/ti-medium/syn002"].payload.references) + \
        items["synthetic/ti-medium/syn002"].payload.n_vis + 1


def test_failed_generation_is_skipped_by_default_as_the_reference_does():
    """shim0114/VIF-Bench judge.py (commit 6682f269) judges only tasks with an image::

        g = find_generated(args.generated_dir, t["id"])
        if g is None:
            missing += 1
            continue

    and common.py ``write_scores`` averages only the saved responses (``if not p.exists():
    continue``). Our default ``--failed skip`` leaves a failed generation out of every mean (NaN,
    counted under ``failed``); ``--failed score1`` is the named alternative (1 everywhere, in the
    means). The report says which rule the run used."""
    from icl.benchmarks.vif import tables

    bench = VIF(VIF.fast_config())
    assert bench.config["failed"] == "skip"
    item = next(iter(bench.items()))
    s = bench.score_failure(item, "error")
    assert s["failed"] == 1.0 and math.isnan(s["average"]) and math.isnan(s["scene_coherence"])
    assert bench.score(item, "not an image")["failed"] == 1.0
    ok = {**{c: 8.0 for c in CRITERIA}, "average": 8.0, "failed": 0.0, "judge_parsed": 1.0}
    rows = [{"model": "m", "key": "a", "variant": "visual", **ok},
            {"model": "m", "key": "b", "variant": "visual", **s}]
    cell = tables.judged_items(rows)
    assert [r["average"] for r in cell][0] == 8.0 and math.isnan(cell[1]["average"])
    assert "left out of the means" in bench.report({"criteria": []}) and "--failed skip" in bench.report({})
    one = VIF({**VIF.fast_config(), "failed": "score1"})
    s1 = one.score_failure(item, "error")
    assert s1["average"] == 1.0 and s1["failed"] == 1.0 and s1["scene_coherence"] == 1.0
    assert "--failed score1" in one.report({})
    with pytest.raises(ValueError, match="failed"):
        VIF({"failed": "zero"})


def test_spatial_judge_sees_marks_and_refuses_release_data():
    bench = VIF(VIF.fast_config())
    item = next(i for i in bench.items() if i.key.endswith("visual/syn001"))
    task = item.payload
    layout = render_layout(task, 192)
    req = bench.judge_requests(item, layout)[0]  # "generated" image = the layout itself: every box remains
    answer = json.loads(spatial_answer(req))
    assert answer["visual_instruction_cleanliness"] == 1 and answer["marks_visible"] is True
    assert answer["scene_coherence"] is None
    with pytest.raises(ValueError, match="judges only the built-in synthetic tasks"):
        SpatialJudge().predict([ChatRequest.user("vif/release/visual/t1", "x")])
    with pytest.raises(ValueError, match="vif-spatial-judge judges only the built-in synthetic tasks"):
        VIF({}).check_judge("vif-spatial-judge")


def test_collage_pastes_each_reference_into_its_box():
    ref = np.full((10, 10, 3), 7, np.uint8)
    bench = VIF(VIF.fast_config())
    task = next(iter(bench.items())).payload
    layout = render_layout(task, 64)
    out = collage(GenerationRequest("x", ("Image 0:", ref, "Image 1:", layout, "go"), (64, 64)))
    x0, y0, x1, y1 = task.layout[0].box
    assert (out[int(round(y0 * 64)):int(round(y1 * 64)), int(round(x0 * 64)):int(round(x1 * 64))] == 7).all()
    assert np.all(out == 7, axis=2).sum() == (int(round(y1 * 64)) - int(round(y0 * 64))) * (int(round(x1 * 64)) - int(round(x0 * 64)))
    assert get_model("collage").name == "collage"


@pytest.mark.slow
def test_the_fast_run_s_two_default_judges(tmp_path, capsys):
    """``vif --fast`` without ``--judge``: the spatial judge and ``tiny-chat-judge`` (hf-vlm on the
    built-in tiny random LLaVA), each scoring every answer (rows under its own ``judge``, both
    verdicts in samples.jsonl, every raw answer stored); the random judge's answers hold no score
    (unparsed, NaN), so each headline criterion is the spatial judge's alone; a second run asks no
    model and no judge."""
    import sqlite3

    out = tmp_path / "out"
    args = ["vif", "--fast", "--variants", "visual,ti-dense", "--tasks", "syn000,syn001,syn002", "--out", str(out),
            "--no-progress", "--no-plots"]
    assert main(args) == 0
    printed = capsys.readouterr().out  # no bare "nan" for a newcomer: the average says what it lacks
    assert "avg n/a (3 of 6 criteria judged)" in printed and not re.search(r"\bnan\b", printed, re.I), printed
    meta = json.loads((out / "results.json").read_text())
    assert [j["label"] for j in meta["judges"]] == ["vif-spatial-judge", "tiny-chat-judge"]
    assert [j["identity"]["adapter"] for j in meta["judges"]] == ["vif-spatial-judge", "tiny-chat-judge"]
    assert "random weights" in meta["judges"][1]["note"] and "note" not in meta["judges"][0]
    (weights,) = meta["judges"][1]["identity"]["weights"]  # the built-in checkpoint, in icl's cache
    assert "/builtin/tiny-chat-v" in weights and meta["judges"][1]["identity"]["cls"].endswith("tiny.TinyChatJudge")
    n = meta["plan"]["items"]
    assert n == 5 and meta["counts"]["planned"] == meta["counts"]["computed"] == 2 * n and meta["counts"]["failed"] == 0
    by_judge = {(r["judge"], r["variant"]): r for r in _rows(out / "criteria_by_judge.csv")}
    assert {j for j, _ in by_judge} == {"vif-spatial-judge", "tiny-chat-judge"}
    tiny = by_judge[("tiny-chat-judge", "visual")]
    # random tokens hold no score: unparsed, every criterion NaN and counted
    assert tiny["n"] == tiny["unparsed"] == "3" and all(tiny[c] == "nan" for c in CRITERIA)
    head = {r["variant"]: r for r in _rows(out / "criteria.csv")}
    for variant in ("visual", "ti-dense"):
        spatial = by_judge[("vif-spatial-judge", variant)]
        assert spatial["unparsed"] == "0"
        for c in CRITERIA:  # the headline equals the spatial judge alone
            assert head[variant][c] == spatial[c] or float(head[variant][c]) == pytest.approx(float(spatial[c]))
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    verdicts = {(s["item"], s["judge"]["label"]): s for s in samples}
    assert len(samples) == len(verdicts) == 2 * n
    assert {j for _, j in verdicts} == {"vif-spatial-judge", "tiny-chat-judge"}
    for (item, judge), s in verdicts.items():
        (answer,) = s["judge_answers"]
        assert isinstance(answer, str) and s["status"] == "ok"
        parsed = s["metrics"]["judge_parsed"]
        assert parsed == (1.0 if judge == "vif-spatial-judge" else 0.0), (item, judge, answer)
    report = (out / "report.md").read_text()
    assert "`tiny-chat-judge` is not a real judge" in report
    con = sqlite3.connect(out / "store.sqlite")
    try:
        texts = con.execute("SELECT r.kind, r.body FROM links l JOIN responses r ON r.request_hash = l.request_hash "
                            "AND r.model_id = l.model_id WHERE l.model_id = ?", (meta["judges"][1]["judge_id"],)).fetchall()
    finally:
        con.close()
    assert len(texts) == n and all(kind == "text" and isinstance(body, str) for kind, body in texts)

    capsys.readouterr()
    assert main(args) == 0
    again = json.loads((out / "results.json").read_text())
    assert "0 scores (item x judge) computed" in capsys.readouterr().out
    assert again["counts"]["computed"] == again["counts"]["model_calls"] == 0
    assert [j["judge_id"] for j in again["judges"]] == [j["judge_id"] for j in meta["judges"]]


def test_release_folder_through_the_plugin(tmp_path):
    """A release in schema vif-task-1 (docs/vif.md) under ``<data root>/vif``: references and the
    pose image read from disk (RGB), VIs rendered, text variants only on the text subset."""
    import cv2

    root = tmp_path / "vif"
    (root / "img").mkdir(parents=True)
    for name, bgr in (("a.png", (0, 0, 255)), ("b.png", (255, 0, 0)), ("pose.png", (0, 255, 0))):
        cv2.imwrite(str(root / "img" / name), np.full((20, 30, 3), bgr, np.uint8))
    recs = [{"id": "r1", "references": [{"file": "img/a.png", "role": "main", "type": "person"},
                                        {"file": "img/b.png", "role": "scene", "type": "style"}],
             "layout": [{"ref": 0, "box": [0.1, 0.1, 0.6, 0.9]}], "instruction": "A person.",
             "poses": [{"ref": 0, "file": "img/pose.png", "description": "arms up."}],
             "conflicts": {"pose": True}, "text_subset": True},
            {"id": "r2", "references": [{"file": "img/a.png", "role": "main", "type": "person"}],
             "layout": [{"ref": 0, "box": [0.2, 0.2, 0.5, 0.5]}], "instruction": "Again."}]
    (root / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    bench = VIF({"data_root": str(tmp_path), "size": 64, "vi_size": 64})
    items = {i.key: i for i in bench.items()}
    assert sorted(items) == ["release/ti-dense/r1", "release/ti-medium/r1", "release/ti-sparse/r1",
                             "release/visual/r1", "release/visual/r2"]
    assert items["release/visual/r1"].group == {"task": "r1", "variant": "visual", "refs": 2, "vis": 2,
                                                "vi_types": "layout+pose", "conflicts": "pose"}
    req = bench.request(items["release/visual/r1"])
    imgs = req.images
    assert imgs[0][0, 0].tolist() == [255, 0, 0] and imgs[1][0, 0].tolist() == [0, 0, 255]
    assert imgs[3].shape == (20, 30, 3) and imgs[3][0, 0].tolist() == [0, 255, 0]  # the pose image as given
    assert bench.data_origin()["vif"].startswith("release ")
    judge = bench.judge_requests(items["release/ti-sparse/r1"], np.zeros((8, 8, 3), np.uint8))[0]
    assert judge.id.startswith("vif/release/") and len(judge.images) == 5
    s = bench.score(items["release/visual/r1"], np.zeros((8, 8, 3), np.uint8), ['{"visual_quality": 4}'])
    assert s["visual_quality"] == 4.0 and np.isnan(s["average"]) and np.isnan(s["layout_iou"])
    assert len(VIF({"data_root": str(root)}).items()) == 5  # the folder itself holds tasks.jsonl
    with pytest.raises(ValueError, match="vif: no tasks.jsonl in the release folder"):
        VIF({"data_root": str(tmp_path / "empty")}).items()
    with pytest.raises(ValueError, match="vif: no task 'r9'"):
        VIF({"data_root": str(tmp_path), "tasks": "r9"}).items()


@pytest.mark.slow
def test_a_tiny_multi_image_generator_through_the_runner(tmp_path, tiny_janus, capsys):
    """Tiny Janus (``tests/models/t2i/tiny_t2i.py``) as a multi-reference generator through vif (the
    tiny Qwen-Image-Edit-Plus through vif: tests/models/t2i/test_qwen_image_edit.py)."""
    out = tmp_path / "out"
    args = ["vif", "--fast", "--variants", "visual,ti-sparse", "--tasks", "syn000,syn001,syn002", "--out", str(out),
            "--models", f"janus:weights={tiny_janus},max_batch=4", "--no-progress", "--no-plots",
            "--judge", "vif-spatial-judge"]  # the generator is under test, not the fast run's second judge
    assert main(args) == 0
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["planned"] == meta["counts"]["computed"] == 5 and meta["counts"]["failed"] == 0
    assert {r["variant"] for r in _rows(out / "criteria.csv")} == {"visual", "ti-sparse"}
    capsys.readouterr()
    assert main(args) == 0
    assert "0 items computed" in capsys.readouterr().out


def test_a_judge_that_cannot_serve_vif_is_refused_before_any_generation(tmp_path, capsys):
    """``clip-judge`` judges one image per request; vif's judge request shows the references, the VI
    images and the output: refused at once (``Adapter.would_refuse`` on ``Benchmark.judge_probe``),
    exit 2 with one line, before the output folder exists. A broken judge folder likewise."""
    from tiny_t2i import build_clip

    clip = build_clip(tmp_path / "clip")
    capsys.readouterr()  # the build's own output
    out = tmp_path / "out"
    assert main(["vif", "--fast", "--out", str(out), "--no-progress", "--no-plots",
                 "--judge", f"clip-judge:weights={clip}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot judge benchmark 'vif'" in err and "judges one" in err
    assert not out.exists()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-model"}')
    assert main(["vif", "--fast", "--out", str(out), "--no-progress", "--no-plots",
                 "--judge", f"hf-vlm:weights={broken}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be loaded" in err and not out.exists()


def test_size_is_bounded_by_the_image_cap(tmp_path, capsys, monkeypatch):
    """``--size 30000`` would allocate 30000² x 3 bytes per image (and more in float): bounded by the
    cap of image inputs (icl.data.images ``DEFAULT_MAX_PIXELS`` 40,000,000, ``ICL_MAX_IMAGE_PIXELS``),
    refused in one line before anything runs."""
    from icl.data.images import DEFAULT_MAX_PIXELS

    monkeypatch.delenv("ICL_MAX_IMAGE_PIXELS", raising=False)
    assert DEFAULT_MAX_PIXELS == 40_000_000
    with pytest.raises(ValueError, match=r"vif: size 30000 asks for 900,000,000 pixels .* at most 6324"):
        VIF({"size": 30000})
    with pytest.raises(ValueError, match="vi_size 7000"):
        VIF({"vi_size": 7000})
    assert VIF({"size": 6324}).config["size"] == 6324
    out = tmp_path / "out"
    assert main(["vif", "--fast", "--size", "30000", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "over the image cap" in err and not out.exists()
    monkeypatch.setenv("ICL_MAX_IMAGE_PIXELS", str(7000 * 7000))
    assert VIF({"vi_size": 7000}).config["vi_size"] == 7000


def test_a_judgement_of_the_previous_rubric_is_not_reused(tmp_path, capsys, monkeypatch):
    """Issue 45.3: the rubric's text changed (vif-rubric-3: every cap of the source), so a store
    filled under vif-rubric-2 (its prompt text and scorer version 2, stood in for here) keeps its
    generations (same requests) but its judge answers and scores are not reused: the judge is
    asked again with the new prompt and every item is scored anew under scorer version 3."""
    import sqlite3

    from icl.benchmarks.vif import rubric

    out = tmp_path / "out"
    args = ["vif", "--fast", "--out", str(out), "--no-progress", "--no-plots", "--judge", "vif-spatial-judge"]
    with monkeypatch.context() as m:
        m.setattr(rubric, "CRITERIA_TEXT", "the vif-rubric-2 criteria (an older text)")
        m.setattr(VIF, "scorer_version", "2")
        assert main(args) == 0
    n = int(capsys.readouterr().out.split(" items computed")[0].rsplit("vif: ", 1)[1])
    assert VIF.scorer_version == "3" and rubric.RUBRIC_VERSION == "vif-rubric-3"
    assert main(args) == 0
    # the generations only are reused; every item is judged and scored again
    assert f"vif: {n} items computed, 0 already in the store, 0 failed ({n} answers reused from the store)" \
        in capsys.readouterr().out
    judge_id = json.loads((out / "results.json").read_text())["judge_id"]
    with sqlite3.connect(f"file:{out / 'store.sqlite'}?mode=ro", uri=True) as c:
        versions = dict(c.execute("SELECT scorer_version, COUNT(*) FROM scores GROUP BY scorer_version"))
        answers = c.execute("SELECT COUNT(*) FROM responses WHERE model_id = ?", (judge_id,)).fetchone()[0]
    assert versions == {"2": n, "3": n} and answers == 2 * n  # each item's judge request, old and new


def test_verdict_in_words_for_the_gallery():
    """Issue 45.5: the gallery shows a VIF verdict as its six scores by name (samples.jsonl writes
    NaN as null: shown as -), and how many a cap lowered."""
    bench = VIF({"fast": True})
    metrics = {**{c: None for c in CRITERIA}, "reference_consistency": 10.0, "visual_instruction_adherence": 3.0,
               "failed": 0.0, "judge_capped": 1.0}
    assert bench.verdict(metrics) == ("text -, reference 10, adherence 3, cleanliness -, scene -, quality - "
                                      "(1 lowered by a cap)")
    assert bench.verdict({**metrics, "failed": 1.0}) is None and bench.verdict({"failed": 0.0}) is None
