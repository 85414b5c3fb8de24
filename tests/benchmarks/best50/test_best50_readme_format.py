"""A package written exactly as the published README describes loads, and scores equal to an
independent computation of the README's metrics (written here from their definitions)."""

import json

import cv2
import numpy as np
import pytest

from icl.benchmarks.best50.package import load_package
from icl.benchmarks.best50.predictions import load_predictions
from icl.benchmarks.best50.score import THRESHOLDS, score_records

TEMPLATE_A = ("Please detect all objects belonging to the same category as the boxes [{boxes}] in the second "
              "image. The boxes are marked in the first image.")
TEMPLATE_B = ("The first image shows reference objects marked by red boxes at [{boxes}]. Please detect all "
              "objects of the same category in the second image.")


def _tok(box):
    # the README's grid equals pixels for its 1024 x 1024 images
    return "<bbox_start><x{}><y{}><x{}><y{}><bbox_end>".format(*box)


def _write_readme_package(root, rng):
    """Two classes x 3 queries at K = 1 and 2, every field of the README's schema table, in its
    order and with its types (support_boxes_tokens one str, query_gt_boxes_tokens list[str])."""
    blank = np.zeros((1024, 1024, 3), np.uint8)
    samples = {1: [], 2: []}
    for cls in ("bottle", "cup"):
        for q in range(3):
            query_stem = f"{cls}_q{q}"
            (root / "query_images" / cls).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / "query_images" / cls / f"{query_stem}.jpg"), blank)
            n_gt = int(rng.integers(1, 4))
            gt = []
            for i in range(n_gt):
                x0, y0 = int(rng.integers(0, 800)), int(rng.integers(0, 800))
                gt.append([x0, y0, x0 + int(rng.integers(20, 200)), y0 + int(rng.integers(20, 200))])
            for k in (1, 2):
                support_stem = f"{cls}_s{q}"
                rel_support = f"support_images/K{k}/{cls}/{support_stem}__K{k}.jpg"
                (root / "support_images" / f"K{k}" / cls).mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(root / rel_support), blank)
                support = [[10 + 100 * i, 20, 60 + 100 * i, 90] for i in range(k)]
                tokens = "".join(_tok(b) for b in support)
                template = TEMPLATE_A if (q + k) % 2 else TEMPLATE_B
                samples[k].append({
                    "sample_id": f"{cls}__{support_stem}__K{k}__{query_stem}",
                    "class": cls,
                    "k": k,
                    "prompt": template.format(boxes=tokens),
                    "prompt_template": "A" if template is TEMPLATE_A else "B",
                    "support_image": rel_support,
                    "support_image_size": [1024, 1024],
                    "support_boxes_pixel": support,
                    "support_boxes_tokens": tokens,
                    "query_image": f"query_images/{cls}/{query_stem}.jpg",
                    "query_image_size": [1024, 1024],
                    "query_gt_boxes_pixel": gt,
                    "query_gt_boxes_tokens": [_tok(b) for b in gt],
                    "support_stem": support_stem,
                })
    (root / "inputs").mkdir()
    for k, rows in samples.items():
        (root / "inputs" / f"inputs_k{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return samples


def _iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _greedy(pred, gt, t):
    """Score-free greedy: pairs by descending IoU, each box once; (TP count, sum of TP IoU)."""
    pairs = sorted(((_iou(p, g), i, j) for i, p in enumerate(pred) for j, g in enumerate(gt)), key=lambda x: -x[0])
    used_p, used_g, tp, s = set(), set(), 0, 0.0
    for iou, i, j in pairs:
        if iou < t or i in used_p or j in used_g:
            continue
        used_p.add(i), used_g.add(j)
        tp, s = tp + 1, s + iou
    return tp, s


def _pooled_reference(rows):
    """The README's metrics, micro over ``rows`` = [(pred boxes, gt boxes)]."""
    n_pred = sum(len(p) for p, _ in rows)
    n_gt = sum(len(g) for _, g in rows)

    def f1_at(t):
        tp = sum(_greedy(p, g, t)[0] for p, g in rows)
        p_ = tp / n_pred if n_pred else (1.0 if n_gt == 0 else 0.0)
        r_ = tp / n_gt
        return p_, r_, (2 * p_ * r_ / (p_ + r_) if p_ + r_ > 0 else 0.0)

    p50, r50, f50 = f1_at(0.5)
    mf1 = float(np.mean([f1_at(t)[2] for t in THRESHOLDS]))
    miou = float(np.mean([sum(_greedy(p, g, t)[1] for p, g in rows) / n_gt for t in THRESHOLDS]))
    best = sum(max((_iou(pb, gb) for pb in p), default=0.0) for p, g in rows for gb in g) / n_gt
    return {"P@50": p50, "R@50": r50, "F1@50": f50, "mF1@50:95": mf1, "mIoU@50:95": miou, "mIoU_best": best}


def test_readme_format_package_loads_without_warnings(tmp_path, rng):
    written = _write_readme_package(tmp_path, rng)
    pkg = load_package(tmp_path)
    assert pkg.warnings == []
    assert pkg.ks == [1, 2] and pkg.classes == ["bottle", "cup"]
    for k, rows in written.items():
        for row, s in zip(rows, pkg.samples[k]):
            assert s.sample_id == row["sample_id"] and s.prompt == row["prompt"]
            assert [list(b) for b in s.support_boxes_tokens] == row["support_boxes_pixel"]
            assert [list(b) for b in s.query_gt_boxes_tokens] == row["query_gt_boxes_pixel"]
            assert s.support_image == tmp_path / row["support_image"]


@pytest.mark.parametrize("k", [1, 2])
def test_readme_format_scores_equal_independent_metrics(tmp_path, rng, k):
    written = _write_readme_package(tmp_path, rng)
    pkg = load_package(tmp_path)
    lines, rows = [], []
    for row in written[k]:
        # predictions: each GT jittered by a few pixels, one dropped sometimes, one false box sometimes
        pred = [[max(0, v + int(rng.integers(-15, 16))) for v in b] for b in row["query_gt_boxes_pixel"]]
        if len(pred) > 1 and rng.random() < 0.5:
            pred.pop()
        if rng.random() < 0.5:
            pred.append([900, 900, 1000, 1010])
        pred = [b for b in pred if b[2] > b[0] and b[3] > b[1]]
        text = "".join(_tok(b) for b in pred)
        lines.append({"class": row["class"], "k": k, "query_gt_boxes_pixel": row["query_gt_boxes_pixel"],
                      "sample_id": row["sample_id"], "query_image_size": [1024, 1024], "response": text})
        rows.append((pred, row["query_gt_boxes_pixel"]))
    path = tmp_path / "pred.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    predictions = load_predictions(path, pkg)
    assert predictions.coverage(pkg, [k]).complete
    scores = score_records(predictions.records)
    (pooled,) = [r for r in scores.table(k) if r["kind"] == "pooled" and r["group"] == "all"]
    ref = _pooled_reference(rows)
    for name, value in ref.items():
        assert pooled[name] == pytest.approx(value, abs=1e-12), name
