"""Judge answers: clean JSON, JSON in prose, one repair (quotes, trailing commas, Python literals,
bare keys), the source's own line format (shim0114/VIF-Bench prompts.py asks for
``Name: <1-10>.`` lines and common.py parses the last hit of each), malformed, partial and
out-of-range answers, and the caps of PROTOCOL §5."""

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


def test_caps():
    v = parse(json.dumps({**FULL, "visual_instruction_adherence": 9, "instruction_scores": [3, 8],
                          "marks_visible": True}), n_vis=2)
    assert v.scores["visual_instruction_adherence"] == 3.0 and v.scores["visual_instruction_cleanliness"] == 6.0
    assert v.capped == 2
    # below the caps: unchanged; instruction scores of the wrong length are ignored
    v = parse(json.dumps({**FULL, "visual_instruction_cleanliness": 4, "instruction_scores": [3], "marks_visible": True}),
              n_vis=2)
    assert v.scores["visual_instruction_adherence"] == 5.0 and v.scores["visual_instruction_cleanliness"] == 4.0
    assert v.capped == 0
    # marks_visible must be the JSON true, not a string
    assert parse(json.dumps({**FULL, "marks_visible": "yes"})).scores["visual_instruction_cleanliness"] == 9.0


def test_prompt_order_and_version():
    import numpy as np

    img = np.zeros((2, 2, 3), np.uint8)
    parts = judge_prompt([("reference: main, dog", img)], [("visual instruction: layout", img)], "Do it.", img)
    texts = [p for p in parts if isinstance(p, str)]
    assert texts[1:3] == ["Image 0 (reference: main, dog):", "Image 1 (visual instruction: layout):"]
    assert texts[3] == "Instruction text given to the generator:\nDo it." and texts[-1] == CRITERIA_TEXT
    assert sum(isinstance(p, np.ndarray) for p in parts) == 3 and RUBRIC_VERSION == "vif-rubric-1"
    assert all(k in CRITERIA_TEXT for k in CRITERIA)
