"""The ten VL-ICL tasks (PROTOCOL §3.1): direction, shot grid, scoring rule, capabilities, and
the task descriptions of the source (appendix B.6 and the reference code), verbatim.

Two tasks (``fast_count_t2i``, ``fast_attr_t2i``) have no description in either source: their
``detailed`` and ``concise`` levels are empty, like ``none``.
"""

from __future__ import annotations

from dataclasses import dataclass

I2T = "I2T"
T2I = "T2I"

DESCRIPTION_LEVELS = ("detailed", "concise", "none")
MANY_SHOTS = (16, 32, 64)

# Scoring rules (PROTOCOL §3.2).
EXACT = "exact"  # case-insensitive string equality of the truncated answer
FIRST_INTEGER = "first_integer"  # the first integer of the truncated answer
YES_NO = "yes_no"
JUDGE = "judge"  # text-to-image: one judge question
JUDGE_TWICE = "judge_twice"  # CoBSAT: latent and non-latent value

# The source's two-pass chain-of-thought prompt (appendix B.3).
COT_PROMPT = ("Let's first think step by step and analyze the relationship between the given "
              "few-shot question-answer pairs. Give reasoning rationales.")

# The source's judge prompt for generated images (appendix A), with the concept filled in; the
# reference code asks it for cobsat (ys-zong/VL-ICL evals/eval.py llava_judge_cobsat).
JUDGE_PROMPT = "Decide whether the image contains the following concept: {concept}. Answer with 'yes' or 'no'."
# The reference code's question for open_t2i_mi (evals/eval.py llava_judge_open_t2i_mi), which
# differs from the appendix; the reproduction follows the code (its trailing "\n" is layout of the
# LLaVA prompt, left to the judge's chat template).
JUDGE_PROMPT_OPEN_MI = "Decide whether the image contains {concept}. Answer with 'yes' or 'no'."


def judge_prompt(task: str) -> str:
    """The judge question of a text-to-image task (``{concept}`` to fill in): the reference code's
    for open_t2i_mi, the appendix's for the others."""
    return JUDGE_PROMPT_OPEN_MI if task == "open_t2i_mi" else JUDGE_PROMPT


@dataclass(frozen=True)
class TaskSpec:
    """One VL-ICL task. ``train``/``test``: sizes of the published support pool and query set.
    Its text-only version: ``text_published``, the folder the release publishes (the dataset
    ``ys-zong/VL-ICL`` on huggingface.co, tree at 6c63a33, added by commit 469851d "add text ICL
    data"; "" where the release has none), and ``text_reference``, the folder the reference code
    opens (``ys-zong/VL-ICL`` ``utils/utils.py`` ``load_text_data``); both "": no text version."""

    id: str
    title: str
    direction: str
    train: int
    test: int
    shots: tuple[int, ...]
    scoring: str
    capabilities: tuple[str, ...]
    detailed: str
    concise: str
    text_published: str = ""
    text_reference: str = ""

    def description(self, level: str) -> str:
        """The task description at ``level`` (one of ``DESCRIPTION_LEVELS``)."""
        if level not in DESCRIPTION_LEVELS:
            raise ValueError(f"task {self.id}: description level must be one of {DESCRIPTION_LEVELS}, got {level!r}")
        return "" if level == "none" else getattr(self, level)

    @property
    def text_folders(self) -> tuple[str, ...]:
        """The folders a text-only run looks for, in order: the published one, then the reference
        code's (a copy unpacked under the names the reference scripts open)."""
        return tuple(n for n in (self.text_published, self.text_reference) if n)

    @property
    def has_text(self) -> bool:
        return bool(self.text_folders)


