"""Edge detection: binary edge map <-> white on black; pixel precision, recall, F1."""

from __future__ import annotations

from typing import Any

import numpy as np

from icl.data.dataset import DatasetMeta, Sample
from icl.benchmarks.vibe.tasks.base import Task, precision_recall_f1, resize_nearest


def decode_edges(pred: np.ndarray) -> np.ndarray:
    """Edge where the mean of the three channels is >= 128 (exactly: R + G + B >= 384)."""
    return pred.astype(np.int32).sum(axis=2) >= 384


class Edges(Task):
    name = "edges"
    metrics = ("precision", "recall", "f1")
    rank_metrics = ("f1",)
    paper_task = "edge detection"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return sample.image, sample.annotations["edges"]

    def encode(self, target: np.ndarray, meta: DatasetMeta) -> np.ndarray:
        return np.repeat(np.where(target, 255, 0).astype(np.uint8)[:, :, None], 3, axis=2)

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, float]]:
        out = []
        for pred, gt in zip(preds, targets):
            mask = resize_nearest(decode_edges(pred), gt.shape)
            out.append(precision_recall_f1(int((mask & gt).sum()), int(mask.sum()), int(gt.sum())))
        return out

    def _score_device(self, batch, targets, context_targets, meta) -> list[dict[str, float]]:
        import torch

        from icl.benchmarks.vibe.tasks._device import by_target_size, fetch, resize_nearest_t, to_device

        parts = []
        for idx, x in by_target_size(batch, [t.shape for t in targets]):
            mask = resize_nearest_t(x.sum(3, dtype=torch.int32) >= 384, targets[idx[0]].shape)
            gt = to_device([targets[i] for i in idx], batch.device)
            parts.append((idx, torch.stack([(mask & gt).flatten(1).sum(1), mask.flatten(1).sum(1),
                                            gt.flatten(1).sum(1)], 1)))
        out: list[dict[str, float]] = [{} for _ in targets]
        for idx, counts in fetch(parts):
            for i, (tp, n_pred, n_gt) in zip(idx, counts.tolist()):
                out[i] = precision_recall_f1(tp, n_pred, n_gt)
        return out
