"""The tensor path of :meth:`icl.benchmarks.vibe.tasks.base.Task.evaluate`: predictions stay on their device.

Predictions given as torch tensors (or numpy arrays with an explicit ``device``) are validated
and turned into uint8 on that device, stacked into ``[B, H, W, 3]`` batches of one size, and
decoded and scored there through :mod:`icl.ops`, one kernel call per batch. Per-pixel work
ends in small per-sample numbers (counts, sums, components), which are the only things that
come back to the host, where the task finishes its score with the same formulas as the numpy
path. Validation and rounding follow :func:`icl.benchmarks.vibe.tasks.base.validate_prediction` exactly
(float outputs are clipped to [0, 1] and rounded in float64, as on the host).

Resizing on the device: label maps with :func:`resize_nearest`'s index rule (exact); images
with ``F.interpolate(mode="bilinear", align_corners=False, antialias=False)`` in float32,
rounded half to even. The numpy path resizes images with OpenCV's fixed-point
``INTER_LINEAR``, so a resized image can differ from it by one level per channel, and image
metrics of resized predictions by the corresponding small amount.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from icl.benchmarks.vibe.tasks.errors import PredictionError, is_tensor


def groups_by(keys: Iterable[Hashable]) -> dict[Hashable, list[int]]:
    """Indices grouped by key, keys and indices in first-seen order."""
    out: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return out


@dataclass
class DeviceBatch:
    """Validated predictions: ``groups`` of (indices into the batch, uint8 ``[b, H, W, 3]`` on
    ``device``), one group per prediction size, indices ascending within a group."""

    device: torch.device
    groups: list[tuple[list[int], torch.Tensor]]
    size: int

    def shapes(self) -> list[tuple[int, int]]:
        """(h, w) of every prediction, by index."""
        out: list[tuple[int, int]] = [(0, 0)] * self.size
        for idx, x in self.groups:
            for i in idx:
                out[i] = (int(x.shape[1]), int(x.shape[2]))
        return out

    def host(self) -> list[np.ndarray]:
        """Every prediction as a uint8 numpy array (the fallback for tasks without a tensor path)."""
        out: list[Optional[np.ndarray]] = [None] * self.size
        for idx, x in self.groups:
            arr = x.cpu().numpy()
            for j, i in enumerate(idx):
                out[i] = arr[j]
        return out  # type: ignore[return-value]


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _all_finite(x: torch.Tensor) -> torch.Tensor:
    """Per sample of a float batch: whether every value is finite, as float64 [b]."""
    return torch.isfinite(x.reshape(x.shape[0], -1)).all(1).double()


def validate_tensors(predictions: Any, device: Any = None) -> DeviceBatch:
    """Validate a batch on the device (see the module docstring). ``device``: where to work;
    None means the device of the first tensor. Raises :class:`PredictionError` for the lowest
    invalid index, with the numpy path's messages."""
    # a [B, H, W, 3] tensor is a batch already: validated and kept without restacking
    whole = predictions if is_tensor(predictions) and predictions.ndim == 4 and predictions.shape[-1] == 3 else None
    items: Sequence[Any] = [] if whole is not None else list(predictions)
    if device is None:
        first = whole if whole is not None else next((p for p in items if is_tensor(p)), None)
        device = first.device if first is not None else "cpu"
    dev = torch.device(device)
    errors: dict[int, str] = {}
    parts: list[tuple[list[int], torch.Tensor]] = []
    if whole is not None:
        n = int(whole.shape[0])
        if whole.shape[1] < 1 or whole.shape[2] < 1:
            raise PredictionError(0, f"empty image of shape {tuple(whole.shape[1:])}")
        parts.append((list(range(n)), whole.detach().to(dev)))
    else:
        n = len(items)
        keyed: dict[tuple[tuple[int, ...], bool, str], list[int]] = {}  # (shape, is a tensor, dtype)
        for i, p in enumerate(items):
            if not (is_tensor(p) or isinstance(p, np.ndarray)):
                errors[i] = f"expected a numpy array or torch tensor, got {type(p).__name__}"
            elif p.ndim != 3 or p.shape[2] != 3:
                errors[i] = f"expected shape [h, w, 3], got {tuple(p.shape)}"
            elif p.shape[0] < 1 or p.shape[1] < 1:
                errors[i] = f"empty image of shape {tuple(p.shape)}"
            else:
                keyed.setdefault((tuple(p.shape), is_tensor(p), str(p.dtype)), []).append(i)
        for (_, tensor, _), idx in keyed.items():
            if tensor:
                parts.append((idx, torch.stack([items[i].detach().to(dev) for i in idx])))
            else:  # numpy predictions of one shape cross to the device in one copy
                host = torch.from_numpy(np.stack([items[i] for i in idx]))
                parts.append((idx, host.to(dev)))
    checked: list[tuple[list[int], torch.Tensor]] = []
    stats: list[tuple[list[int], torch.Tensor]] = []
    for idx, x in parts:
        if x.dtype == torch.uint8:
            checked.append((idx, x))
        elif not x.is_floating_point():
            for i in idx:
                errors[i] = f"expected uint8 or float, got dtype {_dtype_name(x.dtype)}"
        else:
            stats.append((idx, _all_finite(x)))
            checked.append((idx, x))
    if stats:  # one transfer for the value checks of the whole batch
        values = torch.cat([s for _, s in stats]).cpu().numpy()
        row = 0
        for idx, _ in stats:
            for i in idx:
                if not values[row]:
                    errors[i] = "contains NaN or infinite values"
                row += 1
    if errors:
        first_bad = min(errors)
        raise PredictionError(first_bad, errors[first_bad])
    groups: dict[tuple[int, int], list[tuple[list[int], torch.Tensor]]] = {}
    for idx, x in checked:
        if x.dtype != torch.uint8:  # rint(255 clip(x, 0, 1)) in float64, half to even (np.rint, torch.round)
            x = torch.round(x.double().clamp(0.0, 1.0) * 255.0).to(torch.uint8)
        groups.setdefault((int(x.shape[1]), int(x.shape[2])), []).append((idx, x))
    out = []
    for members in groups.values():
        if len(members) == 1:
            idx, x = members[0]
        else:
            idx = [i for m, _ in members for i in m]
            x = torch.cat([t for _, t in members])
        order = sorted(range(len(idx)), key=idx.__getitem__)
        if order != list(range(len(idx))):
            x = x[torch.tensor(order, device=x.device)]
            idx = [idx[j] for j in order]
        out.append((idx, x.contiguous()))
    return DeviceBatch(dev, out, n)