TASKS: dict[str, TaskSpec] = {t.id: t for t in (
    TaskSpec("open_mi", "Fast Open MiniImageNet", I2T, 5000, 200, (0, 1, 2, 4, 5), EXACT,
             ("Fast Binding",),
             "Induce the concept from the in-context examples. Answer the question with a single word or phase.",
             "Answer the question with a single word or phase.",
             text_reference="open_mi_captioned"),
    TaskSpec("clevr", "CLEVR Count Induction", I2T, 800, 200, (0, 1, 2, 4, 8), EXACT,
             ("Fine Grained Perception", "Induction"),
             "The image contains objects of different shapes, colors, sizes and materials. The question describes "
             "the attribute and its value. You need to find all objects within the image that satisfy the "
             "condition. You should induce what operation to use according to the results of the in-context "
             "examples and then calculate the result.",
             "Find objects of the given type, induce what operation to use and calculate the result.",
             text_published="clevr_text", text_reference="clevr_simple_text"),
    TaskSpec("operator_induction", "Operator Induction", I2T, 80, 60, (0, 1, 2, 4, 8), FIRST_INTEGER,
             ("Induction", "Reasoning"),
             "The image contains two digit numbers and a ? representing the mathematical operator. Induce the "
             "mathematical operator (addition, multiplication, minus) according to the results of the in-context "
             "examples and calculate the result.",
             "Induce the mathematical operator and calculate the result.",
             text_published="operator_induction_text", text_reference="math_induction_text"),
    TaskSpec("operator_induction_interleaved", "Interleaved Operator Induction", I2T, 80, 60, (0, 1, 2, 4, 8),
             FIRST_INTEGER, ("Induction", "Reasoning", "Interleaving", "Long-Context"),
             "There are two input images, each representing a single digit number. Induce the mathematical "
             "operator (addition, multiplication, minus) that is applied between the two images according to the "
             "results of the in-context examples. Calculate the result for the new query images.",
             "Induce the mathematical operator between the two images and calculate the result.",
             text_published="operator_induction_interleaved_text",
             text_reference="math_induction_text_interleaved"),
    TaskSpec("textocr", "TextOCR", I2T, 800, 200, (0, 1, 2, 4, 8), EXACT,
             ("Fine Grained Perception", "Induction"),
             "An image will be provided where a red box is drawn around the text of interest. Answer with the "
             "text inside the red box. Ensure that the transcription is precise, reflecting the exact characters, "
             "including letters, numbers, symbols.",
             "Answer with the text inside the red box."),
    TaskSpec("matching_mi", "Matching MiniImageNet", I2T, 1600, 400, (0, 1, 2, 4, 5), YES_NO,
             ("Induction", "Interleaving", "Long-Context"),
             'According to the few-shot examples, induce what operation to do and determine the output for the '
             'two new images. Answer with "yes" or "no".',
             "Determine the output for the new pair of images.",
             text_reference="matching_mi_text"),
    TaskSpec("open_t2i_mi", "Text-to-Image Fast MiniImageNet", T2I, 5000, 200, (0, 1, 2, 4, 5), JUDGE,
             ("Fast Binding",),
             "Based on the few-shot examples, induce the concept and generate the image of the given class.",
             "Generate the image of the given class.",
             text_reference="open_t2i_mi_text"),
    TaskSpec("cobsat", "CoBSAT", T2I, 800, 200, (0, 1, 2, 4, 8), JUDGE_TWICE, ("Induction",),
             "Based on the sequence, infer the latent object or attribute. Generate the image of the inferred "
             "object or attribute combined with the given text.",
             "Generate the next image based on the latent object or attribute from the few-shot examples.",
             text_reference="cobsat_text"),
    TaskSpec("fast_count_t2i", "Fast Counting", T2I, 800, 40, (0, 1, 2, 4, 5), JUDGE, ("Fast Binding",), "", ""),
    TaskSpec("fast_attr_t2i", "Fast Attribute Matching", T2I, 300, 200, (0, 1, 2, 4, 5), JUDGE,
             ("Fast Binding",), "", ""),
)}

# Tasks whose shot k means k examples per class (2k support items, A/B interleaved).
PER_CLASS = frozenset({"open_mi", "open_t2i_mi", "fast_count_t2i", "fast_attr_t2i"})


def get_task(task_id: str) -> TaskSpec:
    """The spec of ``task_id``; a clear error naming the known tasks otherwise."""
    try:
        return TASKS[task_id]
    except KeyError:
        raise ValueError(f"unknown VL-ICL task {task_id!r}; tasks: {', '.join(TASKS)}") from None
