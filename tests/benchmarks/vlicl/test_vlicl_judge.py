"""The deterministic judge reads back exactly what the built-in generators draw: objects, their
shapes, colours and counts, and the background, checked against the scene descriptions (the
generator's truth) and the object count against scikit-image's labelling."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.measure import label

import icl.benchmarks.vlicl  # noqa: F401  (registers vlicl-judge)
from icl.benchmarks.vlicl.builtin import generate
from icl.benchmarks.vlicl.builtin.draw import BACKGROUNDS, COLOURS, SHAPES, Obj, blank, draw_objects, shape_mask
from icl.benchmarks.vlicl.builtin.scenes import ObjectScene
from icl.benchmarks.vlicl.judge import VLICLJudge, holds, read_scene
from icl.benchmarks.vlicl.tasks import JUDGE_PROMPT
from icl.models.registry import get_model
from icl.models.requests import ChatRequest


def _scenes(task: str, n: int = 12) -> list[ObjectScene]:
    data = generate(task, n, 8)
    return [s for s in data.source.scenes.values() if isinstance(s, ObjectScene)]


@pytest.mark.parametrize("task", ["open_t2i_mi", "fast_count_t2i", "fast_attr_t2i", "cobsat"])
def test_reading_equals_the_scene(task: str) -> None:
    scenes = _scenes(task)
    assert len(scenes) > 30
    for scene in scenes:
        img = scene.render()
        r = read_scene(img)
        assert r.background == scene.background
        got = sorted((t.box, t.shape, t.colour) for t in r.things)
        want = sorted(((o.x, o.y, o.x + o.s, o.y + o.s), o.shape, o.colour) for o in scene.objects)
        assert got == want
        fg = np.any(img != np.array(BACKGROUNDS[scene.background], np.uint8), axis=2)
        assert label(fg, connectivity=2).max() == len(r.things)


def test_templates_are_distinct_and_fill_their_box() -> None:
    for s in (5, 13, 21, 45):
        masks = {sh: shape_mask(sh, s) for sh in SHAPES}
        for sh, m in masks.items():
            assert m.any(0).all() and m.any(1).all(), (sh, s)  # touches all four sides
        for a in SHAPES:
            for b in SHAPES:
                if a < b and s >= 13:
                    iou = (masks[a] & masks[b]).sum() / (masks[a] | masks[b]).sum()
                    assert iou < 0.9, (a, b, s, iou)


def test_concepts() -> None:
    img = draw_objects(blank((96, 96), "sand"), [Obj("star", "red", 5, 5, 21), Obj("star", "red", 40, 40, 21),
                                               Obj("disc", "blue", 5, 60, 15)])
    r = read_scene(img)
    yes = ["star", "stars", "red", "blue", "red star", "blue disc", "two stars", "2 stars", "one disc",
           "sand background"]
    no = ["ring", "green", "red disc", "three stars", "one star", "white background", "sky background",
          "a red star", "zorb", ""]
    assert all(holds(r, c) for c in yes)
    assert not any(holds(r, c) for c in no)


def _ask(img, concept: str) -> ChatRequest:
    return ChatRequest.user("j", img, JUDGE_PROMPT.format(concept=concept), max_new_tokens=5)


def test_judge_adapter() -> None:
    judge = get_model("vlicl-judge")
    assert isinstance(judge, VLICLJudge) and judge.serves == (ChatRequest,)
    img = draw_objects(blank((64, 64), "white"), [Obj("cross", "green", 10, 10, 21)])
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    out = judge.predict([_ask(img, "green cross"), _ask(img, "cross"), _ask(img, "red cross"),
                         _ask(noise, "cross"), ChatRequest.user("t", "no image here"),
                         _ask(img.astype(np.float32), "cross"),
                         ChatRequest.user("x", img, "What is this?")])
    assert out == ["yes", "yes", "no", "no", "no", "no", "no"]
    assert set(COLOURS).isdisjoint(BACKGROUNDS)
