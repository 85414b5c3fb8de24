"""The generators through the one runner: VL-ICL's built-in text-to-image tasks with tiny
``janus`` as generator and as judge (one checkpoint answers both directions), and with tiny
``diffusers-t2i`` on the text-only variant; a second run computes nothing."""

import csv
import json
import sqlite3

import cv2

from icl.run.__main__ import main

T2I = "open_t2i_mi,cobsat,fast_count_t2i,fast_attr_t2i"


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _generation_records(out, steps, guidance, batch):
    """Each image's record (issue 23: seed, steps, guidance, size, latency, memory) is stored
    with its response and logged in samples.jsonl; seeds are the requests' own."""
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert lines and all(d["answer"] and "png" in d["answer"] for d in lines)
    with sqlite3.connect(out / "store.sqlite") as c:
        stored = {h: json.loads(g) for h, g in c.execute(
            "SELECT request_hash, generation FROM responses WHERE generation IS NOT NULL")}
    for d in lines:
        g = d["generation"]
        assert g["steps"] == steps and g["guidance"] == guidance and g["batch"] <= batch
        assert g["output_size"] == list(cv2.imread(str(out / d["answer"]["png"])).shape[:2])
        assert len(g["size"]) == 2 and 0 <= g["seed"] < 2**63 and g["request_id"]
        timing = d["compute"]["generation"]
        assert timing["latency_s"] > 0 and timing["peak_bytes"] > 0 and timing["memory"] == "process-max-rss"
        assert stored[d["request"]["hash"]] == {**g, **timing}
    assert len({d["generation"]["seed"] for d in lines}) > 1


def _run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    return captured.out


def test_janus_generates_and_judges_vlicl_t2i(tmp_path, janus_folder, capsys):
    out = tmp_path / "janus"
    model = f"janus:weights={janus_folder},max_batch=4"
    args = ["vlicl", "--fast", "--models", model, "--judge", model, "--tasks", T2I, "--seeds", "0",
            "--shots", "0,1", "--queries", "2", "--out", str(out), "--data-root", str(tmp_path / "data"),
            "--no-plots", "--no-progress"]
    _run(args, capsys)
    acc = _rows(out / "accuracy.csv")
    assert {r["task"] for r in acc} == set(T2I.split(","))
    meta = json.loads((out / "results.json").read_text())
    assert meta["judge"]["adapter"] == "janus" and meta["counts"]["failed"] == 0
    assert meta["counts"]["planned"] == meta["counts"]["computed"] == 4 * 2 * 2
    _generation_records(out, 16, 5.0, 4)  # janus: image tokens as steps, cfg_weight as guidance
    assert "0 items computed" in _run(args, capsys)


def test_diffusers_t2i_on_the_text_only_variant(tmp_path, sd_folder, capsys):
    out = tmp_path / "sd"
    model = f"diffusers-t2i:weights={sd_folder},steps=2,batch_size=4"
    args = ["vlicl", "--fast", "--models", model, "--tasks", "open_t2i_mi,cobsat", "--variant", "text", "--seeds", "0",
            "--shots", "0,2", "--queries", "2", "--out", str(out), "--data-root", str(tmp_path / "data"),
            "--no-plots", "--no-progress"]
    _run(args, capsys)
    acc = _rows(out / "accuracy.csv")
    assert {r["task"] for r in acc} == {"open_t2i_mi", "cobsat"}  # the tasks with a text version
    meta = json.loads((out / "results.json").read_text())
    (ident,) = [m["identity"] for m in meta["models"].values()]
    assert ident["adapter"] == "diffusers-t2i" and "cpu_offload" not in ident["args"]
    assert meta["counts"]["failed"] == 0 and meta["counts"]["computed"] == 2 * 2 * 2
    _generation_records(out, 2, 7.5, 4)  # StableDiffusionPipeline's default guidance_scale
    gallery = json.loads((out / "gallery" / "gallery.json").read_text())  # the images in report.html
    assert {t["task"] for t in gallery["tasks"]} == {"open_t2i_mi", "cobsat"}
    assert all(m["image"] for t in gallery["tasks"] for it in t["items"] for m in it["models"])
    assert 'loading="lazy" src="gallery/' in (out / "report.html").read_text()
    assert "0 items computed" in _run(args, capsys)
