"""``--check``'s context table (icl.run.planning.check_context): the (task, shots) cells it says overflow are
exactly those where the following real run records overflow, and its token counts are the run's.

Real everything: a fabricated VL-ICL release (``tests/benchmarks/vlicl/conftest.py``), tiny random
LLaVA / Idefics3 / Gemma 3 checkpoints (``icl.models.vlm.tiny``, ``tests/models/vlm/tiny_vlm.py``),
the real run and its SQLite store."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from icl.models.base import ContextOverflowError
from icl.models.requests import ChatRequest, Message
from icl.models.vlm.hf import HFVisionLanguage
from icl.run.__main__ import main
from icl.run.planning.check import CHECK_FILE
from icl.run.planning.check_context import CANDIDATES

TASKS = "clevr,operator_induction,matching_mi,textocr,open_mi"
# The tiny LLaVA's context: on the fabricated release (seeds 0-2, 15 new tokens) clevr's 8-shot
# prompts need exactly 298 tokens with their answer (they fit, by no margin); operator_induction's
# 8-shot prompts need 297-301 (some overflow, some do not); matching_mi from 4 shots and open_mi at
# 5 overflow; everything else fits. The test asserts these boundaries are there.
CONTEXT = 298


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from icl.models.vlm.tiny import build_llava
    from tests.benchmarks.vlicl.conftest import make_release

    root = tmp_path_factory.mktemp("check-context")
    return dict(release=make_release(root / "release"), llava=build_llava(root / "llava", max_positions=CONTEXT))


def _args(setup: dict, out: Path) -> list[str]:
    return ["vlicl", "--data-root", str(setup["release"]), "--models", f"hf-vlm:weights={setup['llava']}",
            "--tasks", TASKS, "--seeds", "0,1,2", "--out", str(out), "--store", str(out.parent / "store.sqlite"),
            "--device", "cpu", "--no-plots", "--no-progress"]


def test_the_check_says_overflow_for_exactly_the_cells_where_the_run_records_it(setup, tmp_path, capsys):
    from icl.benchmarks.vlicl.benchmark import VLICL
    from icl.store import Store

    out = tmp_path / "out"
    assert main(_args(setup, out) + ["--check"]) == 0  # an overflow is a recorded outcome, not a problem
    printed = capsys.readouterr().out
    report = json.loads((out / CHECK_FILE).read_text())
    cells = {(c["task"], c["shots"]): c for c in report["context"]["cells"]}
    promised = {k for k, c in cells.items() if c["status"] == "overflow"}
    assert {c["status"] for c in cells.values()} == {"fits", "overflow"}
    assert not (out / "predictions.jsonl").exists()  # the check ran nothing

    assert main(_args(setup, out)) == 0
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    per_cell: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for p in preds:
        per_cell[(p["task"], p["shots"])].append(p)
    recorded = {k for k, ps in per_cell.items() if any(p["overflow"] for p in ps)}
    assert set(cells) == set(per_cell)
    assert promised == recorded
    # the fixture has the boundaries the test is about: a cell only partly over, one that fits exactly
    assert any(0 < sum(p["overflow"] for p in per_cell[k]) < len(per_cell[k]) for k in recorded)
    clevr8 = cells[("clevr", 8)]
    assert clevr8["status"] == "fits" and clevr8["prompt_tokens"] + clevr8["max_new_tokens"] == CONTEXT

    # each overflowing cell's longest prompt is one the run refused, with the run's own count
    model_id = report["models"][0]["model_id"]
    store = Store(out.parent / "store.sqlite", readonly=True)
    try:
        answers = store.final_answers([c["request"] for c in cells.values()], model_id)
    finally:
        store.close()
    for k in recorded:
        error = answers[cells[k]["request"]].error
        assert "ContextOverflowError" in error, error
        assert int(re.search(r"prompt of (\d+) tokens", error).group(1)) == cells[k]["prompt_tokens"], (k, error)

    # "the longest" is the longest: every prompt of every cell tokenised (cells hold more than CANDIDATES)
    bench = VLICL({"data_root": str(setup["release"]), "tasks": tuple(TASKS.split(",")), "seeds": (0, 1, 2)})
    adapter = HFVisionLanguage(weights=str(setup["llava"]))
    longest: dict[tuple[str, int], int] = defaultdict(int)
    for it in bench.items():
        k = (it.group["task"], it.group["shots"])
        longest[k] = max(longest[k], adapter.prompt_length(bench.request(it)).tokens)
    assert min(c["items"] for c in cells.values()) > CANDIDATES
    assert {k: c["prompt_tokens"] for k, c in cells.items()} == dict(longest)

    # printed: the table's rows and one warning counting the overflowing cells
    for (task, shots), c in cells.items():
        assert re.search(rf"\n  {task} +{shots}  .+  {c['prompt_tokens']} +{c['max_new_tokens']} +{CONTEXT}  "
                         rf"{c['status']}\n", printed), (task, shots)
    assert f"{len(promised)} of {len(cells)} (task, shots) cells will overflow its context" in printed
    assert report["context"]["overflow"] == len(promised)
    assert "runnable (exit 0)" in printed


def _image(h: int, w: int, value: int) -> np.ndarray:
    return np.full((h, w, 3), value, np.uint8)


REQUESTS = (
    ChatRequest.user("one-image", _image(16, 16, 40), "what is the answer ?", max_new_tokens=3),
    ChatRequest("turns", (Message("user", ("count the objects", _image(24, 40, 90), "how many ?")),
                          Message("assistant", ("three",)),
                          Message("user", (_image(40, 24, 150), _image(16, 16, 200), "and here ?"))), max_new_tokens=3),
    ChatRequest.user("text-only", "the cat is red . what is the dog ?", system="you are helpful", max_new_tokens=3),
)


@pytest.mark.parametrize("family", ["llava", "idefics3", "gemma3"])
def test_the_count_without_weights_is_the_count_the_run_guards_with(family, tmp_path):
    """``prompt_length`` on an adapter that never loads its weights, against the loaded adapter's
    run-time guard in one left-padded batch: each request fits with exactly that many tokens left
    for its answer and overflows with one more, the error naming the same count."""
    from icl.models.vlm.tiny import build_llava
    from tests.models.vlm import tiny_vlm

    build = build_llava if family == "llava" else getattr(tiny_vlm, f"build_{family}")
    folder = build(tmp_path / family)
    checker = HFVisionLanguage(weights=str(folder))
    checker.check_loadable()
    lengths = [checker.prompt_length(r) for r in REQUESTS]
    assert checker.model is None  # counted from the configuration and processor only
    assert len({n.tokens for n in lengths}) == len(REQUESTS)  # the requests differ, so the counts must

    model = HFVisionLanguage(weights=str(folder), max_batch=2 * len(REQUESTS))
    model.load("cpu")
    assert {n.context for n in lengths} == {model.context}
    batch = []
    for r, n in zip(REQUESTS, lengths):
        room = n.context - n.tokens
        assert room > 1
        batch += [replace(r, id=f"{r.id}/fits", max_new_tokens=room),
                  replace(r, id=f"{r.id}/over", max_new_tokens=room + 1)]
    answers = model.predict(batch)
    for r, n, fits, over in zip(REQUESTS, lengths, answers[0::2], answers[1::2]):
        assert isinstance(fits, str), (r.id, fits)
        assert isinstance(over, ContextOverflowError) and f"prompt of {n.tokens} tokens" in str(over), (r.id, over)
        assert not n.overflows(n.context - n.tokens) and n.overflows(n.context - n.tokens + 1)


def test_a_model_that_cannot_count_is_listed_as_not_checked(fast_data, tmp_path, capsys):
    """copy-last has no tokenizer: no table, one line saying so, nothing claimed."""
    out = tmp_path / "out"
    assert main(["vlicl", "--fast", "--tasks", "clevr", "--seeds", "0", "--out", str(out), "--data-root",
                 str(fast_data), "--no-progress", "--check"]) == 0
    context = json.loads((out / CHECK_FILE).read_text())["context"]
    assert context["cells"] == [] and [n["model"] for n in context["not_checked"]] == ["copy-last"]
    printed = capsys.readouterr().out
    assert "prompt length not checked for copy-last: its adapter cannot count" in printed
    assert "longest prompt of each" not in printed


def test_a_benchmark_without_prompt_size_has_its_requests_built_and_finds_the_same_longest(setup):
    """The check's fallback (each request built and its images and text counted) against VL-ICL's
    own ``prompt_size`` (read off the episode), on the same plan and model: the same longest prompts."""
    from icl.benchmarks.vlicl.benchmark import VLICL
    from icl.run.planning.check_context import context_check
    from icl.run.planning.config import parse_models
    from icl.run.planning.models import make_model

    class Unsized(VLICL):
        def prompt_size(self, item):
            return None

    config = {"data_root": str(setup["release"]), "tasks": tuple(TASKS.split(",")), "seeds": (0, 1, 2)}
    tables = []
    for bench in (VLICL(config), Unsized(config)):
        (spec,) = parse_models(f"hf-vlm:weights={setup['llava']}")
        model = make_model(spec, "cpu", benchmark=bench.name)  # the run's own model object
        warnings: list[str] = []
        tables.append(context_check(bench, list(bench.items()), [model], warnings))
    sized, built = ({(c["task"], c["shots"]): (c["prompt_tokens"], c["status"]) for c in t["cells"]} for t in tables)
    assert sized == built and len(sized) == 25
    assert all(c["ranked"] == c["items"] for c in tables[1]["cells"])
