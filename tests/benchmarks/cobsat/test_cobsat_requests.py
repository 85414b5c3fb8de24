"""Prompt layout against ``load_dataset.py`` (``load_inputs``, ``get_instruction``, ``get_prompt``),
``inference_icl.py`` (the two-pass chain of thought) and ``configs.py`` (``instruction_dict``) of
UW-Madison-Lee-Lab/CoBSAT. The instruction strings below are copied by hand from ``configs.py``."""

import numpy as np
import pytest

from icl.benchmarks.cobsat import lite
from icl.benchmarks.cobsat.data import LiteImages
from icl.benchmarks.cobsat.instructions import instruction
from icl.benchmarks.cobsat.prompts import legacy_prompt
from icl.benchmarks.cobsat.requests import Setting, build, cot_answer_request, parts, text_inputs
from icl.models.requests import ChatRequest, GenerationRequest

QWEN_AFTER = ("\nBased on the sequence, describe what the next image should be clearly, including details such as the "
              "main object, color, texture, background, action, style, if applicable. Your response should only "
              "contain a description of the image, and all other information can cause huge loss. ")
GILL_IMAGE = "You are a professional assistant can generate a new image based on the seqeunce. "
INSTRUCT_6 = ("Please identify the common style in the images, and generate another image of the requested object in "
              "the same style. ")
INSTRUCT_TEXT_2 = ("Please identify the common main color in the images, and describe the next image to be generated "
                   "based on the sequence below. Your description of image should contain the description of the "
                   "requested object and the common color. ")
COT_AFTER = ("\n\n\nBefore predicting the next image, let's think step by step and analyze what the relationship "
             "between the text input and image output in each example is first. \n\n\n")
COT_TEXT = "\n\n\nBased on the analysis, please describe what the next image should be look like given the request "


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y), (x, y)


def test_image_prompt_is_the_reference_interleaving():
    # prompt 0, Style-I, 2 shots: texts wireframe / futuristic / icon, latent car (see test_cobsat_prompts)
    p = legacy_prompt("Style-I", 2, 0)
    img = LiteImages()
    want = ["wireframe: ", lite.draw("style_object", "3d", "car"), "futuristic: ",
            lite.draw("style_object", "futuristic", "car"), "icon: "]
    _same(parts(p, Setting("image", "default", "emu2"), img), want)
    _same(parts(p, Setting("image", "default", "gill"), img), [GILL_IMAGE] + want)
    instruct_5 = ("Please identify the common object in the images, and generate another image of this object in the "
                  "requested style. ")
    _same(parts(p, Setting("image", "instruct", "emu2"), img), [instruct_5] + want)
    req = build(p, Setting("image", "default", "emu2"), img, "k", 7, 10, 10)
    assert isinstance(req, GenerationRequest) and req.size == (lite.SIZE, lite.SIZE) and req.seed == 7


def test_instruction_strings_by_hand():
    assert instruction("instruct", "image", "Style-II", "any") == (INSTRUCT_6, "")
    assert instruction("instruct", "description", "Color-II", "any") == (INSTRUCT_TEXT_2, "")
    assert instruction("default", "description", "Color-I", "qwen") == ("", QWEN_AFTER)
    assert instruction("exact", "image", "Color-I", "gill") == (GILL_IMAGE, "")
    assert instruction("cot", "description", "Color-I", "qwen")[1] == COT_AFTER
    with pytest.raises(ValueError, match="family 'qwen'"):
        instruction("default", "image", "Color-I", "qwen")  # the reference has no qwen image generation


def test_exact_misleading_and_caption_texts():
    # Style-II prompt 0 at 2 shots: objects bag, ball, box (x 8, 7, 5); latent style theta[3] = 4 -> lego;
    # misleading prints theta[0..2] = 7, 6, 3 -> futuristic, graffiti, origami (raw, no word map)
    p = legacy_prompt("Style-II", 2, 0)
    assert text_inputs(p, "default") == ["bag: ", "ball: ", "box: "]
    assert text_inputs(p, "exact") == ["bag lego: ", "ball lego: ", "box lego: "]
    assert text_inputs(p, "misleading") == ["bag futuristic: ", "ball graffiti: ", "box origami: "]
    cap = parts(p, Setting("image", "caption", "emu2"), LiteImages())
    assert cap == ["We provide a few examples, each with an input, and an output of the image description. Based on "
                   "the examples, predict the next image description and visualize it. "
                   "bag: a bag in lego style ball: a ball in lego style box: "]


def test_description_and_two_pass_chain_of_thought():
    p = legacy_prompt("Color-II", 2, 0)
    first = build(p, Setting("description", "cot", "qwen"), LiteImages(), "k", 3, 20, 30)
    assert isinstance(first, ChatRequest) and first.max_new_tokens == 30 and len(first.images) == 2
    texts = [x for x in first.messages[0].content if isinstance(x, str)]
    assert texts[0].startswith("We provide a few examples, each of which is an input-output pair") and texts[-1] == COT_AFTER
    second = cot_answer_request(first, "they are all red", p, 20)
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[1].content == ("they are all red",)
    assert second.messages[2].content == (COT_TEXT + f"'{text_inputs(p, 'cot')[-1]}'.",)
    assert second.max_new_tokens == 20 and second.id == "k/answer"
    plain = build(p, Setting("description", "default", "qwen"), LiteImages(), "k", 3, 20, 30)
    assert plain.messages[0].content[-1] == QWEN_AFTER and plain.max_new_tokens == 20
