"""Semantic segmentation: class map <-> spread ADE20K colours, mIoU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from icl.data.dataset import VOID, DatasetMeta, Sample
from icl.benchmarks.vibe.tasks.base import Task, resize_nearest
from icl.benchmarks.vibe.tasks.palette import class_colours, max_classes

if TYPE_CHECKING:
    import torch


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

    def oracle_ceiling(self, target: np.ndarray, context_targets, meta) -> str | None:
        n = len(meta.classes)
        shown = candidates(list(context_targets), n)
        present = np.zeros(n, bool)
        present[np.unique(target[target < n])] = True
        missing = np.flatnonzero(present & ~shown)
        if missing.size:
            return f"query classes {missing.tolist()} are in no context target, so no prediction can name them"
        return None

    def encode(self, target: np.ndarray, meta: DatasetMeta) -> np.ndarray:
        lut = np.zeros((256, 3), np.uint8)  # void and unknown ids are black
        lut[: len(meta.classes)] = class_colours(len(meta.classes))
        return lut[target]

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, float]]:
        from icl.ops import nearest_palette  # numpy in: the native kernel without torch

        n = len(meta.classes)
        palette = class_colours(n)
        out = []
        for pred, gt, ctx in zip(preds, targets, context_targets):
            labels = np.asarray(nearest_palette(pred, palette, candidates(ctx, n)))
            out.append({"miou": miou(resize_nearest(labels, gt.shape), gt, n)})
        return out

    def _score_device(self, batch, targets, context_targets, meta) -> list[dict[str, float]]:
        import torch

        from icl.ops.palette import nearest_palette
        from icl.benchmarks.vibe.tasks._device import fetch, resize_nearest_t, split, to_device

        n = len(meta.classes)
        palette = torch.from_numpy(class_colours(n)).to(batch.device)
        cand = torch.from_numpy(np.stack([candidates(ctx, n) for ctx in context_targets])).to(batch.device)
        shapes = [tuple(t.shape) for t in targets]
        parts = []
        for idx, x in batch.groups:
            labels = nearest_palette(x, palette, cand[torch.tensor(idx, device=batch.device)])
            for sub, lab in split(idx, labels, shapes):
                gt = to_device([targets[i] for i in sub], batch.device)
                parts.append((sub, confusion_stats(resize_nearest_t(lab, shapes[sub[0]]), gt, n)))
        out: list[dict[str, float]] = [{} for _ in targets]
        for idx, stats in fetch(parts):
            for i, row in zip(idx, stats):
                inter, union, n_valid, unknown = row[:n], row[n:2 * n], row[2 * n], row[2 * n + 1]
                if unknown:
                    raise ValueError(f"segmentation target {i} has class ids >= {n} (the dataset's classes)")
                present = union > 0
                out[i] = {"miou": float(np.mean(inter[present] / union[present])) if n_valid else float("nan")}
        return out


def candidates(context_targets: list[np.ndarray], num_classes: int) -> np.ndarray:
    """bool [num_classes]: the classes present in the context targets, or every class when they
    show none (PROTOCOL §1.3)."""
    cand = np.zeros(num_classes, bool)
    for t in context_targets:
        t = np.asarray(t)
        if t.dtype == np.uint8 and t.ndim == 2:  # OpenCV's histogram: 10x np.unique, without the GIL
            hist = cv2.calcHist([np.ascontiguousarray(t)], [0], None, [256], [0, 256]).reshape(-1)
            cand |= hist[:num_classes] > 0
        else:
            ids = np.unique(t)
            cand[ids[ids < num_classes]] = True
    if not cand.any():  # contexts show no class at all: decode among every class
        cand[:] = True
    return cand


def confusion_stats(pred: torch.Tensor, gt: torch.Tensor, num_classes: int) -> torch.Tensor:
    """int64 ``[B, 2n + 2]`` per image: intersection ``[n]`` and union ``[n]`` of every class over
    the non-void GT pixels, the count of those pixels, and of GT ids >= n outside void.
    ``pred`` integer labels < n, ``gt`` integer labels (255 void), both ``[B, H, W]``."""
    import torch

    b, n = pred.shape[0], num_classes
    bins = b * n * n
    itype = torch.int32 if bins < 2**31 - 1 else torch.int64
    g = gt.to(itype)
    known = (g >= 0) & (g < n)  # void (255) is never a class: n <= 149
    base = torch.arange(b, device=pred.device, dtype=itype).view(b, 1, 1) * (n * n)
    # pixels outside the known classes go to one extra bin, dropped: no masked gather
    key = torch.where(known, base + g * n + pred.to(itype), bins)
    conf = torch.bincount(key.reshape(-1), minlength=bins + 1)[:bins].view(b, n, n)
    inter = conf.diagonal(dim1=1, dim2=2)
    union = conf.sum(1) + conf.sum(2) - inter
    n_valid = (g != VOID).flatten(1).sum(1)
    counts = torch.stack([n_valid, n_valid - conf.flatten(1).sum(1)], 1)
    return torch.cat([inter, union, counts], 1)
