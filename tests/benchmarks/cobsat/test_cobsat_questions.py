"""Judge questions, the answer parse and scoring against ``evaluation_icl.py`` of
UW-Madison-Lee-Lab/CoBSAT (``get_eval_prompt``: option lines ``" ({i+1}){item2word(item)}"`` after
"Answer from the following options: ", closed by ". Answer the number only and do not include any
other texts (e.g., 1)."; ``eval_model``: ``''.join(filter(str.isdigit, response))``, kept when in
1..10, else -1; ``check_single_output``: textual = the x space's check, visual = theta's)."""

import numpy as np
import pytest

from icl.benchmarks.cobsat.benchmark import CoBSAT
from icl.benchmarks.cobsat.questions import chosen_option, parse_answer, question, true_option
from icl.benchmarks.cobsat.vocab import THEMES

STYLE_OPTIONS = (" (1)watercolor (2)sketch (3)pixel (4)origami (5)lego (6)icon (7)graffiti (8)futuristic "
                 "(9)wireframe (10)old")
CLOSE = ". Answer the number only and do not include any other texts (e.g., 1)."


def test_image_questions_byte_equal_to_the_reference():
    theme = THEMES["style_object"]
    assert question(theme, "attribute") == ("What is the style (of the main object) in this image? Answer from the "
                                            "following options: " + STYLE_OPTIONS + CLOSE)
    assert question(theme, "object") == ("What is the main object in this image? Answer from the following options: "
                                         " (1)leaf (2)hat (3)cup (4)chair (5)car (6)box (7)book (8)ball (9)bag "
                                         "(10)apple" + CLOSE)
    bg = question(THEMES["background_animal"], "attribute")
    assert "What is the background (of the main object)" in bg and "(5)amusement park (6)gym" in bg
    assert question(THEMES["background_animal"], "object").endswith(" (9)cat (10)bird" + CLOSE)


def test_description_questions_and_the_2047_cut():
    theme = THEMES["color_object"]
    q = question(theme, "attribute", "a red cup")
    assert q.startswith("Image caption: a red cup. What is the color (of the main object) in the image based on the "
                        "description? Answer from the following options:  (1)yellow (2)white")
    assert question(theme, "object", "a red cup").startswith(
        "Image caption: a red cup. What is the main object in this image based on the description? Answer from")
    long = question(theme, "object", "x" * 5000)
    assert len(long) == 2047 and long.startswith("Image caption: xxx")
    with pytest.raises(ValueError, match="aspect"):
        question(theme, "colour")


@pytest.mark.parametrize("answer, parsed, option", [
    ("3", 3, 3), ("10", 10, 10), (" (7)", 7, 7), ("The answer is 4.", 4, 4),
    ("1 or 2", 12, -1),  # every digit joined: a hedge is wrong
    ("2, 3", 23, -1), ("11", 11, -1), ("0", 0, -1), ("007", 7, 7),
    ("", -1, -1), ("none", -1, -1), ("red", -1, -1),
    ("²", -1, -1),  # a superscript is a digit to str.isdigit but not a number: no digit here
    ("٣", 3, 3),  # an Arabic-Indic three is a decimal digit
])
def test_every_parse_case(answer, parsed, option):
    assert parse_answer(answer) == parsed
    assert chosen_option(answer) == option


def _item(bench, task, shots=2):
    return next(i for i in bench.items() if i.group["task"] == task and i.group["shots"] == shots)


def test_both_correct_scoring_and_textual_visual():
    bench = CoBSAT({"fast": True, "prompts": 1, "tasks": "Color-I,Color-II", "shots": "2"})
    img = np.zeros((48, 48, 3), np.uint8)
    for task in ("Color-I", "Color-II"):
        item = _item(bench, task)
        truth = bench.truth(item.payload)
        p = item.payload
        colour = p.text_values[-1] if task == "Color-I" else p.latent_value
        obj = p.latent_value if task == "Color-I" else p.text_values[-1]
        assert truth == {"object": true_option("object", obj), "attribute": true_option("color", colour)}
        wrong_obj = str(truth["object"] % 10 + 1)
        both = bench.score(item, img, [str(truth["object"]), str(truth["attribute"])])
        assert both == {"overall": 1.0, "object": 1.0, "attribute": 1.0, "textual": 1.0, "visual": 1.0, "failed": 0.0}
        half = bench.score(item, img, [wrong_obj, f"It is {truth['attribute']}"])
        assert half["overall"] == 0.0 and half["object"] == 0.0 and half["attribute"] == 1.0
        # Color-I gives the colour as text (textual = attribute); Color-II gives the object
        assert (half["textual"], half["visual"]) == ((1.0, 0.0) if task == "Color-I" else (0.0, 1.0))
        hedge = bench.score(item, img, [f"{truth['object']} or 1", str(truth["attribute"])])
        assert hedge["overall"] == 0.0
        # no image, or judgements missing: a failure, wrong and counted
        for bad in (bench.score(item, "text", ["1", "1"]), bench.score(item, img, ["1"]),
                    bench.score_failure(item, "error")):
            assert bad["failed"] == 1.0 and bad["overall"] == 0.0 and set(bad) == set(both)


def test_the_judge_budget_is_the_references():
    """UW-Madison-Lee-Lab/CoBSAT (commit a787be51): ``evaluation_icl.py`` judges with
    ``from load_models.call_llava import load_llava, eval_model as infer_llava`` (the default
    ``--eval_mllm llava``), and ``load_models/call_llava.py`` ``load_llava`` sets the judge's
    generation arguments::

        "temperature": 0,
        "top_p": None,
        "num_beams": 1,
        "max_new_tokens": 512

    then reads the whole answer with ``''.join(filter(str.isdigit, response[mode]))``. A budget
    of 10 would cut a verbose answer and change what that parse reads (below: the answer cut after
    about ten tokens reads option 3, the whole answer 37, no option), so both questions ask for
    512 new tokens."""
    bench = CoBSAT({"fast": True, "prompts": 1, "tasks": "Color-I", "shots": "2"})
    item = next(iter(bench.items()))
    img = np.zeros((48, 48, 3), np.uint8)
    for req in bench.judge_requests(item, img):
        assert req.max_new_tokens == 512
    text = CoBSAT({"fast": True, "prompts": 1, "tasks": "Color-I", "shots": "2", "gen_mode": "description"})
    for req in text.judge_requests(next(iter(text.items())), "a red car"):
        assert req.max_new_tokens == 512
    verbose = "The main object in this image is option 3, a cup, though 7 could fit."
    cut = verbose[:verbose.index(",")]  # "The main object in this image is option 3"
    assert chosen_option(cut) == 3 and parse_answer(verbose) == 37 and chosen_option(verbose) == -1
