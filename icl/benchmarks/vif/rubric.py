"""The judge rubric (``vif-rubric-2``; docs/vif.md) and the tolerant parser of its answers.

The judge sees the original visual task (references, VI images, the task's instruction; also for
the text variants), then the generated image, and answers six integers 1..10 as one JSON object
with the fields the source's hard caps need. The wording is ours; the scale and the caps are the
public judge prompt's (shim0114/VIF-Bench prompts.py ``PROMPT_CRITERIA``):

- the calibration line ``Calibration: 4 = average, 6 = good, 8 = excellent, 10 = perfect.``;
- adherence: 1 when a subject sits in the wrong coloured box (``wrong_mapping``), at most 3 when a
  subject is clearly misplaced (``misplaced``), at most 6 when a subject leaks out of its box
  (``leaks``);
- cleanliness: exactly 4 when one complete box outline or drawn frame remains (``boxes_left`` 1),
  1 when several remain (``boxes_left`` >= 2), at most 6 when any recognisable mark remains
  (``marks_visible``).

Parsing (:func:`parse`): the last JSON object of the answer; if that fails, one repair attempt
(single quotes, trailing commas, Python literals, bare keys), and failing that the source's own
line format ``Name: <1-10>.`` (shim0114/VIF-Bench common.py). The runner has no follow-up judge
turn, so the repair is done here. A criterion that is missing, not an integer, or outside 1..10 is
NaN (counted), never clamped. The caps are applied to the judge's scores from its flags (the
source states them to the judge only; a judge that reports a leftover box and still scores 10
is held to them here).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

RUBRIC_VERSION = "vif-rubric-2"
CRITERIA = ("text_instruction_following", "reference_consistency", "visual_instruction_adherence",
            "visual_instruction_cleanliness", "scene_coherence", "visual_quality")
TITLES = {
    "text_instruction_following": "Text Instruction Following",
    "reference_consistency": "Reference Consistency",
    "visual_instruction_adherence": "Visual Instruction Adherence",
    "visual_instruction_cleanliness": "Visual Instruction Cleanliness",
    "scene_coherence": "Scene Coherence",  # the source summary leaves the sixth unnamed; PROTOCOL §5 pins it
    "visual_quality": "Visual Quality",
}
# names the source's own prompt uses (shim0114/VIF-Bench prompts.py), accepted by the line fallback
_ALIASES = {"vision instruction adherence": "visual_instruction_adherence",
            "visual instruction residue": "visual_instruction_cleanliness"}
# the source's hard caps and calibration (shim0114/VIF-Bench prompts.py PROMPT_CRITERIA)
CALIBRATION = "Calibration: 4 = average, 6 = good, 8 = excellent, 10 = perfect."
ADHERENCE_WRONG_MAPPING = 1  # "the score MUST be 1"
ADHERENCE_MISPLACED_CAP = 3  # "MUST NOT exceed 3"
ADHERENCE_LEAK_CAP = 6  # "MUST NOT exceed 6"
CLEANLINESS_MARK_CAP = 6  # "the score MUST be <= 6"
CLEANLINESS_ONE_BOX = 4  # "the score MUST be 4"
CLEANLINESS_SEVERAL_BOXES = 1  # "the score MUST be 1"

HEADER = ("You are a strict evaluator of multi-reference image generation. The generator was given the "
          "reference images and visual-instruction images below (in this order), and the instruction text. "
          "Coloured boxes in the layout image bind the subject of the reference image with the same index to "
          "that region; a pyramid gives a subject's facing (the apex is its front); an arrow runs from the "
          "source of wind or light (tail) in the direction it flows (head).")
CRITERIA_TEXT = (
    "Score the generated image on six independent criteria, each an integer from 1 (worst) to 10 (best). "
    f"{CALIBRATION}\n"
    "1. text_instruction_following: the non-spatial clauses of the instruction text are rendered.\n"
    "2. reference_consistency: every main subject keeps its reference's identity and details; a missing or "
    "replaced subject scores 1.\n"
    "3. visual_instruction_adherence: every visual instruction is satisfied (each subject tightly inside its "
    "own coloured box, facing, wind and light direction, pose). Hard caps: a subject in the wrong coloured box "
    f"(subjects swapped) scores exactly {ADHERENCE_WRONG_MAPPING}; a clearly misplaced subject (wrong region, "
    f"wrong size, relative positions unlike the layout) at most {ADHERENCE_MISPLACED_CAP}; a subject leaking "
    f"outside its box, even partly, at most {ADHERENCE_LEAK_CAP}.\n"
    "4. visual_instruction_cleanliness: no boxes, arrows, pyramids, labels or drawn frames remain (a frame the "
    "generator drew around a subject counts as a leftover box). Hard caps: any recognisable box outline, frame "
    f"or mark: at most {CLEANLINESS_MARK_CAP}; exactly one complete box outline or frame: exactly "
    f"{CLEANLINESS_ONE_BOX}; several complete ones: exactly {CLEANLINESS_SEVERAL_BOXES}.\n"
    "5. scene_coherence: one natural scene, consistent light, perspective and style; a collage or "
    "cut-and-paste composite scores at most 3.\n"
    "6. visual_quality: perceptual quality, judged on its own.\n"
    "Also report what the caps rest on: wrong_mapping (true when a subject sits in another subject's box), "
    "misplaced (true when a subject is clearly misplaced), leaks (true when a subject leaks outside its box), "
    "boxes_left (how many complete box outlines or frames remain) and marks_visible (true when any "
    "instruction mark remains).\n"
    "Answer with one JSON object and nothing else, for example:\n"
    '{"text_instruction_following": 7, "reference_consistency": 8, "visual_instruction_adherence": 5, '
    '"visual_instruction_cleanliness": 9, "scene_coherence": 7, "visual_quality": 8, '
    '"wrong_mapping": false, "misplaced": false, "leaks": true, "boxes_left": 0, "marks_visible": false}')


@dataclass(frozen=True)
class Verdict:
    scores: dict[str, float]  # criterion -> 1..10 after caps, NaN when missing or invalid
    parsed: bool  # a JSON object or the line format was found
    repaired: bool  # found only after the repair attempt or by the line fallback
    invalid: int  # criteria missing, non-integer or out of range
    capped: int  # criteria lowered by a cap

    @property
    def average(self) -> float:
        """Unweighted mean of the six; NaN unless all six are valid."""
        vals = [self.scores[c] for c in CRITERIA]
        return math.nan if any(math.isnan(v) for v in vals) else sum(vals) / len(vals)


def _objects(text: str) -> list[str]:
    """Balanced ``{...}`` spans of ``text`` (outermost), in order; strings respected."""
    out, depth, start, quote, esc = [], 0, -1, "", False
    for i, ch in enumerate(text):
        if quote:
            esc = (not esc) and ch == "\\"
            if ch == quote and not esc:
                quote = ""
            continue
        if ch in "\"'" and depth:
            quote = ch
        elif ch == "{":
            depth, start = depth + 1, start if depth else i
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
    return out


def _repair(span: str) -> str:
    s = re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", re.sub(r"\bNone\b", "null", span)))
    s = re.sub(r"'([^'\\]*)'", lambda m: json.dumps(m.group(1)), s)
    s = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_ ]*?)\s*:", lambda m: f'{m.group(1)}"{m.group(2)}":', s)
    return re.sub(r",\s*([}\]])", r"\1", s)


def _key(name: str) -> Optional[str]:
    k = re.sub(r"[\s\-]+", "_", name.strip().lower())
    if k in CRITERIA:
        return k
    return _ALIASES.get(name.strip().lower()) or next((c for c in CRITERIA if TITLES[c].lower() == name.strip().lower()), None)


def _score(v: Any) -> Optional[int]:
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*\.?\s*", v)
        if not m:
            return None
        v = float(m.group(1))
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v):
        return None
    return int(v) if 1 <= v <= 10 else None


def _from_lines(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = [*TITLES.values(), *(n.title() for n in _ALIASES)]
    for name in names:
        hits = re.findall(rf"{re.escape(name)}\**\s*:\s*\**\s*(-?\d+(?:\.\d+)?)", text, re.I)
        key = _key(name)
        if hits and key is not None:
            out[key] = hits[-1]  # the final assessment comes last
    return out


def _last_object(spans: Sequence[str], prepare: Callable[[str], str]) -> Optional[dict]:
    """The last span that loads, after ``prepare``, as a JSON object."""
    for span in reversed(spans):
        try:
            cand = json.loads(prepare(span))
        except json.JSONDecodeError:
            continue
        if isinstance(cand, dict):
            return cand
    return None


def _cap(scores: dict[str, float], key: str, limit: float, exact: bool = False) -> int:
    """Lower ``scores[key]`` to ``limit`` (set it, when ``exact``); 1 when that changed it."""
    v = scores[key]
    if math.isnan(v) or v == limit or (not exact and v < limit):
        return 0
    scores[key] = float(limit)
    return 1


def parse(text: str) -> Verdict:
    """Read a judge answer and apply the source's hard caps (see the module docstring). A flag
    counts only as the JSON ``true`` (``boxes_left``: a non-negative integer); anything else is
    read as absent."""
    text = text or ""
    spans = _objects(text)
    obj = _last_object(spans, lambda span: span)
    repaired = obj is None
    if obj is None:
        obj = _last_object(spans, _repair)
    if obj is None:
        obj = _from_lines(text)
    raw = {}
    for k, v in obj.items():
        key = _key(str(k))
        if key is not None:
            raw[key] = v
    valid = {c: _score(raw.get(c)) for c in CRITERIA}
    scores = {c: math.nan if v is None else float(v) for c, v in valid.items()}
    invalid = sum(math.isnan(v) for v in scores.values())
    capped = 0
    adh, cln = "visual_instruction_adherence", "visual_instruction_cleanliness"
    if obj.get("wrong_mapping") is True:
        capped += _cap(scores, adh, ADHERENCE_WRONG_MAPPING, exact=True)
    elif obj.get("misplaced") is True:
        capped += _cap(scores, adh, ADHERENCE_MISPLACED_CAP)
    elif obj.get("leaks") is True:
        capped += _cap(scores, adh, ADHERENCE_LEAK_CAP)
    boxes = obj.get("boxes_left")
    boxes = boxes if isinstance(boxes, int) and not isinstance(boxes, bool) and boxes >= 0 else 0
    if boxes >= 2:
        capped += _cap(scores, cln, CLEANLINESS_SEVERAL_BOXES, exact=True)
    elif boxes == 1:
        capped += _cap(scores, cln, CLEANLINESS_ONE_BOX, exact=True)
    elif obj.get("marks_visible") is True:
        capped += _cap(scores, cln, CLEANLINESS_MARK_CAP)
    return Verdict(scores, parsed=bool(raw), repaired=repaired and bool(raw), invalid=invalid, capped=capped)


def judge_prompt(references: Sequence[tuple[str, Any]], vis: Sequence[tuple[str, Any]], instruction: str,
                 output: Any) -> tuple[Any, ...]:
    """The judge's user turn: header, ``Image i`` (reference role/type, then VI type) with each image,
    the instruction, the generated image, the criteria."""
    parts: list[Any] = [HEADER]
    for i, (label, img) in enumerate([*references, *vis]):
        parts += [f"Image {i} ({label}):", img]
    parts += [f"Instruction text given to the generator:\n{instruction}", "Generated image:", output,
              CRITERIA_TEXT]
    return tuple(parts)
