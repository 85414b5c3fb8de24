"""Image-to-image tasks: the prediction is resized to the target (bilinear, no antialias)
and scored with PSNR (data range 255), SSIM and LPIPS (AlexNet)."""

from __future__ import annotations

import logging
import threading
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import numpy as np

from icl.data.dataset import DatasetMeta
from icl.helpers import Deferred, resolved
from icl.benchmarks.vibe.tasks.base import Task, resize_image

log = logging.getLogger("icl.benchmarks.vibe.tasks")


LPIPS_MIN_SIZE = 31  # AlexNet's trunk needs images at least this high and wide


_said: set[str] = set()  # reasons already reported in this process


def _missing(reason: str, msg: str, n: int) -> np.ndarray:
    """NaN scores, with one warning per reason and process (a run is one process): not one per
    scored batch."""
    if reason not in _said:
        _said.add(reason)
        msg = f"lpips is reported as NaN (missing): {msg}"
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
        log.warning(msg)
    return np.full(n, np.nan)


def _too_small(a: Any) -> np.ndarray:
    return _missing("size", f"images smaller than LPIPS-alex's {LPIPS_MIN_SIZE} px (first seen: "
                            f"{a.shape[1]}x{a.shape[2]})", len(a))


class LPIPSBatch:
    """LPIPS of host image pairs, sent to the LPIPS helper process as one job (:mod:`icl.helpers`,
    whose torch import overlapped the run; the same function runs here when there is none).
    :meth:`add` takes pairs and returns a function that waits for their scores (NaN with the one
    warning when no weights are installed) and one that says whether they are there;
    :meth:`submit` sends everything added so far (waiting for a score submits too). One job for
    a whole scored batch fills the trunk's fixed-size passes that a job per task would pad."""

    def __init__(self) -> None:
        self._a: list[np.ndarray] = []
        self._b: list[np.ndarray] = []
        self._job: Any = None
        self._scores: Optional[np.ndarray] = None
        self._lock = threading.RLock()

    @property
    def submitted(self) -> bool:
        return self._job is not None

    def add(self, a: np.ndarray, b: np.ndarray) -> tuple[Callable[[], np.ndarray], Callable[[], bool]]:
        with self._lock:
            if self._job is not None:
                raise RuntimeError("LPIPSBatch: pairs added after the batch was submitted")
            start = len(self._a)
            self._a += list(a)
            self._b += list(b)
        end = start + len(a)
        return (lambda: self.scores()[start:end]), self.ready

    def submit(self) -> None:
        from icl import helpers

        with self._lock:
            if self._job is None:
                self._job = helpers.submit("lpips", "icl.ops.lpips:lpips_each", self._a, self._b, net="alex")

    def ready(self) -> bool:
        with self._lock:
            return self._job is not None and bool(self._job.done())

    def scores(self) -> np.ndarray:
        self.submit()
        with self._lock:
            if self._scores is None:
                from icl.ops._dispatch import record_backend
                from icl.ops._lpips_weights import LPIPSWeightsNotFound, report_missing

                try:
                    self._scores = np.asarray(self._job.result(), np.float64) if self._a else np.zeros(0)
                    record_backend("lpips", "reference")
                except LPIPSWeightsNotFound as exc:
                    report_missing("alex", exc)
                    self._scores = np.full(len(self._a), np.nan)
                self._a, self._b = [], []  # the images are not needed any more
            return self._scores


_batch = threading.local()  # the LPIPSBatch of the scoring in progress on this thread (lpips_batch)


@contextmanager
def lpips_batch() -> Iterator[None]:
    """LPIPS of host images scored inside the block (:func:`image_scores`) goes to the LPIPS
    helper as one job when the block ends; their values are :class:`icl.helpers.Deferred`
    until then. Outside such a block each call sends its own job."""
    outer = getattr(_batch, "current", None)
    _batch.current = LPIPSBatch()
    try:
        yield
    finally:
        _batch.current.submit()  # the block's last batch (a score waited for inside it sent an earlier one)
        _batch.current = outer


