"""The gallery of a generating run: CoBSAT's built-in tasks through the runner (its baseline
generators and judge), the page opened in headless Chromium with every thumbnail visible on the
screenshot; a stable sample plus every failure; everything escaped, only its own files loaded."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import cv2
import numpy as np
import pytest
from _browser import CHROMIUM, browse

from icl.models import Adapter, GenerationRequest, register_model
from icl.models.registry import unregister_model
from icl.report.gallery import (FOLDER, INDEX, MAX_TEXT, THUMB, failed, gallery_html, pick, prompt_roles, short_names,
                                thumbnail, write_gallery)
from icl.report.html import report_html
from icl.run.__main__ import main


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append({k: v or "" for k, v in attrs})


def _line(item, task, model="m", status="ok", **metrics):
    return {"item": item, "group": {"task": task}, "model": model, "status": status, "metrics": metrics}


def test_sample_is_stable_and_every_failure_is_kept():
    lines = [_line(f"t/{i}", "t", correct=float(i % 3 != 0)) for i in range(30)]
    lines += [_line("u/0", "u", status="failed"), _line("u/1", "u", overall=1.0), _line("u/2", "u", failed=1.0)]
    (t, u) = pick(lines, per_task=4)
    assert t["task"] == "t" and len(t["sampled"]) == 4
    assert pick(list(reversed(lines)), per_task=4)[1]["sampled"] == t["sampled"]  # order-free, no random state
    assert pick(lines, per_task=5)[0]["sampled"][:4] == t["sampled"]  # a larger sample keeps the smaller one
    fails = {f"t/{i}" for i in range(0, 30, 3)}
    assert set(t["failures"]) == fails - set(t["sampled"]) and t["failed"] == len(fails) and t["hidden"] == 0
    assert pick(lines, per_task=0, max_failures=2)[0]["hidden"] == len(fails) - 2
    assert u["failed"] == 2 and not failed(lines[-2]) and failed(lines[-1]) and failed(lines[-3])


def test_thumbnails_are_capped_and_pixel_exact_when_small():
    big = thumbnail(np.full((300, 600, 3), 200, np.uint8))
    small = np.zeros((16, 8, 3), np.uint8)
    small[:8, :, 0] = 255
    up = cv2.imdecode(np.frombuffer(thumbnail(small), np.uint8), cv2.IMREAD_COLOR)
    assert cv2.imdecode(np.frombuffer(big, np.uint8), cv2.IMREAD_COLOR).shape == (64, 128, 3)
    assert up.shape == (THUMB, THUMB // 2, 3) and set(np.unique(up[..., 2])) == {0, 255}  # nearest: no blur


def test_gallery_gives_each_thumbnail_its_own_width_and_height(tmp_path):
    """gallery.json's ``w``/``h`` (the <img> size, read from the PNG's header) are the pixels of the
    thumbnail file: a wide answer, a tall support image and a small one (drawn larger)."""
    (tmp_path / "samples").mkdir()
    cv2.imwrite(str(tmp_path / "samples" / "a.png"), np.full((40, 100, 3), 90, np.uint8))

    class Request:
        prompt = ["a tall one:", np.full((300, 100, 3), 30, np.uint8), "a small one", np.zeros((5, 7, 3), np.uint8)]

    line = {**_line("t/0", "t"), "answer": {"png": "samples/a.png"}}
    index = json.loads(write_gallery(tmp_path, [line], lambda key: Request()).read_text())
    (item,) = index["tasks"][0]["items"]
    shown = [p for p in item["prompt"] if "src" in p] + [item["models"][0]["image"]]
    assert [(p["w"], p["h"]) for p in shown] == [(round(THUMB / 3), THUMB), (THUMB, round(THUMB * 5 / 7)),
                                                 (THUMB, round(THUMB * 0.4))]
    for p in shown:
        h, w = cv2.imread(str(tmp_path / p["src"]), cv2.IMREAD_COLOR).shape[:2]
        assert (type(p["w"]), p["w"], p["h"]) == (int, w, h)


def test_gallery_escapes_and_refuses_foreign_sources(tmp_path):
    evil = '<script>alert("x")</script>&'
    (tmp_path / FOLDER).mkdir()
    thumb = {"src": f"{FOLDER}/{'a' * 32}.png", "w": 64, "h": 32}
    index = {"schema": "icl-gallery-1", "thumb": THUMB, "per_task": 4, "max_failures": 40, "tasks": [
        {"task": evil, "failed": 1, "hidden": 0, "items": [
            {"item": evil, "group": {"k": evil}, "why": "failure",
             "prompt": [{"text": evil}, thumb, {"src": "https://x.org/a.png", "w": 4, "h": 4},
                        {"src": f"{FOLDER}/../../etc.png", "w": 4, "h": 4}],
             "models": [{"model": evil, "status": "ok", "failed": True, "error": evil,
                         "image": {"src": f"{FOLDER}/{'b' * 32}.png\" onerror=\"x", "w": 4, "h": 4},
                         "verdicts": [{"judge": evil, "score": "correct=0", "text": evil}]}]}]}]}
    (tmp_path / FOLDER / INDEX).write_text(json.dumps(index))
    got = gallery_html(tmp_path)
    assert "<script" not in got and got.count("alert(&quot;x&quot;)") == 9  # the model also in its title
    parsed = _Images()
    parsed.feed(got)
    assert [i["src"] for i in parsed.images] == [thumb["src"]]  # the foreign and malformed ones dropped
    assert parsed.images[0]["loading"] == "lazy" and parsed.images[0]["width"] == "64"
    page = report_html("cobsat", {}, {"config": {"name": "x"}}, [], [], tmp_path)
    assert "img-src data: 'self';" in page and 'id="gallery"' in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium; "
                                             ".ci/run installs it when run as root)")
def test_cobsat_gallery_shows_its_images_in_chromium(tmp_path, capsys):
    out = tmp_path / "cobsat"
    args = ["cobsat", "--fast", "--tasks", "Color-I,Texture-I", "--shots", "0,2,4", "--out", str(out),
            "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err[-2000:]
    index = json.loads((out / FOLDER / INDEX).read_text())
    assert [t["task"] for t in index["tasks"]] == ["Color-I", "Texture-I"]
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    for t in index["tasks"]:  # the sample, and every failed item of the task beside it
        keys = {d["item"] for d in samples if d["group"]["task"] == t["task"]}
        fails = {d["item"] for d in samples if d["group"]["task"] == t["task"] and failed(d)}
        shown = {it["item"] for it in t["items"]}
        assert len([it for it in t["items"] if it["why"] == "sample"]) == min(4, len(keys)) and fails <= shown
        for it in t["items"]:
            assert any("src" in p for p in it["prompt"]) == (it["group"]["shots"] > 0)  # the support set
            assert all(m["image"] and m["verdicts"] for m in it["models"])
            assert all(len(v["text"]) <= MAX_TEXT for m in it["models"] for v in m["verdicts"])
    files = sorted(p.name for p in (out / FOLDER).glob("*.png"))
    assert files == index["files"] and all((out / FOLDER / f).stat().st_size < 20_000 for f in files)
    assert main(args) == 0 and sorted(p.name for p in (out / FOLDER).glob("*.png")) == files  # rewritten, same

    dom, console, shot = browse(out / "report.html", tmp_path, size=(1280, 9000))
    assert console == [], console  # no blocked or missing image, nothing else
    parsed = _Images()
    parsed.feed(dom)
    thumbs = [i for i in parsed.images if i["src"].startswith(f"{FOLDER}/")]
    assert thumbs and all(i["loading"] == "lazy" for i in thumbs)
    assert not [i for i in parsed.images if not re.match(rf"^({FOLDER}/[0-9a-f]{{32}}\.png|data:image/png;base64,)",
                                                         i["src"])]
    seen = 0
    for src in sorted({i["src"] for i in thumbs}):  # each thumbnail drawn, pixel for pixel, on the screenshot
        template = cv2.imread(str(out / src), cv2.IMREAD_COLOR)
        assert template.shape[:2] == (int(next(i["height"] for i in thumbs if i["src"] == src)),
                                      int(next(i["width"] for i in thumbs if i["src"] == src)))
        score = cv2.matchTemplate(shot, template, cv2.TM_SQDIFF_NORMED).min()
        assert score < 0.01, (src, score)
        seen += 1
    assert seen >= 10


class _Gray(Adapter):
    """A weight-free generator with a long label (its ``tag`` argument stands for a weights path)."""

    name = "test-gray"
    serves = (GenerationRequest,)
    batch_size = 8

    def __init__(self, tag: str = ""):
        self.tag = tag

    def predict(self, requests):
        return [np.full((*(r.size or (16, 16)), 3), 128, np.uint8) for r in requests]


def test_roles_and_short_names():
    img = np.zeros((2, 2, 3), np.uint8)
    assert prompt_roles(["describe", "a red car:", img, "a blue car:", img, "a green", "answer"]) == [
        "instruction", "support", "support", "support", "support", "query", "query"]
    assert prompt_roles(["describe", "a green"]) == ["query", "query"]  # no support set: all of it is asked
    assert short_names(["qwen-image-edit[weights=/a]", "qwen-image-edit[weights=/b]", "copy-last"]) == {
        "copy-last": "copy-last", "qwen-image-edit[weights=/a]": "qwen-image-edit #1",
        "qwen-image-edit[weights=/b]": "qwen-image-edit #2"}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium; "
                                             ".ci/run installs it when run as root)")
def test_gallery_marks_the_query_names_models_and_says_what_verdicts_mean(tmp_path, capsys):
    """Issue 45.5, in Chromium as a user sees it: the query in its own box after the support set,
    each model under its short name with its full label and id on hover (``title``), each verdict
    in words ("object right, attribute wrong") with the judge's raw answers beside it."""
    tag = "/very/long/path/to/some/checkpoint/folder/" + "x" * 80
    register_model("test-gray", _Gray, replace=True)
    try:
        out = tmp_path / "cobsat"
        args = ["cobsat", "--fast", "--tasks", "Color-I", "--shots", "0,2", "--prompts", "2", "--out", str(out),
                "--models", f"test-gray:tag={tag}", "--data-root", str(tmp_path / "data"), "--no-plots",
                "--no-progress"]
        assert main(args) == 0, capsys.readouterr().err[-2000:]
    finally:
        unregister_model("test-gray")
    label = f"test-gray[tag={tag}]"
    meta = json.loads((out / "results.json").read_text())
    model_id = meta["models"][label]["model_id"]
    dom, console, shot = browse(out / "report.html", tmp_path, size=(1280, 3000))
    cv2.imwrite(str(tmp_path / "gallery.png"), shot)
    print("screenshot:", tmp_path / "gallery.png")
    assert console == [], console
    section = dom[dom.index('id="gallery"'):]
    end = section.find("<h2", section.index("</h2>"))  # up to the next section
    section = section if end < 0 else section[:end]
    rows = section.split("<tr>")[2:]  # the item rows
    assert rows
    for row in rows:
        two_shot = "shots=2" in row
        query = row[row.index('<div class="query">'):]
        assert '<span class="qlabel">query</span>' in query
        # the support set (captions and images) comes before the query box, never inside it
        assert (row[:row.index('<div class="query">')].count('class="thumb"') == 2) == two_shot
        assert 'alt="support image"' not in query
        assert f'title="{label} (model id {model_id})"' in row and ">test-gray [ok]</div>" in row
        assert tag not in row.replace(f'title="{label} (model id {model_id})"', "")  # the path only on hover
        assert re.search(r'cobsat-judge: <span class="meaning">object (right|wrong), attribute (right|wrong)</span>'
                         r' <span class="raw" title="[^"]*">raw: [^<|]+ \| [^<|]+</span>', row), row[-800:]
