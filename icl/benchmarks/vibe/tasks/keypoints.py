"""Keypoint detection: visible points <-> red discs; point precision, recall, F1 within tau."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from icl.data.dataset import DatasetMeta, Sample
from icl.benchmarks.vibe.tasks.base import PointsTarget, Task, precision_recall_f1, scale_points

if TYPE_CHECKING:
    import torch

RADIUS = 5
TAU = 2 * RADIUS  # match radius in pixels at target resolution


def round_half_up(v: float) -> int:
    return int(np.floor(v + 0.5))


def clip_to_image(xy: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Points (x, y) [N, 2] clipped into ``[0, w - 1] x [0, h - 1]`` of an image of ``size`` (h, w)."""
    h, w = size
    return np.stack([np.clip(xy[:, 0], 0, w - 1), np.clip(xy[:, 1], 0, h - 1)], 1) if len(xy) else xy


def decode_points(pred: np.ndarray) -> np.ndarray:
    """Points (x, y) float64 [N, 2] of a uint8 prediction: ``S = clip(R - max(G, B), 0, 1)`` on
    [0, 1] channels, mask ``S > 0.5``, one point per 8-connected component at its max-S pixel
    (first in raster order on ties), in raster order of the components."""
    rgb = pred.astype(np.int16)
    s = np.clip(rgb[:, :, 0] - np.maximum(rgb[:, :, 1], rgb[:, :, 2]), 0, 255)
    mask = s >= 128  # S > 0.5 exactly, as S = s / 255 with integer s
    if not mask.any():
        return np.zeros((0, 2), np.float64)
    from icl.ops import connected_components  # numpy in: the native kernel without torch

    comps = connected_components(mask, connectivity=8, values=(s / 255.0).astype(np.float32))
    yx = np.asarray(comps.argmax, np.float64).reshape(-1, 2)
    return yx[:, ::-1].copy()


def decode_points_device(images: torch.Tensor) -> list[np.ndarray]:
    """:func:`decode_points` of every image of a uint8 ``[B, H, W, 3]`` batch, on its device,
    one connected-components call for the batch. S is kept as the integer ``255 * S``: the
    argmax over it, ties included, is the argmax over ``S`` (``icl.ops.redness`` computes S in
    float32, where equal integer differences can round apart and break ties differently)."""
    import torch

    from icl.ops.components import connected_components

    rgb = images.to(torch.int16)
    s = (rgb[..., 0] - torch.maximum(rgb[..., 1], rgb[..., 2])).clamp_(min=0)
    comps = connected_components(s >= 128, connectivity=8, values=s.float())
    found = torch.cat([comps.image.view(-1, 1), comps.argmax.view(-1, 2)], 1).cpu().numpy()
    return [found[found[:, 0] == b, :0:-1].astype(np.float64) for b in range(images.shape[0])]


class Keypoints(Task):
    name = "keypoints"
    metrics = ("precision", "recall", "f1")
    rank_metrics = ("f1",)
    paper_task = "keypoint detection"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        kp = sample.annotations["keypoints"]
        size = tuple(sample.image.shape[:2])
        pts = clip_to_image(kp[kp[:, 2] == 2, :2].astype(np.float64), size)
        return sample.image, PointsTarget(pts, size)

    def oracle_ceiling(self, target: PointsTarget, context_targets, meta) -> str | None:
        pts = np.asarray(target.points, np.float64).reshape(-1, 2)
        if len(pts) > 1:
            d = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1))
            close = d[np.triu_indices(len(pts), 1)]
            if (close <= TAU).any():
                return f"visible keypoints {close.min():.1f} px apart (<= 2r = {TAU} px): their discs merge"
        return None

    def encode(self, target: PointsTarget, meta: DatasetMeta) -> np.ndarray:
        img = np.zeros((*target.size, 3), np.uint8)
        # paper A.4: points outside the image are clipped to it before drawing
        for x, y in clip_to_image(np.asarray(target.points, np.float64).reshape(-1, 2), target.size):
            cv2.circle(img, (round_half_up(x), round_half_up(y)), RADIUS, (255, 0, 0), thickness=-1, lineType=cv2.LINE_8)
        return img

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, float]]:
        return self._score_points([decode_points(p) for p in preds], [p.shape[:2] for p in preds], targets)

    def _score_points(self, points, sizes, targets) -> list[dict[str, float]]:
        """P/R/F1 of decoded points (x, y) at prediction ``sizes`` against the targets."""
        from icl.ops import match_points  # numpy in: the native kernel without torch

        out = []
        for xy, size, target in zip(points, sizes, targets):
            pts = scale_points(xy, size, target.size)
            gt = np.asarray(target.points, np.float64).reshape(-1, 2)
            tp = len(match_points(pts, gt, float(TAU))[0]) if len(pts) and len(gt) else 0
            out.append(precision_recall_f1(tp, len(pts), len(gt)))
        return out

    def _score_device(self, batch, targets, context_targets, meta) -> list[dict[str, float]]:
        sizes = batch.shapes()
        points: list[np.ndarray] = [np.zeros((0, 2))] * len(targets)
        for idx, x in batch.groups:
            for i, pts in zip(idx, decode_points_device(x)):
                points[i] = pts
        # the decoded points (a few per image) are on the host: match as the numpy path does
        return self._score_points(points, sizes, targets)
