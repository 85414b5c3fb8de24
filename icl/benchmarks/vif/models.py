"""Two weight-free models of VIF-Bench, both seeing only what a real model sees (the images):

- ``collage`` (a baseline generator, reported and ranked like any generator): each reference
  pasted, resized, into its layout box, read back from the rendered layout image
  (:func:`~icl.benchmarks.vif.spatial.decode_layout`); with no layout image (the text variants)
  the references side by side in equal columns. It shows what each criterion rewards: exact
  placement and clean output from a cut-and-paste that a VLM judge must mark down on coherence.
- ``vif-spatial-judge`` (a deterministic judge of the synthetic tasks only): measures where each
  subject landed against the layout image (adherence ``1 + 9 * IoU``), whether the subjects are
  there at all (reference consistency ``1 + 9 * found``), and VI box colours left in the output
  (cleanliness 10 / 4 / 1 for none / one / several, the source's caps); it answers ``null`` for the
  three criteria it cannot see (text, coherence, quality). It refuses release data.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import cv2
import numpy as np

from icl.benchmarks.vif.spatial import decode_layout, marks_left, placement
from icl.models.base import Adapter
from icl.models.builtin import BuiltinDataJudge
from icl.models.requests import ChatRequest, GenerationRequest

SYNTHETIC_PREFIX = "vif-synthetic/"
COLLAGE_BACKGROUND = 128
OUTPUT_SIZE = (1024, 1024)  # PROTOCOL §5: one 1024 x 1024 image


def _split(images: Sequence[np.ndarray]) -> tuple[list[np.ndarray], dict[int, tuple[float, float, float, float]]]:
    """References (the images before the first layout image) and the decoded layout boxes."""
    for i, img in enumerate(images):
        boxes = decode_layout(img)
        if boxes:
            return list(images[:i]), boxes
    return list(images), {}


def collage(req: GenerationRequest) -> np.ndarray:
    h, w = req.size or OUTPUT_SIZE
    out = np.full((h, w, 3), COLLAGE_BACKGROUND, np.uint8)
    refs, boxes = _split(req.images)
    if not boxes and refs:
        boxes = {i: (i / len(refs), 0.25, (i + 1) / len(refs), 0.75) for i in range(len(refs))}
    for ref, (x0, y0, x1, y1) in sorted(boxes.items()):
        if ref >= len(refs):
            continue
        px0, py0 = int(round(x0 * w)), int(round(y0 * h))
        px1, py1 = max(px0 + 1, int(round(x1 * w))), max(py0 + 1, int(round(y1 * h)))
        out[py0:py1, px0:px1] = cv2.resize(refs[ref], (px1 - px0, py1 - py0), interpolation=cv2.INTER_NEAREST)
    return out


class Collage(Adapter):
    """References pasted at their layout boxes (see the module docstring)."""

    name = "collage"
    version = "1"
    serves = (GenerationRequest,)
    batch_size = 16

    def predict(self, requests: Sequence[GenerationRequest]) -> list[np.ndarray]:
        return [collage(r) for r in requests]


def spatial_answer(req: ChatRequest) -> str:
    """The deterministic judge's JSON answer (see the module docstring)."""
    images = req.images
    if len(images) < 2:
        return "no images to judge"
    out, task_images = images[-1], images[:-1]
    refs, boxes = _split(task_images)
    if not boxes:
        return "no layout image in the task"
    p = placement(out, refs, boxes)
    marks = marks_left(out)
    answer: dict[str, Any] = {
        "text_instruction_following": None,
        "reference_consistency": int(round(1 + 9 * p.found)),
        "visual_instruction_adherence": int(round(1 + 9 * p.iou)),
        "visual_instruction_cleanliness": 10 if marks == 0 else (4 if marks == 1 else 1),
        "scene_coherence": None,
        "visual_quality": None,
        "boxes_left": marks,
        "marks_visible": marks > 0,
    }
    return json.dumps(answer)


class SpatialJudge(BuiltinDataJudge):
    """Judges the synthetic tasks' placement and cleanliness (see the module docstring)."""

    name = "vif-spatial-judge"
    version = "1"
    batch_size = 32
    prefix = SYNTHETIC_PREFIX
    data = "the built-in synthetic tasks"

    def answer(self, request: ChatRequest) -> str:
        return spatial_answer(request)
