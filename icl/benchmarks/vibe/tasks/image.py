"""Image-to-image tasks: the prediction is resized to the target (bilinear, no antialias)
and scored with PSNR (data range 255), SSIM and LPIPS (AlexNet)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from icl.data.dataset import DatasetMeta
from icl.benchmarks.vibe.tasks.base import Task, resize_image

log = logging.getLogger("icl.benchmarks.vibe.tasks")


LPIPS_MIN_SIZE = 31  # AlexNet's trunk needs images at least this high and wide


def _missing(msg: str, n: int) -> np.ndarray:
    msg = f"lpips is reported as NaN (missing): {msg}"
    warnings.warn(msg, RuntimeWarning, stacklevel=4)
    log.warning(msg)
    return np.full(n, np.nan)


def _lpips_or_nan(a: Any, b: Any) -> np.ndarray:
    """LPIPS per image, or NaN with a loud warning when no weights are installed or the images
    are too small for AlexNet: the score is then missing, never silently dropped.

    Each pair goes through the network on its own: a convolution's summation order, and so its
    last bits, depends on the batch it runs in, and a stored score must not depend on which
    other samples shared its batch (``--limit``, sharding, batch size)."""
    from icl.ops.lpips import LPIPSWeightsNotFound, lpips

    if min(a.shape[1:3]) < LPIPS_MIN_SIZE:
        return _missing(f"images of {a.shape[1]}x{a.shape[2]} are smaller than LPIPS-alex's {LPIPS_MIN_SIZE} px", len(a))
    out = np.empty(len(a), np.float64)
    try:
        for i in range(len(a)):
            value = lpips(a[i : i + 1], b[i : i + 1], net="alex")
            if hasattr(value, "cpu"):  # a tensor (the device path)
                value = value.detach().cpu()
            out[i] = float(np.asarray(value, np.float64).reshape(-1)[0])
    except LPIPSWeightsNotFound as exc:
        return _missing(f"LPIPS weights not found: {exc}", len(a))
    return out


def image_scores(preds: list[np.ndarray], targets: list[np.ndarray]) -> list[dict[str, float]]:
    """PSNR, SSIM and LPIPS per pair; predictions are resized to their targets first. Pairs of
    equal size are scored in one batch."""
    from icl.ops.psnr import psnr as psnr_op
    from icl.ops.ssim import ssim as ssim_op

    resized = [resize_image(p, t.shape[:2]) for p, t in zip(preds, targets)]
    out: list[dict[str, float]] = [{} for _ in preds]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(targets):
        groups.setdefault(tuple(t.shape), []).append(i)
    for idx in groups.values():
        a = np.stack([resized[i] for i in idx])
        b = np.stack([np.ascontiguousarray(targets[i]) for i in idx])
        psnr = np.asarray(psnr_op(a, b), np.float64).reshape(-1)
        ssim = np.asarray(ssim_op(a, b), np.float64).reshape(-1)
        # LPIPS(x, x) is exactly 0; skipping identical pairs (oracle outputs) saves the CPU trunk
        same = np.array([np.array_equal(x, y) for x, y in zip(a, b)])
        lp = np.zeros(len(idx))
        if not same.all():
            lp[~same] = _lpips_or_nan(a[~same], b[~same])
        for j, i in enumerate(idx):
            out[i] = {"psnr": float(psnr[j]), "ssim": float(ssim[j]), "lpips": float(lp[j])}
    return out


def image_scores_device(batch: Any, targets: list[np.ndarray]) -> list[dict[str, float]]:
    """:func:`image_scores` on the predictions' device: resized there (bilinear, see
    :mod:`icl.benchmarks.vibe.tasks._device`), grouped by target size exactly as on the host, one PSNR, SSIM
    and LPIPS call per group."""
    import torch

    from icl.ops.psnr import psnr as psnr_op
    from icl.ops.ssim import ssim as ssim_op
    from icl.benchmarks.vibe.tasks._device import fetch, groups_by, resize_bilinear_t, split, to_device

    shapes = [tuple(t.shape[:2]) for t in targets]
    resized: dict[int, Any] = {}
    for idx, x in batch.groups:
        for sub, xs in split(idx, x, shapes):
            for i, r in zip(sub, resize_bilinear_t(xs, shapes[sub[0]])):
                resized[i] = r
    parts, lpips = [], np.zeros(len(targets))
    for idx in groups_by(tuple(t.shape) for t in targets).values():
        a = torch.stack([resized[i] for i in idx])
        b = to_device([targets[i] for i in idx], batch.device)
        parts.append((idx, torch.stack([psnr_op(a, b), ssim_op(a, b)], 1)))
        same = (a == b).flatten(1).all(1).cpu().numpy()
        if not same.all():  # LPIPS(x, x) is exactly 0, as on the host
            keep = torch.from_numpy(~same).to(batch.device)
            lpips[np.asarray(idx)[~same]] = _lpips_or_nan(a[keep], b[keep])
    out: list[dict[str, float]] = [{} for _ in targets]
    for idx, rows in fetch(parts):
        for i, (psnr, ssim) in zip(idx, rows.tolist()):
            out[i] = {"psnr": psnr, "ssim": ssim, "lpips": float(lpips[i])}
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

    def _score_device(self, batch, targets, context_targets, meta) -> list[dict[str, Any]]:
        return image_scores_device(batch, targets)
