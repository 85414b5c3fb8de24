"""Instruction strings of the CoBSAT reference, verbatim (``configs.py``, ``instruction_dict``, of
UW-Madison-Lee-Lab/CoBSAT), and how a prompt is laid out around them (``load_dataset.py``).

Every instruction is a pair ``(before, after)``: ``before`` opens the prompt, ``after`` closes it.
Modes: ``image`` (generate the next image) and ``description`` (the reference's ``text``
generation: describe the next image). The default instructions depend on the model family.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from icl.benchmarks.cobsat.vocab import get_task

MODES = ("image", "description")
VARIANTS = ("default", "instruct", "exact", "misleading", "caption", "cot")
_GEN = {"image": "image", "description": "text"}  # our mode -> the reference's gen_mode

_DESCRIBE_ALL = ("describe the next image clearly, including details such as the main object, color, texture, "
                 "background, action, style, if applicable. ")
_DESCRIBE_QWEN = ("\nBased on the sequence, describe what the next image should be clearly, including details such "
                  "as the main object, color, texture, background, action, style, if applicable. Your response should "
                  "only contain a description of the image, and all other information can cause huge loss. ")
_DESCRIBE_LLAVA = ("\nBased on the sequence, describe the next image to be generated clearly, including details such "
                   "as the main object, color, texture, background, action, style, if applicable. ")

DEFAULT: Mapping[str, Mapping[str, tuple[str, str]]] = MappingProxyType({
    "text": MappingProxyType({
        "seed": ("I will provide you a few examples with text and image. Complete the example with the description "
                 "of next image. Tell me only the text prompt and I'll use your entire answer as a direct input to A "
                 "Dalle-3. Never say other explanations. ", ""),
        "qwen": ("", _DESCRIBE_QWEN),
        "llava": ("", _DESCRIBE_LLAVA),
        "llava16": ("", _DESCRIBE_LLAVA),
        "gpt4v": ("I will provide you with a few examples with text and images. Complete the example with the "
                  "description of the next image. The description should be clear with main object, and include "
                  "details such as color, texture, background, style, and action, if applicable. Tell me only the text "
                  "prompt and I'll use your entire answer as a direct input to A Dalle-3. Never say other "
                  "explanations. ", ""),
        "gill": ("You are a professional assistant and always answer my question directly and perfectly without any "
                 "excuses.",
                 "Based on the sequence, describe what the next image should be clearly, including details such as the "
                 "main object, color, texture, background, action, style, if applicable. Your response should only "
                 "contain a description of the image, and all other information can cause huge loss."),
        "emu": ("Based on the sequence, " + _DESCRIBE_ALL, ""),
        "emu2": ("", "Based on the sequence, " + _DESCRIBE_ALL),
        "gemini": ("", "Based on the sequence, " + _DESCRIBE_ALL),
        "claude": ("I will provide you a few examples with text and image. Complete the example with the description "
                   "of next image. Never say other explanations. ",
                   "Give me the description of the your predicted next image."),
    }),
    "image": MappingProxyType({
        "gill": ("You are a professional assistant can generate a new image based on the seqeunce. ", ""),
        "emu": ("", ""),
        "seed": ("", ""),
        "emu2": ("", ""),
    }),
})
"""``default`` (also ``exact`` and ``misleading``) instructions: reference gen_mode -> family -> pair."""

CAPTION = MappingProxyType({
    "image": "We provide a few examples, each with an input, and an output of the image description. Based on the "
             "examples, predict the next image description and visualize it. ",
    "text": "We provide a few examples, each with an input, and an output of the image description. Based on the "
            "examples, predict the next image description. ",
})

COT_FIRST = ("We provide a few examples, each of which is an input-output pair where the output is a description of the "
             "image associated with the input. Based on the examples, the task is to predict the next image "
             "description.\n\n\n",
             "\n\n\nBefore predicting the next image, let's think step by step and analyze what the relationship "
             "between the text input and image output in each example is first. \n\n\n")
COT_SECOND = MappingProxyType({
    "image": ("", "\n\n\nBased on the analysis, please generate the next image given the request "),
    "text": ("", "\n\n\nBased on the analysis, please describe what the next image should be look like given the "
                 "request "),
})

INSTRUCT = MappingProxyType({
    "image": (
        "Please identify the common main object in the images, and generate another image of this object of the "
        "requested color. ",
        "Please identify the common color in the images, and generate another image of the requested object in the same "
        "color. ",
        "Please identify the common animal in the images, and generate another image of this animal walking in the "
        "requested background. ",
        "Please identify the common background in the images, and generate another image of the requested animal "
        "walking in the same background. ",
        "Please identify the common object in the images, and generate another image of this object in the requested "
        "style. ",
        "Please identify the common style in the images, and generate another image of the requested object in the same "
        "style. ",
        "Please identify the common animal in the images, and generate another image of this animal doing the requested "
        "action. ",
        "Please identify the common action/mood the animal is doing in the images, and generate another image of the "
        "requested animal doing the same action/mood. ",
        "Please identify the common main object in the images, and generate another image of this object of the "
        "requested texture. ",
        "Please identify the common texture of the objects in the images, and generate another image of the requested "
        "object in the same texture. ",
    ),
    "text": tuple(
        f"Please identify the common {what} in the images, and describe the next image to be generated based on the "
        f"sequence below. Your description of image should contain the description of {parts}. "
        for what, parts in (
            ("main object", "the common main object and the requested color"),
            ("main color", "the requested object and the common color"),
            ("animal", "the common animal and the requested background"),
            ("background", "the requested animal and the common background"),
            ("object", "the common object and the requested style"),
            ("style", "the requested object and the common style"),
            ("animal", "the common animal and the requested action"),
            ("action/mood the animal is doing", "the requested animal and the common action/mood"),
            ("main object", "the common main object and the requested texture"),
            ("texture of the objects", "the requested object and the common texture"),
        )),
})
"""Articulated instructions, per reference gen_mode, indexed by task number - 1."""


def families(mode: str) -> tuple[str, ...]:
    """Model families with a default instruction for ``mode``."""
    return tuple(DEFAULT[_GEN[mode]])


def instruction(variant: str, mode: str, task: str, family: str) -> tuple[str, str]:
    """The ``(before, after)`` pair of the reference's ``get_instruction`` (for ``cot``: the first
    pass's pair; the second pass uses :data:`COT_SECOND`)."""
    gen = _GEN[mode]
    if variant == "instruct":
        return INSTRUCT[gen][get_task(task).number - 1], ""
    if variant == "caption":
        return CAPTION[gen], ""
    if variant == "cot":
        return COT_FIRST
    if variant in ("default", "exact", "misleading"):
        table = DEFAULT[gen]
        if family not in table:
            raise ValueError(f"cobsat: no {mode} instruction for model family {family!r}; families: "
                             f"{', '.join(table)}")
        return table[family]
    raise ValueError(f"cobsat: unknown variant {variant!r}; variants: {', '.join(VARIANTS)}")
