"""Judge answers: clean JSON, JSON in prose, one repair (quotes, trailing commas, Python literals,
bare keys), the source's own line format (shim0114/VIF-Bench prompts.py asks for
``Name: <1-10>.`` lines and common.py parses the last hit of each), malformed, partial and
out-of-range answers, and the hard caps and calibration of the public judge prompt
(shim0114/VIF-Bench prompts.py, quoted below)."""

import json
import math

import pytest

from icl.benchmarks.vif.rubric import CRITERIA, CRITERIA_TEXT, RUBRIC_VERSION, judge_prompt, parse

FULL = {"text_instruction_following": 7, "reference_consistency": 8, "visual_instruction_adherence": 5,
        "visual_instruction_cleanliness": 9, "scene_coherence": 6, "visual_quality": 8}


def _nan(v):
    return isinstance(v, float) and math.isnan(v)


def test_clean_json():
    v = parse(json.dumps(FULL))
    assert v.parsed and not v.repaired and v.invalid == 0 and v.capped == 0
    assert v.scores == {k: float(x) for k, x in FULL.items()} and v.average == pytest.approx(43 / 6)


def test_json_inside_prose_takes_the_last_object():
    text = f"Reasoning: the box {{0}} is fine.\n```json\n{json.dumps({**FULL, 'visual_quality': 2})}\n```\n" \
           f"Final: {json.dumps(FULL)}"
    v = parse(text)
    assert v.parsed and not v.repaired and v.scores["visual_quality"] == 8.0


def test_one_repair():
    text = ("{'text_instruction_following': 7, reference_consistency: 8, 'visual_instruction_adherence': '5', "
            "'visual_instruction_cleanliness': 9, 'scene_coherence': 6, 'visual_quality': '8/10', "
            "'marks_visible': False,}")
    v = parse(text)
    assert v.parsed and v.repaired and v.invalid == 0 and v.average == pytest.approx(43 / 6)


def test_the_sources_line_format():
    text = ("Reasoning: Image 0 sits in its box.\nText Instruction Following: 7.\nReference Consistency: 8.\n"
            "Vision Instruction Adherence: 5.\nVisual Instruction Residue: 9.\nScene Coherence: 6.\n"
            "Visual Quality: **8**.")
    v = parse(text)
    assert v.parsed and v.repaired and v.scores == {k: float(x) for k, x in FULL.items()}


@pytest.mark.parametrize("text", ["", "I cannot judge this image.", "{\"score\": 7}", "{unbalanced: 7", "[1, 2, 3]"])
def test_malformed(text):
    v = parse(text)
    assert not v.parsed and v.invalid == 6 and all(_nan(s) for s in v.scores.values()) and _nan(v.average)


def test_partial_answer_keeps_what_it_has():
    part = {k: FULL[k] for k in CRITERIA[:4]}
    v = parse(json.dumps(part))
    assert v.parsed and v.invalid == 2 and v.scores["reference_consistency"] == 8.0
    assert _nan(v.scores["scene_coherence"]) and _nan(v.scores["visual_quality"]) and _nan(v.average)


@pytest.mark.parametrize("bad", [0, 11, -3, 7.5, "high", True, None, "12/10"])
def test_out_of_range_or_non_integer_is_nan_not_clamped(bad):
    v = parse(json.dumps({**FULL, "visual_quality": bad}))
    assert _nan(v.scores["visual_quality"]) and v.invalid == 1 and v.scores["scene_coherence"] == 6.0


def test_integral_floats_are_accepted():
    assert parse(json.dumps({**FULL, "visual_quality": 8.0})).scores["visual_quality"] == 8.0


# The public judge prompt, shim0114/VIF-Bench prompts.py (commit 6682f269), PROMPT_CRITERIA, quoted:
REFERENCE_CALIBRATION = "scale. Calibration: 4 = average, 6 = good, 8 = excellent, 10 = perfect."
REFERENCE_ADHERENCE = """\
Hard caps (STRICT — apply even if other aspects look good):
  - If a subject sits in the WRONG colored box (wrong color->subject
    mapping), the score MUST be 1.
  - If any subject is CLEARLY misplaced (wrong region, wrong size, or
    relative positions disagree with the layout), the score MUST NOT
    exceed 3.
  - If any subject visibly PROTRUDES / LEAKS outside its assigned box
    (even partially), the score MUST NOT exceed 6."""
REFERENCE_CLEANLINESS = """\
Hard caps (STRICT — apply even if other aspects look good):
  - If ANY visually recognizable box outline OR model-drawn subject frame
    is present, the score MUST be <= 6.
  - If exactly ONE complete box outline / frame is fully preserved or
    drawn, the score MUST be 4.
  - If MULTIPLE complete box outlines / frames remain, the score MUST be 1."""


def _numbers(quote):
    import re

    return [int(n) for n in re.findall(r"(?:MUST be(?: <=)?|MUST NOT\s+exceed)\s+(\d+)", quote)]


