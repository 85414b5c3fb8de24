"""numpy in, numpy out without torch: the public ``psnr``, ``ssim``, ``box_iou``,
``greedy_match_counts``, ``greedy_match``, ``match_points``, ``connected_components``,
``redness``, ``nearest_palette``, ``turbo_encode``, ``turbo_bins``, ``turbo_decode`` and
``average_precision``.

For numpy inputs the native kernels take the arrays as they are, so these ops need neither
torch nor its op machinery: importing torch costs 0.8-2 s a process and a call through the
torch front ends 100-300 us, more than the kernel itself on small images (a 72x96 PSNR). Each
function here serves the common valid call (numpy arrays, the cpu backend, dtypes the kernel
reads directly) and hands everything else to the torch front end in the op's own module,
which also raises every error: one place checks and words them. The results are the same
arrays the cpu backend returns through the torch front end.
"""

from __future__ import annotations

import math
import os
from numbers import Real
from functools import lru_cache
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from icl.ops._dispatch import backend_status, native, record_backend
from icl.ops._numpy_core import COCO_RECALL_THRESHOLDS, INTERPOLATIONS, Components, redness_numpy

_IMAGE_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float64))
_BOX_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_SSIM_MIN = 11  # the Gaussian window (icl.ops.ssim.WIN_SIZE)


def _host_backend(backend: Optional[str]) -> bool:
    """Whether the call may run on the native cpu backend here (what dispatch would choose)."""
    forced = backend or os.environ.get("ICL_BACKEND") or None
    return forced in (None, "cpu") and backend_status("cpu")[0]


def _finite(*arrays: np.ndarray) -> bool:
    return all(a.dtype.kind != "f" or bool(np.isfinite(a).all()) for a in arrays)


