"""Monocular depth: metres <-> turbo colours over the dataset's fixed range; RMSE, abs rel."""

from __future__ import annotations

from typing import Any

import numpy as np

from icl.data.dataset import DatasetMeta, Sample
from icl.benchmarks.vibe.tasks.base import Task, resize_nearest


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

    def oracle_ceiling(self, target: np.ndarray, context_targets, meta) -> str | None:
        # inside the range the oracle sits at the quantisation floor, which is its lossless score
        d_min, d_max = _range(meta)
        valid = target[target > 0]
        outside = int(((valid < d_min) | (valid > d_max)).sum())
        if outside:
            return f"{outside} valid depth pixels outside the dataset's range [{d_min:g}, {d_max:g}] m are clipped"
        return None

    def encode(self, target: np.ndarray, meta: DatasetMeta) -> np.ndarray:
        from icl.ops import turbo_encode  # numpy in: the native kernel without torch

        d_min, d_max = _range(meta)
        return np.asarray(turbo_encode(np.asarray(target, np.float32), d_min, d_max))

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, float]]:
        from icl.ops import turbo_decode  # numpy in: the native kernel without torch

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

    def _score_device(self, batch, targets, context_targets, meta) -> list[dict[str, float]]:
        import torch

        from icl.ops.turbo import turbo_decode
        from icl.benchmarks.vibe.tasks._device import fetch, resize_nearest_t, split, to_device

        d_min, d_max = _range(meta)
        shapes = [tuple(t.shape) for t in targets]
        parts = []
        for idx, x in batch.groups:
            decoded = turbo_decode(x, d_min, d_max)
            for sub, depth in split(idx, decoded, shapes):
                depth = resize_nearest_t(depth, shapes[sub[0]]).double()
                gt = to_device([targets[i] for i in sub], batch.device).double()
                valid = gt > 0
                err = torch.where(valid, depth - gt, 0.0)
                rel = torch.where(valid, err.abs() / gt, 0.0)  # invalid GT never divides
                parts.append((sub, torch.stack([valid.flatten(1).sum(1).double(), (err * err).flatten(1).sum(1),
                                                rel.flatten(1).sum(1)], 1)))
        out: list[dict[str, float]] = [{} for _ in targets]
        for idx, stats in fetch(parts):
            for i, (n, sq, rel) in zip(idx, stats.tolist()):
                out[i] = ({"rmse": float(np.sqrt(sq / n)), "abs_rel": rel / n} if n
                          else {"rmse": float("nan"), "abs_rel": float("nan")})
        return out
