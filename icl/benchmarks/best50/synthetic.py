"""A small synthetic best50 package in the published format (for tests and ``--fast``).

The layout and field types are the package README's: ``inputs/inputs_k{K}.jsonl``,
``support_images/K{K}/<class>/<support_stem>__K{K}.png``, ``query_images/<class>/<stem>.png``;
``support_boxes_tokens`` one string of K concatenated token boxes, ``query_gt_boxes_tokens`` a
list of one token string per GT box. Images are PNG (not the published JPEG) so that the red
marks are exact, and sizes vary (the published images are all 1024 x 1024) so that grid-to-pixel
scaling is exercised. ``sample_id`` is ``<class>_<index>`` (the same id at every K).

Each class is a drawn shape. For every class and query index there is one query image (1-3
instances of the class among 0-3 distractors of other classes) and, for every K, one support
image with K instances of the class marked by red boxes. Objects sit in distinct cells of a
32-pixel grid, so they never overlap. Every random choice comes from
``icl.data.seeds.rng(seed, "best50-synthetic", "*", "<class>/<index>", purpose)``: the package
is identical byte for byte for the same arguments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from icl.benchmarks.best50.parse import format_box, format_boxes, pixels_to_grid
from icl.data.seeds import ANY, rng as seeded_rng

DEFAULT_CLASSES = ("circle", "square", "triangle", "cross", "ring", "diamond", "ellipse", "square_cage")
KS = (1, 2, 4, 8)
PROMPT_TEMPLATE = (
    "The first image shows {k} example(s) of one object category, each marked with a red box. "
    "Find every object of this category in the second image. Answer with one "
    "<bbox_start><xA><yB><xC><yD><bbox_end> per object, coordinates on a 0-1024 grid."
)
_CELL = 32
_COLOURS = ((40, 90, 200), (30, 150, 60), (60, 60, 60), (130, 60, 160), (20, 140, 160), (200, 150, 30))
_RED = (255, 0, 0)


def _rng(seed: int, cls: str, index: int, purpose: str) -> np.random.Generator:
    return seeded_rng(seed, "best50-synthetic", ANY, f"{cls}/{index}", purpose)


def _draw(img: np.ndarray, shape: str, box: tuple[int, int, int, int], colour: tuple[int, int, int]) -> None:
    import cv2

    x0, y0, x1, y1 = box
    # cv2 draws inclusive pixel coordinates; box is [x0, x1) x [y0, y1).
    r, cx, cy = (x1 - x0 - 1) / 2, (x0 + x1 - 1) // 2, (y0 + y1 - 1) // 2
    xe, ye = x1 - 1, y1 - 1
    if shape == "circle":
        cv2.circle(img, (cx, cy), int(r), colour, -1)
    elif shape == "square":
        cv2.rectangle(img, (x0, y0), (xe, ye), colour, -1)
    elif shape == "triangle":
        cv2.fillPoly(img, [np.array([(cx, y0), (x0, ye), (xe, ye)], np.int32)], colour)
    elif shape == "cross":
        t = max(2, (x1 - x0) // 4)
        cv2.rectangle(img, (cx - t // 2, y0), (cx + t // 2, ye), colour, -1)
        cv2.rectangle(img, (x0, cy - t // 2), (xe, cy + t // 2), colour, -1)
    elif shape == "ring":
        cv2.circle(img, (cx, cy), int(r) - 1, colour, 3)
    elif shape == "diamond":
        cv2.fillPoly(img, [np.array([(cx, y0), (xe, cy), (cx, ye), (x0, cy)], np.int32)], colour)
    elif shape == "ellipse":
        cv2.ellipse(img, (cx, cy), (int(r), max(2, int(r) // 2)), 0, 0, 360, colour, -1)
    elif shape == "square_cage":
        cv2.rectangle(img, (x0, y0), (xe, ye), colour, 2)
        cv2.line(img, (cx, y0), (cx, ye), colour, 1)
        cv2.line(img, (x0, cy), (xe, cy), colour, 1)
    else:  # any other class name: a filled rounded blob, so custom class lists still work
        cv2.ellipse(img, (cx, cy), (int(r), int(r)), 0, 0, 360, colour, -1)


def _scene(rng: np.random.Generator, shapes: list[str], size: tuple[int, int]) -> tuple[np.ndarray, list]:
    """Draw ``shapes`` in distinct grid cells of a ``size = (w, h)`` image; return RGB and boxes."""
    w, h = size
    img = np.clip(rng.normal(232.0, 6.0, size=(h, w, 3)), 0, 255).astype(np.uint8)
    cols, rows = w // _CELL, h // _CELL
    cells = rng.permutation(cols * rows)[: len(shapes)]
    boxes = []
    for shape, cell in zip(shapes, cells.tolist()):
        s = int(rng.integers(14, _CELL - 3))
        x0 = (cell % cols) * _CELL + int(rng.integers(1, _CELL - s))
        y0 = (cell // cols) * _CELL + int(rng.integers(1, _CELL - s))
        box = (x0, y0, x0 + s, y0 + s)
        _draw(img, shape, box, _COLOURS[int(rng.integers(len(_COLOURS)))])
        boxes.append(box)
    return img, boxes


def _shapes(rng: np.random.Generator, cls: str, count: int, classes: Sequence[str]) -> list[str]:
    others = [c for c in classes if c != cls] or [cls]
    distractors = [others[int(i)] for i in rng.integers(len(others), size=int(rng.integers(0, 4)))]
    return [cls] * count + distractors


def _write(path: Path, rgb: np.ndarray) -> None:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)):
        raise OSError(f"cannot write {path}")


def write_package(root: str | Path, n_per_class: int = 4, classes: Sequence[str] = DEFAULT_CLASSES,
                  seed: int = 0, ks: Sequence[int] = KS) -> Path:
    """Write ``root/inputs/inputs_k{K}.jsonl``, ``root/support_images/...`` and
    ``root/query_images/...``; return ``root``.

    ``n_per_class`` queries per class and K; K up to 8 (support images hold K instances).
    """
    import cv2

    if n_per_class < 1 or not classes or len(set(classes)) != len(classes):
        raise ValueError("write_package: need n_per_class >= 1 and distinct, non-empty classes")
    if any(k < 1 or k > 8 for k in ks):
        raise ValueError(f"write_package: K must lie in 1..8, got {list(ks)}")
    root = Path(root)
    lines: dict[int, list[str]] = {k: [] for k in ks}
    for cls in classes:
        for i in range(n_per_class):
            stem = f"{cls}_{i:03d}"
            rng = _rng(seed, cls, i, "query")
            q_size = (int(rng.integers(5, 8)) * _CELL, int(rng.integers(4, 6)) * _CELL)
            shapes = _shapes(rng, cls, int(rng.integers(1, 4)), classes)
            q_img, q_boxes = _scene(rng, shapes, q_size)
            gt = [b for b, s in zip(q_boxes, shapes) if s == cls]
            query_rel = f"query_images/{cls}/{stem}.png"
            _write(root / query_rel, q_img)
            for k in ks:
                rng = _rng(seed, cls, i, f"support_k{k}")
                s_size = (int(rng.integers(6, 9)) * _CELL, int(rng.integers(4, 6)) * _CELL)
                shapes = _shapes(rng, cls, k, classes)
                s_img, s_boxes = _scene(rng, shapes, s_size)
                marked = s_boxes[:k]
                for x0, y0, x1, y1 in marked:
                    cv2.rectangle(s_img, (max(0, x0 - 2), max(0, y0 - 2)),
                                  (min(s_size[0] - 1, x1 + 1), min(s_size[1] - 1, y1 + 1)), _RED, 1)
                support_stem = f"{stem}_k{k}"
                support_rel = f"support_images/K{k}/{cls}/{support_stem}__K{k}.png"
                _write(root / support_rel, s_img)
                record = {
                    "sample_id": stem, "class": cls, "k": k,
                    "prompt": PROMPT_TEMPLATE.replace("{k}", str(k)), "prompt_template": PROMPT_TEMPLATE,
                    "support_image": support_rel, "support_image_size": list(s_size),
                    "support_boxes_pixel": [list(b) for b in marked],
                    "support_boxes_tokens": format_boxes(pixels_to_grid(marked, s_size)),
                    "query_image": query_rel, "query_image_size": list(q_size),
                    "query_gt_boxes_pixel": [list(b) for b in gt],
                    "query_gt_boxes_tokens": [format_box(g) for g in pixels_to_grid(gt, q_size)],
                    "support_stem": support_stem,
                }
                lines[k].append(json.dumps(record))
    (root / "inputs").mkdir(parents=True, exist_ok=True)
    for k, rows in lines.items():
        (root / "inputs" / f"inputs_k{k}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root
