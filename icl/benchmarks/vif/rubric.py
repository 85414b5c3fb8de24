"""The judge rubric (``vif-rubric-3``; docs/vif.md) and the tolerant parser of its answers.

The judge sees the original visual task (references, VI images, the task's instruction; also for
the text variants), then the generated image, and answers six integers 1..10 as one JSON object
with the flags the source's hard caps rest on. The wording is ours; the scale, the two calibration
scales and every cap are the public judge prompt's (shim0114/VIF-Bench prompts.py
``PROMPT_CRITERIA``, commit 6682f269; :data:`CAPS` names the source line of each, docs/vif.md lists
them): the calibration line ``Calibration: 4 = average, 6 = good, 8 = excellent, 10 = perfect.``;
text-instruction caps 5 / 4 / 5; reference-consistency caps 6 and 1; adherence 1 / 1 / 3 / 6 and
its scale (10, 7-9, 4-6, 1-3, 1); cleanliness 6 / 4 / 1 and obvious arrows or labels at most 3,
and its scale (10, 7-9, 5-6, 4, 1-3); scene caps 3 / 5 / 3. Visual quality has none (the source:
judged on its own).

Parsing (:func:`parse`): the last JSON object of the answer; if that fails, one repair attempt
(single quotes, trailing commas, Python literals, bare keys), and failing that the source's own
line format ``Name: <1-10>.`` (shim0114/VIF-Bench common.py). The runner has no follow-up judge
turn, so the repair is done here. A criterion that is missing, not an integer, or outside 1..10 is
NaN (counted), never clamped. The caps are applied to the judge's scores from its flags (the
source states them to the judge only; a judge that reports a leftover box and still scores 10
is held to them here): of the flags raised on a criterion, an exact cap ("must be") sets the
score (the lowest, when several), then every upper cap ("at most") lowers it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

RUBRIC_VERSION = "vif-rubric-3"  # 3: every cap and calibration scale of the source (2 had adherence/residue only)
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
CALIBRATION = "Calibration: 4 = average, 6 = good, 8 = excellent, 10 = perfect."  # prompts.py line 42


@dataclass(frozen=True)
class Cap:
    """One hard cap: when the judge raises ``flag``, ``criterion`` is at most ``value`` (exactly
    ``value`` when ``exact``: the source's "MUST be"). ``source``: the line(s) of shim0114/VIF-Bench
    prompts.py (commit 6682f269) it comes from; ``means``: the flag's meaning, as the judge is told."""

    criterion: str
    flag: str
    value: int
    exact: bool
    source: str
    means: str


_TIF, _REF, _ADH, _CLN, _SCN = CRITERIA[:5]
CAPS = (
    Cap(_TIF, "clause_ignored", 5, False, "61", "a clause of the instruction text is clearly ignored or violated"),
    Cap(_TIF, "style_not_applied", 4, False, "62-63", "the style reference's attribute is clearly not applied"),
    Cap(_TIF, "extra_wrong_subject", 4, False, "62-63",
        "the extra reference, for pose, clothes or style, is applied to the wrong subject"),
    Cap(_TIF, "text_background_copied", 5, False, "64-65",
        "an instruction to take only a reference's text without its background is violated: its paper or panel "
        "is copied with the letters"),
    Cap(_REF, "subject_mismatch", 6, False, "78-79", "a subject does not match its reference in recognisable detail"),
    Cap(_REF, "subject_missing", 1, True, "79-80", "a referenced subject is missing or replaced by another"),
    Cap(_ADH, "wrong_mapping", 1, True, "104-105", "a subject sits in another subject's coloured box"),
    Cap(_ADH, "layout_ignored", 1, True, "99-101", "the layout is broadly ignored"),
    Cap(_ADH, "misplaced", 3, False, "106-108",
        "a subject is clearly misplaced: wrong region, wrong size, or relative positions unlike the layout"),
    Cap(_ADH, "leaks", 6, False, "109-110", "a subject sticks out of its box, even partly"),
    Cap(_CLN, "marks_visible", 6, False, "142-143",
        "a recognisable box outline or a frame the generator drew around a subject remains, even partial or faint"),
    Cap(_CLN, "one_box", 4, True, "144-145", "exactly one complete box outline or frame remains (boxes_left 1)"),
    Cap(_CLN, "several_boxes", 1, True, "146", "several complete box outlines or frames remain (boxes_left >= 2)"),
    Cap(_CLN, "arrows_or_labels", 3, False, "138-139",
        "arrows, labels, index numbers or other marks of the instructions are still plainly visible"),
    Cap(_SCN, "collage", 3, False, "177", "the image looks like a collage or a cut-and-paste composite"),
    Cap(_SCN, "style_mismatch", 5, False, "178-179",
        "lighting, colour or tone visibly differ between the subjects and the background"),
    Cap(_SCN, "mashup", 3, False, "180-183",
        "the subjects come from clearly different situations, even if blended smoothly"),
)
# the flags the judge reports (one_box / several_boxes are read off its boxes_left count)
FLAGS = tuple(c.flag for c in CAPS if c.flag not in ("one_box", "several_boxes"))
CAP_OF = {c.flag: c for c in CAPS}
# the caps version 2 had, by name
ADHERENCE_WRONG_MAPPING = CAP_OF["wrong_mapping"].value
ADHERENCE_MISPLACED_CAP = CAP_OF["misplaced"].value
ADHERENCE_LEAK_CAP = CAP_OF["leaks"].value
CLEANLINESS_MARK_CAP = CAP_OF["marks_visible"].value
CLEANLINESS_ONE_BOX = CAP_OF["one_box"].value
CLEANLINESS_SEVERAL_BOXES = CAP_OF["several_boxes"].value


def _caps_text(criterion: str) -> str:
    parts = [f"{c.flag} ({c.means}): {'exactly' if c.exact else 'at most'} {c.value}"
             for c in CAPS if c.criterion == criterion and c.flag not in ("one_box", "several_boxes")]
    if criterion == _CLN:
        parts += [f"boxes_left 1: exactly {CLEANLINESS_ONE_BOX}", f"boxes_left 2 or more: exactly "
                  f"{CLEANLINESS_SEVERAL_BOXES}"]
    return "Hard caps, whatever else is good: " + "; ".join(parts) + "."


HEADER = ("You are a strict evaluator of multi-reference image generation. The generator was given the "
          "reference images and visual-instruction images below (in this order), and the instruction text. "
          "Coloured boxes in the layout image bind the subject of the reference image with the same index to "
          "that region; a pyramid gives a subject's facing (the apex is its front); an arrow runs from the "
          "source of wind or light (tail) in the direction it flows (head).")
CRITERIA_TEXT = (
    "Score the generated image on six independent criteria, each an integer from 1 (worst) to 10 (best). "
    f"{CALIBRATION}\n"
    "1. text_instruction_following: every clause of the instruction text apart from the layout (style, "
    "background setting, extra pose/clothes/style reference on its target subject, other directives) is "
    f"rendered. {_caps_text(_TIF)}\n"
    "2. reference_consistency: every main subject keeps its reference's identity and details (a person's face, "
    "clothes and accessories; an animal's species and markings; an object's shape and surface; text's exact "
    f"letters and font, not its background). {_caps_text(_REF)}\n"
    "3. visual_instruction_adherence: every visual instruction is satisfied (each subject tightly inside its "
    "own coloured box, facing, wind and light direction, pose). Scale: 10 every subject fills its box tightly "
    "at the right size and none sticks out; 7-9 small deviations, nothing outside a box, nothing misplaced; "
    "4-6 a subject sticks out of its box; 1-3 a subject clearly misplaced or the wrong size; 1 a subject in "
    f"the wrong coloured box, or the layout broadly ignored. {_caps_text(_ADH)}\n"
    "4. visual_instruction_cleanliness: no boxes, arrows, pyramids, labels or drawn frames remain (a frame the "
    "generator drew around a subject counts as a leftover box). Scale: 10 fully clean; 7-9 only a faint tint "
    "or edge, no recognisable outline; 5-6 a recognisable but partial or faint outline; 4 exactly one complete "
    f"outline or frame; 1-3 several complete ones, or plainly visible arrows or labels. {_caps_text(_CLN)}\n"
    "5. scene_coherence: one natural scene, consistent light, perspective and style, subjects and background "
    f"from one plausible situation. {_caps_text(_SCN)}\n"
    "6. visual_quality: perceptual quality, judged on its own (no cap from the other scores).\n"
    "Also report what the caps rest on, each flag true or false: " + ", ".join(FLAGS)
    + "; and boxes_left (how many complete box outlines or frames remain).\n"
    "Answer with one JSON object and nothing else, for example:\n"
    '{"text_instruction_following": 7, "reference_consistency": 8, "visual_instruction_adherence": 5, '
    '"visual_instruction_cleanliness": 9, "scene_coherence": 7, "visual_quality": 8, '
    + ", ".join(f'"{f}": {"true" if f == "leaks" else "false"}' for f in FLAGS) + ', "boxes_left": 0}')


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


def raised_flags(obj: Mapping[str, Any]) -> set[str]:
    """The cap flags a judge's answer raises: a flag only as the JSON ``true``; ``one_box`` /
    ``several_boxes`` from ``boxes_left`` (a non-negative integer; anything else is absent)."""
    raised = {f for f in FLAGS if obj.get(f) is True}
    boxes = obj.get("boxes_left")
    boxes = boxes if isinstance(boxes, int) and not isinstance(boxes, bool) and boxes >= 0 else 0
    if boxes >= 2:
        raised.add("several_boxes")
    elif boxes == 1:
        raised.add("one_box")
    return raised


def apply_caps(scores: dict[str, float], raised: set[str]) -> int:
    """Apply the caps of the ``raised`` flags to ``scores`` in place (the lowest exact cap sets a
    criterion, then every upper cap lowers it); the number of criteria changed."""
    changed = 0
    for criterion in CRITERIA:
        mine = [c for c in CAPS if c.criterion == criterion and c.flag in raised]
        v = scores[criterion]
        if not mine or math.isnan(v):
            continue
        exact = [c.value for c in mine if c.exact]
        new = float(min(exact)) if exact else v
        new = min([new] + [float(c.value) for c in mine if not c.exact])
        if new != v:
            scores[criterion] = new
            changed += 1
    return changed


def parse(text: str) -> Verdict:
    """Read a judge answer and apply the source's hard caps (see the module docstring)."""
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
    capped = apply_caps(scores, raised_flags(obj))
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
