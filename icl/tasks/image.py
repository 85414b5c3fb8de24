"""Image-to-image tasks: the prediction is resized to the target (bilinear, no antialias)
and scored with PSNR (data range 255), SSIM and LPIPS (AlexNet)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from icl import ops
from icl.data.dataset import DatasetMeta
from icl.tasks.base import Task, resize_image

log = logging.getLogger("icl.tasks")


def _lpips_or_nan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LPIPS per image, or NaN with a loud warning when no weights are installed: the score is
    then missing, never silently dropped."""
    from icl.ops.lpips import LPIPSWeightsNotFound

    try:
        return np.asarray(ops.lpips(a, b, net="alex"), np.float64).reshape(-1)
    except LPIPSWeightsNotFound as exc:
        msg = f"LPIPS weights not found, lpips is reported as NaN (missing): {exc}"
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        log.warning(msg)
        return np.full(len(a), np.nan)


def image_scores(preds: list[np.ndarray], targets: list[np.ndarray]) -> list[dict[str, float]]:
    """PSNR, SSIM and LPIPS per pair; predictions are resized to their targets first. Pairs of
    equal size are scored in one batch."""
    resized = [resize_image(p, t.shape[:2]) for p, t in zip(preds, targets)]
    out: list[dict[str, float]] = [{} for _ in preds]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(targets):
        groups.setdefault(tuple(t.shape), []).append(i)
    for idx in groups.values():
        a = np.stack([resized[i] for i in idx])
        b = np.stack([np.ascontiguousarray(targets[i]) for i in idx])
        psnr = np.asarray(ops.psnr(a, b), np.float64).reshape(-1)
        ssim = np.asarray(ops.ssim(a, b), np.float64).reshape(-1)
        lp = _lpips_or_nan(a, b)
        for j, i in enumerate(idx):
            out[i] = {"psnr": float(psnr[j]), "ssim": float(ssim[j]), "lpips": float(lp[j])}
    return out


class ImageTask(Task):
    """Base of the image-output tasks; subclasses define ``make_pair``."""

    metrics = ("psnr", "ssim", "lpips")
    lower_is_better = frozenset({"lpips"})
    rank_metrics = ("psnr", "ssim", "lpips")

    def encode(self, target: np.ndarray, meta: DatasetMeta) -> np.ndarray:
        return target

    def _score(self, preds, targets, context_targets, meta) -> list[dict[str, Any]]:
        return image_scores(preds, targets)
