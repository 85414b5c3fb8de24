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
    assert "wrong_mapping (a subject sits in another subject's coloured box): exactly 1" in CRITERIA_TEXT
    assert "layout): at most 3; leaks (a subject sticks out of its box, even partly): at most 6." in CRITERIA_TEXT
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
    assert "even partial or faint): at most 6" in CRITERIA_TEXT
    assert "boxes_left 1: exactly 4; boxes_left 2 or more: exactly 1." in CRITERIA_TEXT
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
    assert sum(isinstance(p, np.ndarray) for p in parts) == 3 and RUBRIC_VERSION == "vif-rubric-3"
    assert all(k in CRITERIA_TEXT for k in CRITERIA)


# The rest of the public prompt's caps and its two calibration scales (prompts.py, commit 6682f269),
# quoted by line number: criterion 1 (61-65), criterion 2 (78-80), criterion 3's scale (89-101),
# criterion 4's scale (129-139), criterion 5 (176-183).
REFERENCE_LINES = {
    "61": "If a clause is clearly ignored or violated, the score MUST NOT exceed 5.",
    "62-63": "If the STYLE attribute word is clearly not applied, or if the EXTRA is\n"
             "applied to the wrong subject, the score MUST NOT exceed 4.",
    "64-65": "If \"only the text without its background\" is violated (the reference\n"
             "paper / panel was copied along with the glyphs), the score MUST NOT exceed 5.",
    "78-79": "If any one subject fails to match the reference in recognizable detail,\nthe score MUST NOT exceed 6.",
    "79-80": "If a referenced subject is missing or\nreplaced with a different subject, the score MUST be 1.",
    "99-101": "  1   : any color->subject mapping is wrong (a subject sits in the wrong\n"
              "        colored box, i.e. subjects are swapped), or the spatial layout\n        is broadly ignored.",
    "104-105": "  - If a subject sits in the WRONG colored box (wrong color->subject\n    mapping), the score MUST be 1.",
    "106-108": "  - If any subject is CLEARLY misplaced (wrong region, wrong size, or\n    relative positions disagree "
               "with the layout), the score MUST NOT\n    exceed 3.",
    "109-110": "  - If any subject visibly PROTRUDES / LEAKS outside its assigned box\n    (even partially), the score "
               "MUST NOT exceed 6.",
    "138-139": "  1-3 : MULTIPLE complete box outlines / frames remain, or obvious\n"
               "        arrows / labels / markings are still clearly visible.",
    "142-143": "  - If ANY visually recognizable box outline OR model-drawn subject frame\n    is present, the score MUST "
               "be <= 6.",
    "144-145": "  - If exactly ONE complete box outline / frame is fully preserved or\n    drawn, the score MUST be 4.",
    "146": "  - If MULTIPLE complete box outlines / frames remain, the score MUST be 1.",
    "177": "  - Collage or obvious cut-and-paste appearance MUST score <= 3.",
    "178-179": "  - Any visible stylistic mismatch (lighting / color / tone) between\n"
               "    subjects and background caps the score at 5.",
    "180-183": "  - If the scene LOOKS smoothly rendered but is actually a semantically\n    incoherent mash-up (different "
               "subjects come from clearly different\n    situations / contexts, even if the pixels blend) the score "
               "MUST NOT\n    exceed 3.",
}


def _source_number(quote):
    import re

    # a "MUST" sentence's number, else a calibration row's highest score ("  1   :", "  1-3 :")
    found = re.findall(r"(?:MUST be(?: <=)?|MUST NOT\s+exceed|MUST score <=|caps the score at)\s+(\d+)"
                       r"|^\s+(?:\d+-)?(\d+)\s+:", quote, re.M)
    return [int(a or b) for a, b in found][-1]