def _lpips_host(a: np.ndarray, b: np.ndarray) -> tuple[Callable[[], np.ndarray], Callable[[], bool]]:
    """LPIPS of host image pairs: in the enclosing :func:`lpips_batch`, else a job of their own."""
    batch = getattr(_batch, "current", None)
    if batch is not None:
        if batch.submitted:  # a score of it was waited for inside the block: the next pairs start another
            batch = _batch.current = LPIPSBatch()
        return batch.add(a, b)
    own = LPIPSBatch()
    scores, ready = own.add(a, b)
    own.submit()
    return scores, ready


def _lpips_or_nan(a: Any, b: Any) -> np.ndarray:
    """LPIPS per image pair, or NaN with a loud warning (once) when no weights are installed or
    the images are too small for AlexNet: the score is then missing, never silently dropped.

    A score never depends on which other samples shared its batch (``--limit``, sharding,
    batch size): host images go through :func:`icl.ops.lpips.lpips_each` (each image through
    the trunk alone, features cached by content, so a target scored for several models runs
    once), device tensors through :func:`icl.ops.lpips` one pair per call."""
    from icl.ops._lpips_weights import LPIPSWeightsNotFound, report_missing

    if min(a.shape[1:3]) < LPIPS_MIN_SIZE:
        return _too_small(a)
    try:
        if isinstance(a, np.ndarray):
            return _lpips_host(a, b)[0]()
        from icl.ops.lpips import lpips, lpips_each

        if a.device.type == "cpu" and str(a.dtype) == str(b.dtype) == "torch.uint8":
            # CPU tensors (the device path on a CPU) score exactly as the host path
            return np.asarray(lpips_each(list(np.asarray(a)), list(np.asarray(b)), net="alex"), np.float64)
        out = np.empty(len(a), np.float64)
        for i in range(len(a)):
            out[i] = float(lpips(a[i : i + 1], b[i : i + 1], net="alex").detach().cpu().reshape(-1)[0])
        return out
    except LPIPSWeightsNotFound as exc:
        report_missing("alex", exc)  # the one message of the run (Vibe() may have given it already)
        return np.full(len(a), np.nan)


def image_scores(preds: list[np.ndarray], targets: list[np.ndarray], defer: bool = False) -> list[dict[str, Any]]:
    """PSNR, SSIM and LPIPS per pair; predictions are resized to their targets first. Pairs of
    equal size are scored in one batch. ``defer``: LPIPS values may be :class:`Deferred`
    (computed in its helper meanwhile; ``float()`` waits), else every value is a float."""
    from icl.ops import psnr as psnr_op  # numpy in: the native kernels without torch
    from icl.ops import ssim as ssim_op

    resized = [resize_image(p, t.shape[:2]) for p, t in zip(preds, targets)]
    out: list[dict[str, float]] = [{} for _ in preds]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(targets):
        groups.setdefault(tuple(t.shape), []).append(i)
    for idx in groups.values():
        a = np.stack([resized[i] for i in idx])
        b = np.stack([np.ascontiguousarray(targets[i]) for i in idx])
        # LPIPS(x, x) is exactly 0; skipping identical pairs (oracle outputs) saves the CPU trunk
        same = np.array([np.array_equal(x, y) for x, y in zip(a, b)])
        later: Any = None
        if not same.all():  # started first: it runs in its helper while PSNR and SSIM run here
            if min(a.shape[1:3]) < LPIPS_MIN_SIZE:
                missing = _too_small(a)
                later = (lambda: missing, lambda: True)
            else:
                later = _lpips_host(a[~same], b[~same])
        psnr = np.asarray(psnr_op(a, b), np.float64).reshape(-1)
        ssim = np.asarray(ssim_op(a, b), np.float64).reshape(-1)
        slot = np.cumsum(~same) - 1  # index among the scored pairs
        for j, i in enumerate(idx):
            lp: Any = 0.0 if same[j] else Deferred(later[0], int(slot[j]), later[1])
            out[i] = {"psnr": float(psnr[j]), "ssim": float(ssim[j]), "lpips": lp}
    return out if defer else resolved(out)


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
        return image_scores(preds, targets, defer=True)  # evaluate() waits for them unless asked not to

    def _score_device(self, batch, targets, context_targets, meta) -> list[dict[str, Any]]:
        return image_scores_device(batch, targets)