def test_calibration_line_is_the_references():
    """shim0114/VIF-Bench prompts.py, PROMPT_CRITERIA: ``Evaluate the generated image on SIX
    independent criteria, each on a 1-10 / scale. Calibration: 4 = average, 6 = good, 8 =
    excellent, 10 = perfect.`` Our rubric carries the same calibration sentence."""
    from icl.benchmarks.vif.rubric import CALIBRATION

    assert REFERENCE_CALIBRATION.endswith(CALIBRATION) and CALIBRATION in CRITERIA_TEXT


def test_adherence_caps_are_the_references():
    """shim0114/VIF-Bench prompts.py, criterion 3 (Vision Instruction Adherence), hard caps:
    wrong colour->subject mapping ``MUST be 1``; clearly misplaced ``MUST NOT exceed 3``; leaking
    outside its box ``MUST NOT exceed 6`` (quoted in REFERENCE_ADHERENCE). The prompt states them
    and the parser applies them from the judge's flags."""
    from icl.benchmarks.vif import rubric

    assert _numbers(REFERENCE_ADHERENCE) == [1, 3, 6]
    assert (rubric.ADHERENCE_WRONG_MAPPING, rubric.ADHERENCE_MISPLACED_CAP, rubric.ADHERENCE_LEAK_CAP) == (1, 3, 6)
    assert "scores exactly 1" in CRITERIA_TEXT and "at most 3" in CRITERIA_TEXT and "at most 6" in CRITERIA_TEXT
    hi = {**FULL, "visual_instruction_adherence": 9}
    for flags, want in (({"wrong_mapping": True}, 1.0), ({"misplaced": True}, 3.0), ({"leaks": True}, 6.0),
                        ({"misplaced": True, "leaks": True}, 3.0), ({"wrong_mapping": True, "leaks": True}, 1.0),
                        ({}, 9.0), ({"leaks": "yes"}, 9.0)):
        v = parse(json.dumps({**hi, **flags}))
        assert v.scores["visual_instruction_adherence"] == want, flags
        assert v.capped == (want != 9.0)
    # below a cap: unchanged
    assert parse(json.dumps({**FULL, "visual_instruction_adherence": 2, "misplaced": True})).capped == 0


def test_cleanliness_caps_are_the_references():
    """shim0114/VIF-Bench prompts.py, criterion 4 (Visual Instruction Residue, reported as
    cleanliness), hard caps: any recognisable box or drawn frame ``MUST be <= 6``; exactly one
    complete box/frame ``MUST be 4``; several ``MUST be 1`` (quoted in REFERENCE_CLEANLINESS).
    "MUST be" is exact: a judge's 2 with one box left is read as 4."""
    from icl.benchmarks.vif import rubric

    assert _numbers(REFERENCE_CLEANLINESS) == [6, 4, 1]
    assert (rubric.CLEANLINESS_MARK_CAP, rubric.CLEANLINESS_ONE_BOX, rubric.CLEANLINESS_SEVERAL_BOXES) == (6, 4, 1)
    assert "at most 6; exactly one complete box outline or frame: exactly 4; several complete ones: exactly 1" \
        in CRITERIA_TEXT
    for flags, given, want in (({"marks_visible": True}, 9, 6.0), ({"marks_visible": True}, 5, 5.0),
                               ({"boxes_left": 1, "marks_visible": True}, 9, 4.0), ({"boxes_left": 1}, 2, 4.0),
                               ({"boxes_left": 3}, 9, 1.0), ({"boxes_left": 0}, 9, 9.0),
                               ({"boxes_left": True}, 9, 9.0), ({"marks_visible": "yes"}, 9, 9.0)):
        v = parse(json.dumps({**FULL, "visual_instruction_cleanliness": given, **flags}))
        assert v.scores["visual_instruction_cleanliness"] == want, flags
        assert v.capped == (want != given)


def test_no_worst_instruction_cap():
    """The reference has no cap at the worst instruction's score (prompts.py lists only the three
    adherence caps above); an ``instruction_scores`` field is ignored."""
    v = parse(json.dumps({**FULL, "visual_instruction_adherence": 9, "instruction_scores": [3, 8]}))
    assert v.scores["visual_instruction_adherence"] == 9.0 and v.capped == 0


def test_prompt_order_and_version():
    import numpy as np

    img = np.zeros((2, 2, 3), np.uint8)
    parts = judge_prompt([("reference: main, dog", img)], [("visual instruction: layout", img)], "Do it.", img)
    texts = [p for p in parts if isinstance(p, str)]
    assert texts[1:3] == ["Image 0 (reference: main, dog):", "Image 1 (visual instruction: layout):"]
    assert texts[3] == "Instruction text given to the generator:\nDo it." and texts[-1] == CRITERIA_TEXT
    assert sum(isinstance(p, np.ndarray) for p in parts) == 3 and RUBRIC_VERSION == "vif-rubric-2"
    assert all(k in CRITERIA_TEXT for k in CRITERIA)
