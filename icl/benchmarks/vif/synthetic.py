"""Built-in synthetic VIF tasks (``--fast`` and tests): flat coloured shapes and rendered words as
references, procedural layouts (non-overlapping cells of a 3 x 3 grid), orientations and arrows,
from ``derive_seed`` draws. Every task is a valid ``vif-task-1`` record; its reference images
live in memory (:class:`SyntheticImages`), never on disk.
"""

from __future__ import annotations

from typing import Optional

import cv2
import numpy as np

from icl.benchmarks.vif.schema import Task, parse_task
from icl.data.seeds import rng as seeded_rng

# subject colours (RGB): far (> TOLERANCE in some channel) from every box and arrow colour
SUBJECT_COLOURS = ((20, 20, 160), (200, 90, 0), (0, 110, 60), (110, 0, 60), (90, 60, 20), (0, 160, 140),
                   (220, 200, 60))
SHAPES = ("circle", "square", "triangle", "word")
BACKGROUND = (200, 200, 200)
REF_SIZE = 96
_MAINS = (1, 2, 3, 4, 2, 3, 1, 5)
ORIGIN = "synthetic"


def reference_image(shape: str, colour: tuple[int, int, int], size: int = REF_SIZE) -> np.ndarray:
    img = np.full((size, size, 3), BACKGROUND, np.uint8)
    m, c = size // 8, size // 2
    if shape == "circle":
        cv2.circle(img, (c, c), c - m, colour, -1, cv2.LINE_8)
    elif shape == "square":
        cv2.rectangle(img, (m, m), (size - m - 1, size - m - 1), colour, -1, cv2.LINE_8)
    elif shape == "triangle":
        pts = np.array([[c, m], [size - m - 1, size - m - 1], [m, size - m - 1]], np.int32)
        cv2.fillPoly(img, [pts], colour, cv2.LINE_8)
    else:  # a rendered word (a text reference)
        cv2.putText(img, "ICL", (m // 2, c + size // 8), cv2.FONT_HERSHEY_SIMPLEX, size / 48, colour, size // 12,
                    cv2.LINE_8)
    return img


def _task(i: int) -> tuple[dict, dict[str, np.ndarray]]:
    g = seeded_rng(0, "vif", "*", f"synthetic/{i}", "vif/synthetic")
    tid = f"syn{i:03d}"
    n_main = _MAINS[i % len(_MAINS)]
    cells = g.permutation(9)[:n_main]
    refs, images, layout = [], {}, []
    for j in range(n_main):
        shape = SHAPES[(i + j) % len(SHAPES)]
        colour = SUBJECT_COLOURS[(i + 2 * j) % len(SUBJECT_COLOURS)]
        file = f"synthetic/{tid}/ref{j}.png"
        refs.append({"file": file, "role": "main", "type": "text" if shape == "word" else "object"})
        images[file] = reference_image(shape, colour)
        r, c = divmod(int(cells[j]), 3)
        pad = g.uniform(0.02, 0.06, 4)
        layout.append({"ref": j, "box": [round(c / 3 + pad[0], 3), round(r / 3 + pad[1], 3),
                                         round((c + 1) / 3 - pad[2], 3), round((r + 1) / 3 - pad[3], 3)]})
    if i % 3 == 2:  # a scene-context reference (no box)
        file = f"synthetic/{tid}/scene.png"
        refs.append({"file": file, "role": "scene", "type": "background"})
        images[file] = np.tile(np.linspace(120, 240, REF_SIZE, dtype=np.uint8)[:, None, None], (1, REF_SIZE, 3))
    rec: dict = {"id": tid, "references": refs, "layout": layout,
                 "instruction": f"Compose one coherent scene with the subjects of Images 0 to {n_main - 1}, "
                                "each inside its box of the layout image."}
    if i % 2 == 1:
        rec["orientations"] = [{"ref": 0, "yaw": float(g.choice([-60, -30, 30, 60, 90])),
                                "pitch": float(g.choice([-20, 0, 20]))}]
    arrows = []
    if i % 4 in (2, 3):
        arrows.append({"kind": "wind", "start": [0.05, round(g.uniform(0.2, 0.8), 3)], "end": [0.4, 0.5]})
    if i % 4 == 3:
        arrows.append({"kind": "light", "start": [round(g.uniform(0.6, 0.95), 3), 0.05], "end": [0.5, 0.45]})
    if arrows:
        rec["arrows"] = arrows
    conflicts = {}
    if i % 4 == 1:
        conflicts["orientation"] = True
    if i % 8 == 2:
        conflicts["wind"] = True
    if conflicts:
        rec["conflicts"] = conflicts
    rec["text_subset"] = i % 2 == 0
    return rec, images


class SyntheticImages:
    """The synthetic tasks and their in-memory reference images."""

    origin = ORIGIN

    def __init__(self, n: int) -> None:
        self.tasks: list[Task] = []
        self._images: dict[str, np.ndarray] = {}
        for i in range(n):
            rec, images = _task(i)
            self.tasks.append(parse_task(rec))
            self._images.update(images)

    def reference(self, task: Task, index: int) -> np.ndarray:
        return self._images[task.references[index].file]

    def pose(self, task: Task, index: int) -> np.ndarray:
        raise ValueError(f"vif: synthetic task {task.id} has no pose images")

    def describe(self) -> str:
        return f"built-in synthetic ({len(self.tasks)} tasks: coloured shapes and words, procedural VIs)"

    def digest(self) -> Optional[str]:
        return None
