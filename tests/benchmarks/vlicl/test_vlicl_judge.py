"""The deterministic judge reads back exactly what the built-in generators draw: objects, their
shapes, colours and counts, and the background, checked against the scene descriptions (the
generator's truth) and the object count against scikit-image's labelling."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.measure import label

import icl.benchmarks.vlicl  # noqa: F401  (registers vlicl-judge)
from icl.benchmarks.cobsat import lite as cobsat_lite
from icl.benchmarks.cobsat.vocab import VOCAB, display, get_task as get_cobsat_task
from icl.benchmarks.vlicl.builtin import COBSAT_TASKS, generate
from icl.benchmarks.vlicl import VLICL
from icl.benchmarks.vlicl.builtin.draw import (BACKGROUNDS, COLOURS, NUMBER_WORDS, PLURALS, SHAPES, Obj, blank,
                                               draw_objects, shape_mask)
from icl.benchmarks.vlicl.builtin.scenes import ObjectScene
from icl.benchmarks.vlicl.judge import VLICLJudge, holds, read_scene
from icl.benchmarks.vlicl.tasks import JUDGE_PROMPT, JUDGE_PROMPT_OPEN_MI
from icl.data.seeds import rng as seeded_rng
from icl.models.registry import get_model
from icl.models.requests import ChatRequest


def _scenes(task: str, n: int = 12) -> list[ObjectScene]:
    data = generate(task, n, 8)
    return [s for s in data.source.scenes.values() if isinstance(s, ObjectScene)]


@pytest.mark.parametrize("task", ["open_t2i_mi", "fast_count_t2i", "fast_attr_t2i"])
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
    noise = seeded_rng(0, "vlicl-test", "*", "noise", "image").integers(0, 256, (64, 64, 3), dtype=np.uint8)
    out = judge.predict([_ask(img, "green cross"), _ask(img, "cross"), _ask(img, "red cross"),
                         _ask(noise, "cross"), ChatRequest.user("t", "no image here"),
                         _ask(img.astype(np.float32), "cross"),
                         ChatRequest.user("x", img, "What is this?")])
    assert out == ["yes", "yes", "no", "no", "no", "no", "no"]
    # the reference code's open_t2i_mi wording (ys-zong/VL-ICL evals/eval.py llava_judge_open_t2i_mi:
    # f"Decide whether the image contains {result['answer']}. Answer with 'yes' or 'no'.\n") reads the same
    mi = [ChatRequest.user("m", img, JUDGE_PROMPT_OPEN_MI.format(concept=c), max_new_tokens=5)
          for c in ("green cross", "red cross")]
    assert judge.predict(mi) == ["yes", "no"]
    assert set(COLOURS).isdisjoint(BACKGROUNDS)


def _drawn(concepts: list[str], extra: int = 0) -> np.ndarray:
    """An image showing ``concepts`` in the generators' vocabulary (``extra`` more of a counted shape)."""
    singular = {p: s for s, p in PLURALS.items()}
    background, shape, colour, count = "white", "square", "gray", 1
    for c in concepts:
        words = c.split()
        if words[-1] == "background":
            background = words[0]
        elif words[0] in NUMBER_WORDS:
            count, shape = NUMBER_WORDS.index(words[0]) + extra, singular.get(words[1], words[1])
        elif words[0] in COLOURS and len(words) == 2:
            colour, shape = words
        elif words[0] in COLOURS:
            colour = words[0]
        else:
            shape = words[0]
    objs = [Obj(shape, colour, 2 + 19 * (i % 4), 2 + 19 * (i // 4), 15) for i in range(count)]
    return draw_objects(blank((96, 96), background), objs)


def _lite(q: dict, latent_value: str | None = None) -> np.ndarray:
    """The CoBSAT-lite drawing of a built-in cobsat query record (its latent value replaced if given)."""
    spec = get_cobsat_task(q["task"])
    values = {**{k: q[k] for k in (spec.latent_space, spec.text_space)}}
    if latent_value is not None:
        values[spec.latent_space] = latent_value
    return np.array(cobsat_lite.draw(spec.theme, values[spec.theme.attribute], values[spec.theme.object]))


def test_cobsat_drawings_read_back_as_their_records() -> None:
    """The cobsat task draws CoBSAT-lite (icl.benchmarks.cobsat.lite): the judge sees each support
    image's two values, and no other value of either vocabulary."""
    data = generate("cobsat", 8, 2)
    judge = get_model("vlicl-judge")
    assert {r["task"] for r in data.support} == set(COBSAT_TASKS) and len(COBSAT_TASKS) == 8
    for rec in data.support[::7]:
        spec = get_cobsat_task(rec["task"])
        img = data.source.image(rec["image"])
        for space in (spec.latent_space, spec.text_space):
            for value in VOCAB[space]:
                concept = f"{display(value)} background" if space == "background" else display(value)
                req = ChatRequest.user("j", img, JUDGE_PROMPT.format(concept=concept), max_new_tokens=5)
                assert judge.predict([req]) == ["yes" if value == rec[space] else "no"], (rec["id"], concept)


@pytest.mark.parametrize("task", ["open_t2i_mi", "fast_count_t2i", "fast_attr_t2i", "cobsat"])
def test_a_right_picture_passes_a_wrong_one_fails(task: str) -> None:
    bench = VLICL({"fast": True, "tasks": (task,), "seeds": (0,), "shots": (0,)})
    judge = get_model("vlicl-judge")
    for item in bench.items():
        q = bench.data(task).by_id[item.payload[3]]
        concepts = q["answer"] if task == "cobsat" else [q["answer"]]
        right = _lite(q) if task == "cobsat" else _drawn(concepts)
        verdicts = judge.predict(list(bench.judge_requests(item, right)))
        assert bench.score(item, right, verdicts)["correct"] == 1.0, (item.key, concepts)
        if task == "cobsat":  # the latent value wrong: the latent part fails, the given part holds
            spec = get_cobsat_task(q["task"])
            other = next(v for v in VOCAB[spec.latent_space] if v != q[spec.latent_space])
            scores = bench.score(item, _lite(q, other), judge.predict(list(bench.judge_requests(item, _lite(q, other)))))
            assert (scores["correct"], scores["latent"], scores["non_latent"]) == (0.0, 0.0, 1.0), item.key
        wrong = _drawn(concepts, extra=1) if task == "fast_count_t2i" else blank((96, 96), "white")
        verdicts = judge.predict(list(bench.judge_requests(item, wrong)))
        assert bench.score(item, wrong, verdicts)["correct"] == 0.0, (item.key, concepts)
