"""Semantic segmentation: class map <-> spread ADE20K colours, mIoU."""

from __future__ import annotations

from typing import Any

import numpy as np

from icl.data.dataset import VOID, DatasetMeta, Sample
from icl.tasks.base import Task, resize_nearest
from icl.tasks.palette import class_colours, max_classes


def miou(pred: np.ndarray, gt: np.ndarray, num_classes: int) -> float:
    """Mean IoU over the classes present in GT or prediction, GT void (255) pixels ignored.
    NaN when the GT has no valid pixel."""
    valid = gt != VOID
    g = gt[valid].astype(np.int64)
    p = pred[valid].astype(np.int64)
    if g.size == 0:
        return float("nan")
    conf = np.bincount(g * num_classes + p, minlength=num_classes * num_classes).reshape(num_classes, num_classes)
    inter = np.diag(conf)
    union = conf.sum(axis=0) + conf.sum(axis=1) - inter
    present = union > 0
    return float(np.mean(inter[present] / union[present]))


class Segmentation(Task):
    name = "segmentation"
    metrics = ("miou",)
    rank_metrics = ("miou",)
    semantic = True
    paper_task = "semantic segmentation"

    def applies_to(self, meta: DatasetMeta) -> bool:
        return self.name in meta.tasks and 1 <= len(meta.classes) <= max_classes()

    def check_sample(self, sample: Sample, meta: DatasetMeta) -> str | None:
        if not (sample.annotations["segmentation"] != VOID).any():
            return "segmentation has no valid (non-void) pixel"
        return None

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return sample.image, sample.annotations["segmentation"]

    def encode(self, target: np.ndarray, meta: DatasetMeta) -> np.ndarray:
        lut = np.zeros((256, 3), np.uint8)  # void and unknown ids are black
        lut[: len(meta.classes)] = class_colours(len(meta.classes))
        return lut[target]

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, float]]:
        from icl.ops.palette import nearest_palette

        n = len(meta.classes)
        palette = class_colours(n)
        out = []
        for pred, gt, ctx in zip(preds, targets, context_targets):
            cand = np.zeros(n, bool)
            for t in ctx:
                ids = np.unique(t)
                cand[ids[ids < n]] = True
            if not cand.any():  # contexts show no class at all: decode among every class
                cand[:] = True
            labels = np.asarray(nearest_palette(pred, palette, cand))
            out.append({"miou": miou(resize_nearest(labels, gt.shape), gt, n)})
        return out