def test_every_cap_is_the_sources_number_at_its_line():
    """Each cap of the rubric names the prompts.py line(s) it comes from (docs/vif.md lists them);
    its number is the number the source gives there, "exactly" where the source says "MUST be"."""
    from icl.benchmarks.vif.rubric import CAPS

    assert {c.source for c in CAPS} == set(REFERENCE_LINES)
    for c in CAPS:
        quote = REFERENCE_LINES[c.source]
        assert c.value == _source_number(quote), c
        if "MUST be 1" in quote or "MUST be 4" in quote:
            assert c.exact, c
    by = {c.flag: (c.criterion, c.value, c.exact) for c in CAPS}
    assert by == {
        "clause_ignored": ("text_instruction_following", 5, False),
        "style_not_applied": ("text_instruction_following", 4, False),
        "extra_wrong_subject": ("text_instruction_following", 4, False),
        "text_background_copied": ("text_instruction_following", 5, False),
        "subject_mismatch": ("reference_consistency", 6, False),
        "subject_missing": ("reference_consistency", 1, True),
        "wrong_mapping": ("visual_instruction_adherence", 1, True),
        "layout_ignored": ("visual_instruction_adherence", 1, True),
        "misplaced": ("visual_instruction_adherence", 3, False),
        "leaks": ("visual_instruction_adherence", 6, False),
        "marks_visible": ("visual_instruction_cleanliness", 6, False),
        "one_box": ("visual_instruction_cleanliness", 4, True),
        "several_boxes": ("visual_instruction_cleanliness", 1, True),
        "arrows_or_labels": ("visual_instruction_cleanliness", 3, False),
        "collage": ("scene_coherence", 3, False),
        "style_mismatch": ("scene_coherence", 5, False),
        "mashup": ("scene_coherence", 3, False),
    }


def test_the_judge_is_told_every_cap_and_both_scales():
    from icl.benchmarks.vif.rubric import CAPS, FLAGS

    for c in CAPS:
        if c.flag in FLAGS:
            assert f"{c.flag} ({c.means}): {'exactly' if c.exact else 'at most'} {c.value}" in CRITERIA_TEXT
            assert f'"{c.flag}": ' in CRITERIA_TEXT  # in the answer's example
    # adherence scale (prompts.py 89-101) and residue scale (129-139), same numbers
    assert ("Scale: 10 every subject fills its box tightly at the right size and none sticks out; 7-9 small "
            "deviations, nothing outside a box, nothing misplaced; 4-6 a subject sticks out of its box; 1-3 a subject "
            "clearly misplaced or the wrong size; 1 a subject in the wrong coloured box, or the layout broadly "
            "ignored.") in CRITERIA_TEXT
    assert ("Scale: 10 fully clean; 7-9 only a faint tint or edge, no recognisable outline; 5-6 a recognisable but "
            "partial or faint outline; 4 exactly one complete outline or frame; 1-3 several complete ones, or plainly "
            "visible arrows or labels.") in CRITERIA_TEXT
    assert "visual_quality: perceptual quality, judged on its own (no cap" in CRITERIA_TEXT


@pytest.mark.parametrize("criterion, flags, given, want", [
    ("text_instruction_following", {"clause_ignored": True}, 9, 5.0),
    ("text_instruction_following", {"style_not_applied": True}, 9, 4.0),
    ("text_instruction_following", {"extra_wrong_subject": True}, 9, 4.0),
    ("text_instruction_following", {"text_background_copied": True}, 9, 5.0),
    ("text_instruction_following", {"clause_ignored": True, "style_not_applied": True}, 9, 4.0),
    ("text_instruction_following", {"clause_ignored": True}, 3, 3.0),
    ("reference_consistency", {"subject_mismatch": True}, 9, 6.0),
    ("reference_consistency", {"subject_missing": True}, 9, 1.0),
    ("reference_consistency", {"subject_missing": True, "subject_mismatch": True}, 5, 1.0),
    ("visual_instruction_adherence", {"layout_ignored": True}, 7, 1.0),
    ("visual_instruction_cleanliness", {"arrows_or_labels": True}, 9, 3.0),
    ("visual_instruction_cleanliness", {"arrows_or_labels": True, "boxes_left": 1}, 9, 3.0),
    ("visual_instruction_cleanliness", {"arrows_or_labels": True, "marks_visible": True}, 9, 3.0),
    ("scene_coherence", {"collage": True}, 9, 3.0),
    ("scene_coherence", {"style_mismatch": True}, 9, 5.0),
    ("scene_coherence", {"mashup": True}, 9, 3.0),
    ("scene_coherence", {"style_mismatch": True, "mashup": True}, 9, 3.0),
    ("scene_coherence", {"collage": "true"}, 9, 9.0),  # only the JSON true counts
    ("visual_quality", {k: True for k in ("collage", "leaks", "clause_ignored")}, 9, 9.0),  # never capped
])
def test_the_parser_applies_each_flags_cap(criterion, flags, given, want):
    v = parse(json.dumps({**{c: 9 for c in CRITERIA}, criterion: given, **flags}))
    assert v.scores[criterion] == want
    others = {c for c in CRITERIA if c != criterion}
    assert v.capped == (want != given) + sum(v.scores[c] != 9.0 for c in others)