def _image_pair(a: Any, b: Any, data_range: Any, min_size: int) -> Optional[tuple[np.ndarray, np.ndarray, float]]:
    """``(x [B, H, W, C], y, data_range)`` for a valid pair the kernels read as it is, else None."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype or a.shape != b.shape:
        return None
    if a.dtype not in _IMAGE_DTYPES or a.ndim not in (3, 4) or a.shape[-1] not in (1, 3):
        return None
    if a.shape[-3] < min_size or a.shape[-2] < min_size or (a.ndim == 4 and a.shape[0] == 0):
        return None
    if data_range is None:
        if a.dtype != np.uint8:
            return None
        dr = 255.0
    elif isinstance(data_range, Real) and not isinstance(data_range, bool):
        dr = float(data_range)
        if not (math.isfinite(dr) and dr > 0.0):
            return None
    else:
        return None
    if not _finite(a, b):
        return None
    x = np.ascontiguousarray(a if a.ndim == 4 else a[None])
    y = np.ascontiguousarray(b if b.ndim == 4 else b[None])
    return x, y, dr


def _scores(values: np.ndarray, single: bool) -> np.ndarray:
    return values[0, ...] if single else values  # 0-d for one image, as the torch front end


@lru_cache(maxsize=None)
def _native_fn(name: str) -> Optional[Callable[..., Any]]:
    """``icl._C.<name>`` when the native module loads and has it, else None."""
    fn: Optional[Callable[..., Any]] = getattr(native(), name, None) if backend_status("cpu")[0] else None
    return fn


# resolved once: at 72x96 a psnr call costs about 3 us, and each look-up counts (cv2.PSNR: 3 us)
_PSNR_NUMPY: list[Optional[Callable[..., Any]]] = []
_PSNR_RECORDED: list[bool] = []


def _resolve(slot: list[Optional[Callable[..., Any]]], name: str) -> Optional[Callable[..., Any]]:
    slot.append(_native_fn(name))
    return slot[0]


def psnr(a: Any, b: Any, data_range: Optional[float] = None, *, backend: Optional[str] = None) -> Any:
    """PSNR in dB of each image pair: ``10 * log10(data_range**2 / MSE)``.

    ``a``, ``b``: ``[B, H, W, C]`` or ``[H, W, C]`` (C = 1 or 3), same shape and dtype: uint8,
    float16, bfloat16, float32 or float64, finite. ``data_range`` defaults to 255 for uint8 and
    is required for float images (``ValueError`` otherwise); unlike skimage it is never guessed
    from the data. The MSE is over all pixels and channels of an image: exact for uint8,
    squared differences in float32 summed in float64 for float16/bfloat16/float32, float64 for
    float64. Returns float64 ``[B]`` (0-d for a single image; numpy when ``a`` is numpy) on
    every backend; identical images give ``+inf``. Differentiable in ``a`` and ``b`` for float
    inputs (closed-form gradient in float64); a ``torch.library`` op (``torch.ops.icl.psnr``).
    """
    if type(a) is np.ndarray and (backend is None or backend == "cpu") and backend_status("cpu")[0]:
        whole = _PSNR_NUMPY[0] if _PSNR_NUMPY else _resolve(_PSNR_NUMPY, "psnr_numpy")
        out = None if whole is None else whole(a, b, data_range)  # the common call whole in C++
        if out is not None:
            if _PSNR_RECORDED:
                return out
            _PSNR_RECORDED.append(True)
            record_backend("psnr", "cpu")
            return out
    pair = _image_pair(a, b, data_range, 1)
    if pair is None or not _host_backend(backend):
        from icl.ops.psnr import psnr as front  # an import statement: torch.compile traces it

        return front(a, b, data_range, backend=backend)
    x, y, dr = pair
    mse = native().mse(x, y)
    record_backend("psnr", "cpu")
    with np.errstate(divide="ignore"):  # identical images: +inf, as skimage
        return _scores(10.0 * np.log10((dr * dr) / mse), a.ndim == 3)


def ssim(a: Any, b: Any, data_range: Optional[float] = None, *, backend: Optional[str] = None) -> Any:
    """Mean SSIM of each image pair, exactly skimage's
    ``structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
    data_range=data_range, channel_axis=-1)``.

    ``a``, ``b``: ``[B, H, W, C]`` or ``[H, W, C]`` (C = 1 or 3), same shape and dtype: uint8,
    float16, bfloat16, float32 or float64, finite; H and W at least 11 (the Gaussian window:
    skimage raises for smaller images, so do we). ``data_range`` defaults to 255 for uint8 and
    is required for float images (``ValueError``). Gaussian window sigma 1.5 truncated at 3.5
    sigma (11 taps), K1 = 0.01, K2 = 0.03, population covariance; the SSIM map is averaged
    over the valid positions (5-pixel border dropped) of each channel, then over channels.
    Computed in float64 on the cpu and reference backends (within 1e-6 of skimage on every
    input, flat and bright low-variance images included). Returns float64 ``[B]`` (0-d for a
    single image; numpy when ``a`` is numpy). Differentiable in ``a`` and ``b`` for float
    inputs (the backward is the float64 reference's gradient); a ``torch.library`` op
    (``torch.ops.icl.ssim``), so ``torch.compile(fullgraph=True)`` traces through it.
    """
    pair = _image_pair(a, b, data_range, _SSIM_MIN)
    if pair is None or not _host_backend(backend):
        from icl.ops.ssim import ssim as front

        return front(a, b, data_range, backend=backend)
    x, y, dr = pair
    out = native().ssim(x, y, dr)
    record_backend("ssim", "cpu")
    return _scores(out, a.ndim == 3)


def _valid_boxes(t: Any) -> bool:
    if type(t) is not np.ndarray or t.ndim != 2 or t.shape[1] != 4 or t.dtype not in _BOX_DTYPES:
        return False
    return _finite(t) and not bool(((t[:, 2] < t[:, 0]) | (t[:, 3] < t[:, 1])).any())


_FLOAT32_SAFE = 2.0**60  # as icl.ops.box_iou: larger float32 coordinates take the float64 path there


def box_iou(a: Any, b: Any, *, backend: Optional[str] = None) -> Any:
    """IoU of every box of ``a`` with every box of ``b``.

    ``a`` ``[N, 4]`` and ``b`` ``[M, 4]`` are ``x0, y0, x1, y1`` boxes in continuous coordinates
    (area ``(x1 - x0) * (y1 - y0)``, no ``+1``). Returns ``[N, M]``: float64 when either input is
    float64, else float32 (integer and half inputs are converted to float32); computed in the
    output dtype as ``inter / (area_a + area_b - inter)``, pycocotools' order, except that
    float32 boxes with a coordinate beyond 2^60 (whose areas could overflow) are computed in
    float64 and rounded once, so identical boxes always give exactly 1. Boxes that do not
    overlap, and zero-area boxes (with anything, themselves included), have IoU exactly 0.
    Inverted boxes, NaN or infinite coordinates raise ``ValueError``. Not differentiable;
    a ``torch.library`` op (``torch.ops.icl.box_iou``).
    """
    fast = _valid_boxes(a) and _valid_boxes(b) and a.dtype == b.dtype and _host_backend(backend)
    if fast and a.dtype == np.float32:
        fast = all(t.size == 0 or float(np.abs(t).max()) <= _FLOAT32_SAFE for t in (a, b))
    if not fast:
        from icl.ops.box_iou import box_iou as front

        return front(a, b, backend=backend)
    out = native().box_iou(np.ascontiguousarray(a), np.ascontiguousarray(b))
    record_backend("box_iou", "cpu")
    return out


def _offsets(x: Any, rows: int) -> Optional[np.ndarray]:
    o = np.asarray(x) if isinstance(x, (list, tuple, np.ndarray)) else None
    if o is None or o.ndim != 1 or o.size < 1 or o.dtype.kind not in "iu":
        return None
    o = np.ascontiguousarray(o, dtype=np.int64)
    if o[0] != 0 or o[-1] != rows or (o[1:] < o[:-1]).any():
        return None
    return o


def _thresholds(values: Any) -> Optional[np.ndarray]:
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or values.dtype.kind != "f":
            return None
        t = values.astype(np.float64)
    elif isinstance(values, (list, tuple)) and all(isinstance(v, float) for v in values):
        t = np.array(values, dtype=np.float64)
    else:
        return None
    if t.size == 0 or not bool(((t >= 0.0) & (t <= 1.0)).all()):  # also rejects NaN
        return None
    return t


def greedy_match_counts(pred_boxes: Any, pred_offsets: Any, gt_boxes: Any, gt_offsets: Any, thresholds: Any, *,
                        backend: Optional[str] = None) -> Any:
    """Greedy matching of many samples at many IoU thresholds at once (ragged batch).

    Sample ``s`` owns ``pred_boxes[pred_offsets[s]:pred_offsets[s + 1]]`` and
    ``gt_boxes[gt_offsets[s]:gt_offsets[s + 1]]``; boxes are xyxy ``[P, 4]`` / ``[G, 4]``
    (any float or integer dtype, computed in float64; x1 >= x0 and y1 >= y0; boxes outside an
    image are taken as they are). ``thresholds``: ``[T]`` numbers in [0, 1].

    Returns ``tp`` int64 ``[S, T]`` (true positives of sample s at threshold t),
    ``tp_iou_sum`` float64 ``[S, T]`` (sum of the IoU of those pairs, added in selection
    order) and ``best_iou`` float64 ``[G]`` (each ground truth's best IoU with any prediction of
    its sample, 0 when the sample has none). numpy in (``pred_boxes``) -> numpy out; torch in ->
    CPU tensors out (the matching runs on the CPU). Not differentiable; a ``torch.library`` op.
    """
    fast = _valid_boxes(pred_boxes) and _valid_boxes(gt_boxes) and _host_backend(backend)
    p_off = _offsets(pred_offsets, pred_boxes.shape[0]) if fast else None
    g_off = _offsets(gt_offsets, gt_boxes.shape[0]) if fast else None
    thr = _thresholds(thresholds) if fast else None
    if p_off is None or g_off is None or thr is None or p_off.size != g_off.size:
        from icl.ops.greedy_match import greedy_match_counts as front

        return front(pred_boxes, pred_offsets, gt_boxes, gt_offsets, thresholds, backend=backend)
    pred = np.ascontiguousarray(pred_boxes, dtype=np.float64)
    gt = np.ascontiguousarray(gt_boxes, dtype=np.float64)
    out = native().greedy_match_counts(pred, p_off, gt, g_off, thr)
    record_backend("greedy_match_counts", "cpu")
    return tuple(out)


def _real(x: Any) -> bool:
    return isinstance(x, Real) and not isinstance(x, bool)


def redness(images: Any, threshold: float = 0.5, *, backend: Optional[str] = None) -> Any:
    """Redness ``S`` float32 ``[B, H, W]`` and mask ``S > threshold`` bool ``[B, H, W]``.

    images: ``[B, H, W, 3]`` or ``[H, W, 3]`` uint8 or float in [0, 1] (float becomes uint8 by
    ``round(255 * clip(x, 0, 1))`` first, as every decoder does); channels are levels / 255.
    threshold: a finite number (S lies in [0, 1]). Single images give ``[H, W]`` outputs;
    numpy in, numpy out. Not differentiable; a ``torch.library`` op.
    """
    if (type(images) is np.ndarray and images.dtype == np.uint8 and images.ndim in (3, 4)
            and images.shape[-1] == 3 and _real(threshold) and math.isfinite(threshold) and _host_backend(backend)):
        out = redness_numpy(images, float(threshold))
        record_backend("redness", "cpu")
        return out
    from icl.ops.redness import redness as front

    return front(images, threshold, backend=backend)


def greedy_match(iou: Any, threshold: float = 0.5, *, backend: Optional[str] = None) -> Any:
    """Greedy one-to-one matching of an IoU matrix.

    ``iou``: float ``[N, M]`` (predictions x ground truths), values in [0, 1]. Returns
    ``(pred_idx int64 [T], gt_idx int64 [T], iou [T])`` (``iou`` in the input dtype) in
    selection order: descending IoU, ties to the lower prediction then the lower ground-truth
    index; each box is used at most once; only pairs with IoU >= ``threshold`` are kept (with
    ``threshold = 0`` every pair qualifies, zero-IoU pairs included). Not differentiable; a
    ``torch.library`` op (``torch.ops.icl.greedy_match``).
    """
    fast = (type(iou) is np.ndarray and iou.ndim == 2 and iou.dtype in _BOX_DTYPES and _real(threshold)
            and 0.0 <= threshold <= 1.0 and _host_backend(backend))
    # min >= 0 and max <= 1 also refuse NaN and infinities (the front end words the error)
    if fast and iou.size and not (iou.min() >= 0.0 and iou.max() <= 1.0):
        fast = False
    if not fast:
        from icl.ops.greedy_match import greedy_match as front

        return front(iou, threshold, backend=backend)
    pred, gt = native().greedy_match(np.ascontiguousarray(iou, dtype=np.float64), float(threshold))
    record_backend("greedy_match", "cpu")
    return pred, gt, iou[pred, gt]


def _host_points(x: Any) -> Optional[np.ndarray]:
    if type(x) is not np.ndarray or x.ndim != 2 or x.shape[1] != 2 or x.dtype.kind not in "fiu":
        return None
    h = np.ascontiguousarray(x, dtype=np.float64)
    return h if x.dtype.kind != "f" or bool(np.isfinite(h).all()) else None


def match_points(pred: Any, gt: Any, radius: float, *, backend: Optional[str] = None) -> Any:
    """Greedy one-to-one matching of ``pred`` ``[N, 2]`` to ``gt`` ``[M, 2]`` points.

    All pairs with distance <= ``radius`` are taken by increasing distance, ties to the lower
    pred index, then the lower gt index, each point used at most once. Distances are compared
    as squared distances ``dx*dx + dy*dy`` in float64 against ``radius * radius`` (so integer
    coordinates tie exactly). Returns ``(pred_idx, gt_idx)``, int64 ``[T]``, in matching order
    (increasing distance); numpy in, numpy out; torch in, CPU tensors out. Coordinates of any
    real dtype (converted to float64; CUDA inputs are matched on the host). NaN/infinite
    coordinates and a negative or non-finite radius raise ``ValueError``. Not differentiable;
    a ``torch.library`` op (``torch.ops.icl.match_points``).
    """
    p = _host_points(pred) if _real(radius) and math.isfinite(radius) and radius >= 0 else None
    g = _host_points(gt) if p is not None else None
    if g is None or not _host_backend(backend):
        from icl.ops.match_points import match_points as front

        return front(pred, gt, radius, backend=backend)
    out = native().match_points(p, g, float(radius))
    record_backend("match_points", "cpu")
    return out


_RUNS_LIMIT = 2**31 - 1  # the cpu backend's int32 run indices (icl.ops.components._cpu_supports)


def connected_components(mask: Any, connectivity: int = 8, values: Any = None, *,
                         backend: Optional[str] = None) -> Components:
    """Connected components of ``mask`` with per-component statistics.

    mask: ``[B, H, W]`` or ``[H, W]`` (a batch of one), bool or integer (nonzero = foreground).
    connectivity: 4 or 8. values: optional float tensor of the mask's shape, finite (each
    backend checks, in its own pass: NaN or inf raise ``ValueError``); the sum and mean are
    accumulated in float64 and returned as float32, the argmax is the (y, x) of the largest
    value, the first in raster order on ties.
    Returns :class:`Components`; ``labels`` is always ``[B, H, W]`` int32, components are
    numbered 1..n per image in raster order of their first pixel, and the per-component fields
    are flattened over the batch in (image, label) order. Numpy in gives numpy out. Not
    differentiable (``values`` is read without gradient); a ``torch.library`` op
    (``torch.ops.icl.connected_components``).
    """
    fast = (type(mask) is np.ndarray and mask.ndim in (2, 3) and mask.dtype.kind in "biu"
            and type(connectivity) is int and connectivity in (4, 8) and _host_backend(backend)
            and mask.shape[-2] * ((mask.shape[-1] + 1) // 2) < _RUNS_LIMIT)
    if fast and values is not None:
        # NaN or infinite values: the native kernel raises the front end's ValueError in its own pass
        fast = type(values) is np.ndarray and values.dtype in _BOX_DTYPES and values.shape == mask.shape
    if not fast:
        from icl.ops.components import connected_components as front

        return front(mask, connectivity, values, backend=backend)
    m = mask if mask.dtype.kind == "b" or mask.dtype == np.uint8 else mask != 0
    m = np.ascontiguousarray(m).view(np.uint8)  # nonzero = foreground
    v = None if values is None else np.ascontiguousarray(values)
    if m.ndim == 2:
        m = m[None]
        v = None if v is None else v[None]
    out = native().connected_components(m, connectivity, v)
    record_backend("connected_components", "cpu")
    return Components(*out)


def _palette_u8(palette: Any) -> Optional[np.ndarray]:
    """A valid integer palette ``[P, 3]`` (1 <= P <= 256, values 0..255) as contiguous uint8."""
    if not isinstance(palette, (list, tuple, np.ndarray)):
        return None
    pal = np.asarray(palette)
    if pal.dtype.kind not in "iu" or pal.ndim != 2 or pal.shape[1] != 3 or not 1 <= pal.shape[0] <= 256:
        return None
    if pal.dtype != np.uint8 and (int(pal.min()) < 0 or int(pal.max()) > 255):
        return None
    return np.ascontiguousarray(pal, dtype=np.uint8)


def _candidates_u8(candidates: Any, batch: int, colours: int) -> Optional[np.ndarray]:
    """A valid bool mask ``[B, P]`` or ``[P]`` (every image with a candidate) as uint8 ``[B, P]``."""
    if type(candidates) is not np.ndarray or candidates.dtype != np.bool_:
        return None
    if candidates.shape == (colours,):
        candidates = np.broadcast_to(candidates, (batch, colours))
    elif candidates.shape != (batch, colours):
        return None
    if batch and not bool(candidates.any(1).all()):
        return None
    return np.ascontiguousarray(candidates).view(np.uint8)


def nearest_palette(images: Any, palette: Any, candidates: Any = None, *, backend: Optional[str] = None) -> Any:
    """Index of the nearest palette colour per pixel.

    images: ``[B, H, W, 3]`` or ``[H, W, 3]``, uint8 or float in [0, 1] (float becomes uint8 by
    ``round(255 * clip(x, 0, 1))``, float64 in float64). palette: ``[P, 3]`` integers in
    0..255, 1 <= P <= 256. candidates: None, or a bool mask ``[B, P]`` (per image) or ``[P]``
    (shared) of the colours allowed; every image needs at least one. Nearest means the
    smallest squared RGB distance, exactly, with ties to the lower palette index. Returns
    int32 ``[B, H, W]`` (``[H, W]`` for a single image); numpy in, numpy out. Not
    differentiable (inputs with ``requires_grad`` are read without gradient); a
    ``torch.library`` op (``torch.ops.icl.nearest_palette``).
    """
    fast = (type(images) is np.ndarray and images.dtype == np.uint8 and images.ndim in (3, 4)
            and images.shape[-1] == 3 and _host_backend(backend))
    pal = _palette_u8(palette) if fast else None
    x = (images if images.ndim == 4 else images[None]) if pal is not None else None
    cand = None
    if x is not None and candidates is not None:
        cand = _candidates_u8(candidates, x.shape[0], pal.shape[0])  # type: ignore[union-attr]
        x = None if cand is None else x
    if x is None:
        from icl.ops.palette import nearest_palette as front

        return front(images, palette, candidates, backend=backend)
    out = native().nearest_palette(np.ascontiguousarray(x), pal, cand)
    record_backend("nearest_palette", "cpu")
    return out[0] if images.ndim == 3 else out


def turbo_encode(depth: Any, d_min: float, d_max: float, *, backend: Optional[str] = None) -> Any:
    """Turbo colour per depth value: float ``[..., H, W]`` -> uint8 ``[..., H, W, 3]``, as
    :func:`icl.ops.turbo.turbo_encode` (its documentation holds); numpy in, numpy out."""
    from icl.ops._turbo_table import check_range, turbo_table

    if (type(depth) is not np.ndarray or depth.dtype not in (np.float32, np.float64) or depth.ndim < 2
            or not _host_backend(backend)):
        from icl.ops.turbo import turbo_encode as front

        return front(depth, d_min, d_max, backend=backend)
    lo, hi = check_range(d_min, d_max)
    flat = np.ascontiguousarray(depth, np.float64).reshape(-1)
    out = native().turbo_encode(flat, lo, hi, turbo_table()).reshape(*depth.shape, 3)
    record_backend("turbo_encode", "cpu")
    return out


def _turbo_images(images: Any, backend: Optional[str]) -> Optional[np.ndarray]:
    """uint8 ``[B, H, W, 3]`` the turbo kernels read as it is, else None (the torch front end)."""
    if (type(images) is not np.ndarray or images.dtype != np.uint8 or images.ndim not in (3, 4)
            or images.shape[-1] != 3 or not _host_backend(backend)):
        return None
    return np.ascontiguousarray(images if images.ndim == 4 else images[None])


def turbo_bins(images: Any, *, backend: Optional[str] = None) -> Any:
    """Index of the nearest turbo colour per pixel, as :func:`icl.ops.turbo.turbo_bins`; numpy
    in, numpy out."""
    from icl.ops._turbo_table import turbo_table

    x = _turbo_images(images, backend)
    if x is None:
        from icl.ops.turbo import turbo_bins as front

        return front(images, backend=backend)
    out = native().turbo_bins(x, turbo_table())
    record_backend("turbo_bins", "cpu")
    return out[0] if images.ndim == 3 else out


def turbo_decode(images: Any, d_min: float, d_max: float, *, backend: Optional[str] = None) -> Any:
    """Depth per pixel of a turbo image, as :func:`icl.ops.turbo.turbo_decode`; numpy in, numpy out."""
    from icl.ops._turbo_table import check_range, depth_of_bin, turbo_table

    lo, hi = check_range(d_min, d_max)
    x = _turbo_images(images, backend)
    if x is None:
        from icl.ops.turbo import turbo_decode as front

        return front(images, lo, hi, backend=backend)
    out = native().turbo_decode(x, turbo_table(), depth_of_bin(lo, hi))
    record_backend("turbo_decode", "cpu")
    return out[0] if images.ndim == 3 else out


def _ids(x: Any, n: int) -> Optional[np.ndarray]:
    if type(x) is not np.ndarray or x.dtype.kind not in "iu" or x.shape != (n,):
        return None
    return np.ascontiguousarray(x, dtype=np.int64)


def average_precision(pred_boxes: Any, pred_scores: Any, pred_image: Any, gt_boxes: Any, gt_image: Any,
                      iou_threshold: float = 0.5, interpolation: str = "all", *,
                      max_detections: Optional[int] = None, backend: Optional[str] = None) -> float:
    """AP of scored detections against GT boxes, pooled over images, as
    :func:`icl.ops.average_precision.average_precision` (its documentation holds)."""
    fast = (interpolation in INTERPOLATIONS and _valid_boxes(pred_boxes) and _valid_boxes(gt_boxes)
            and type(pred_scores) is np.ndarray and pred_scores.dtype.kind == "f"
            and pred_scores.shape == (pred_boxes.shape[0],) and not bool(np.isnan(pred_scores).any())
            and _real(iou_threshold) and 0.0 <= float(iou_threshold) <= 1.0
            and (max_detections is None or (type(max_detections) is int and max_detections >= 1))
            and _host_backend(backend))
    pi = _ids(pred_image, pred_boxes.shape[0]) if fast else None
    gi = _ids(gt_image, gt_boxes.shape[0]) if fast else None
    if pi is None or gi is None:
        from icl.ops.average_precision import average_precision as front

        return front(pred_boxes, pred_scores, pred_image, gt_boxes, gt_image, iou_threshold, interpolation,
                     max_detections=max_detections, backend=backend)
    f64 = [np.ascontiguousarray(x, dtype=np.float64) for x in (pred_boxes, pred_scores, gt_boxes)]
    ap = native().average_precision(f64[0], f64[1], pi, f64[2], gi, float(iou_threshold), max_detections or 0,
                                    INTERPOLATIONS.index(interpolation), COCO_RECALL_THRESHOLDS)
    record_backend("average_precision", "cpu")
    return float(ap)
