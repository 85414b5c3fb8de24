"""Monocular depth: metres <-> turbo colours over the dataset's fixed range; RMSE, abs rel."""

from __future__ import annotations

from typing import Any

import numpy as np

from icl.data.dataset import DatasetMeta, Sample
from icl.tasks.base import Task, resize_nearest


def _range(meta: DatasetMeta) -> tuple[float, float]:
    if meta.depth_range is None:
        raise ValueError(f"dataset {meta.name!r} has no depth_range")
    return meta.depth_range


class Depth(Task):
    name = "depth"
    metrics = ("rmse", "abs_rel")
    lower_is_better = frozenset({"rmse", "abs_rel"})
    rank_metrics = ("rmse",)
    paper_task = "depth estimation"

    def applies_to(self, meta: DatasetMeta) -> bool:
        return self.name in meta.tasks and meta.depth_range is not None

    def check_sample(self, sample: Sample, meta: DatasetMeta) -> str | None:
        if not (sample.annotations["depth"] > 0).any():
            return "depth has no valid pixel"
        return None

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return sample.image, sample.annotations["depth"]

    def encode(self, target: np.ndarray, meta: DatasetMeta) -> np.ndarray:
        from icl.ops.turbo import turbo_encode

        d_min, d_max = _range(meta)
        return np.asarray(turbo_encode(np.asarray(target, np.float32), d_min, d_max))

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, float]]:
        from icl.ops.turbo import turbo_decode

        d_min, d_max = _range(meta)
        out = []
        for pred, gt in zip(preds, targets):
            depth = resize_nearest(np.asarray(turbo_decode(pred, d_min, d_max)), gt.shape).astype(np.float64)
            valid = gt > 0
            if not valid.any():
                out.append({"rmse": float("nan"), "abs_rel": float("nan")})
                continue
            g = gt[valid].astype(np.float64)
            err = depth[valid] - g
            out.append({"rmse": float(np.sqrt(np.mean(err**2))), "abs_rel": float(np.mean(np.abs(err) / g))})
        return out