def to_device(arrays: Sequence[Any], device: torch.device) -> torch.Tensor:
    """Same-shape arrays (numpy or tensors) stacked into one tensor on ``device``; numpy arrays
    cross in one copy."""
    if all(is_tensor(a) for a in arrays):
        return torch.stack([a.to(device) for a in arrays])
    host = np.stack([a.cpu().numpy() if is_tensor(a) else np.asarray(a) for a in arrays])
    return torch.from_numpy(host).to(device)


def nearest_index(src: int, dst: int) -> np.ndarray:
    """:func:`icl.benchmarks.vibe.tasks.base.resize_nearest`'s source index per destination index."""
    return np.minimum(((np.arange(dst) + 0.5) * src / dst).astype(np.int64), src - 1)


def resize_nearest_t(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Nearest-neighbour resize of ``[B, h, w, ...]`` maps to ``size`` (h, w), exactly the
    index rule of :func:`icl.benchmarks.vibe.tasks.base.resize_nearest`. Any dtype."""
    h, w = size
    sh, sw = int(x.shape[1]), int(x.shape[2])
    if (sh, sw) == (h, w):
        return x
    rows = torch.from_numpy(nearest_index(sh, h)).to(x.device)
    cols = torch.from_numpy(nearest_index(sw, w)).to(x.device)
    return x.index_select(1, rows).index_select(2, cols)


def resize_bilinear_t(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear resize of uint8 ``[B, h, w, 3]`` images to ``size`` (h, w), no antialias, in
    float32, rounded half to even. Within one level of OpenCV's ``INTER_LINEAR``."""
    h, w = size
    if tuple(x.shape[1:3]) == (h, w):
        return x
    y = F.interpolate(x.permute(0, 3, 1, 2).float(), size=(h, w), mode="bilinear", align_corners=False,
                      antialias=False)
    return torch.round(y).clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def split(idx: list[int], x: torch.Tensor, keys: Sequence[Hashable]) -> list[tuple[list[int], torch.Tensor]]:
    """Rows of ``x`` (sample ``idx[j]`` in row ``j``) grouped by ``keys[idx[j]]``: (indices, rows)."""
    out = []
    for _, local in groups_by(keys[i] for i in idx).items():
        sub = x if len(local) == len(idx) else x[torch.tensor(local, device=x.device)]
        out.append(([idx[j] for j in local], sub))
    return out


def by_target_size(batch: DeviceBatch, sizes: Sequence[tuple[int, ...]]) -> list[tuple[list[int], torch.Tensor]]:
    """Every prediction group split further by target size: (indices, ``[b, H, W, 3]`` rows)."""
    keys = [tuple(s) for s in sizes]
    return [part for idx, x in batch.groups for part in split(idx, x, keys)]


def fetch(parts: list[tuple[list[int], torch.Tensor]]) -> list[tuple[list[int], np.ndarray]]:
    """Per-group device results (rows per sample, one dtype) brought to the host in one transfer."""
    if not parts:
        return []
    host = torch.cat([t for _, t in parts]).cpu().numpy()
    out, row = [], 0
    for idx, _ in parts:
        out.append((idx, host[row:row + len(idx)]))
        row += len(idx)
    return out
