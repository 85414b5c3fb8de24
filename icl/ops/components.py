"""Connected components of binary masks, with per-component area, box, value sum/mean, argmax."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from icl.ops._dispatch import native, op
from icl.ops._numpy_core import Components as Components  # re-exported: icl.ops.Components
from icl.ops._tensor import FLOAT_DTYPES, ArrayLike, as_tensor, call_op, check_finite, custom_op

_OP = op("connected_components", gpu_module="icl.ops._gpu.components")

_NEIGHBOURS = {
    4: ((-1, 0), (1, 0), (0, -1), (0, 1)),
    8: ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)),
}


def _min_labels(fg: torch.Tensor, connectivity: int) -> torch.Tensor:
    """Each foreground pixel's component as the flat index of its first pixel (raster order)."""
    b, h, w = fg.shape
    big = b * h * w
    idx = torch.arange(big, device=fg.device, dtype=torch.int64).view(b, h, w)
    lab = torch.where(fg, idx, big)
    while True:
        padded = F.pad(lab, (1, 1, 1, 1), value=big)
        low = lab
        for dy, dx in _NEIGHBOURS[connectivity]:
            low = torch.minimum(low, padded[:, 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w])
        low = torch.where(fg, low, big).reshape(-1)
        # Pointer jumping: a label is a pixel of the same component, so adopt that pixel's label.
        table = torch.cat([low, low.new_tensor([big])])
        while True:
            jumped = table[low]
            if torch.equal(jumped, low):
                break
            low = jumped
            table[:-1] = low
        low = low.view(b, h, w)
        if torch.equal(low, lab):
            return lab
        lab = low


@_OP.register("reference")
def _reference(mask: torch.Tensor, connectivity: int, values: Optional[torch.Tensor]) -> Components:
    fg = mask if mask.dtype == torch.bool else mask != 0
    b, h, w = fg.shape
    dev = fg.device
    lab = _min_labels(fg, connectivity)
    flat = lab.reshape(-1)
    pix = torch.arange(flat.numel(), device=dev)
    is_first = fg.reshape(-1) & (flat == pix)
    ordinal = is_first.view(b, h * w).cumsum(1).reshape(-1)
    fgf = fg.reshape(-1)
    labels = torch.zeros(b * h * w, dtype=torch.int32, device=dev)
    labels[fgf] = ordinal[flat[fgf]].to(torch.int32)
    labels = labels.view(b, h, w)
    num = is_first.view(b, h * w).sum(1)
    n = int(num.sum())
    image = torch.repeat_interleave(torch.arange(b, device=dev), num)
    offsets = torch.cumsum(num, 0) - num
    pos = pix[fgf]
    comp = offsets[pos // (h * w)] + labels.reshape(-1)[fgf].long() - 1  # global component id per fg pixel
    ys = (pos % (h * w)) // w
    xs = pos % w
    area = torch.bincount(comp, minlength=n)

    def reduce(src: torch.Tensor, how: str) -> torch.Tensor:
        return torch.zeros(n, dtype=src.dtype, device=dev).scatter_reduce_(0, comp, src, how, include_self=False)

    box = torch.stack([reduce(xs, "amin"), reduce(ys, "amin"), reduce(xs, "amax") + 1, reduce(ys, "amax") + 1], 1)
    box = box.to(torch.int32)
    if values is None:
        return Components(labels, num, image, area, box, None, None, None)
    check_finite(values, "values")
    v = values.reshape(-1)[fgf].double()
    total = torch.zeros(n, dtype=torch.float64, device=dev).index_add_(0, comp, v)
    vmax = reduce(v, "amax")
    hit = v == vmax[comp]
    first = reduce(torch.where(hit, pos % (h * w), h * w), "amin")
    argmax = torch.stack([first // w, first % w], 1)
    mean = total / area.clamp(min=1)
    return Components(labels, num, image, area, box, total.float(), mean.float(), argmax)


def _cpu_supports(mask: torch.Tensor, connectivity: int, values: Optional[torch.Tensor]) -> Optional[str]:
    _, h, w = mask.shape
    if h * ((w + 1) // 2) >= 2**31 - 1:
        return f"an image of {h}x{w} pixels has too many runs for int32 indices"
    return None


@_OP.register("cpu", supports=_cpu_supports)
def _cpu(mask: torch.Tensor, connectivity: int, values: Optional[torch.Tensor]) -> Components:
    """Fields are numpy arrays (the public function hands them out as torch or numpy)."""
    _C = native()
    m = mask.contiguous()
    m = m if m.dtype == torch.uint8 else m.view(torch.uint8)  # nonzero = foreground
    v = None
    if values is not None:
        v = (values if values.dtype in (torch.float32, torch.float64) else values.float()).contiguous().numpy()
    return Components(*_C.connected_components(m.numpy(), connectivity, v))


_Fields = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                torch.Tensor, torch.Tensor]


def _components_impl(mask: torch.Tensor, connectivity: int, values: Optional[torch.Tensor],
                     backend: Optional[str]) -> _Fields:
    # an op returns tensors only: without values the three value fields are empty
    out = _OP(mask.device.type, mask, connectivity, values, backend=backend)
    empty = {5: (0,), 6: (0,), 7: (0, 2)}
    fields: list[torch.Tensor] = []
    for i, field in enumerate(out):
        if field is None:
            fields.append(torch.zeros(empty[i], dtype=(torch.float32, torch.float32, torch.int64)[i - 5],
                                      device=mask.device))
        else:
            fields.append(torch.from_numpy(field) if isinstance(field, np.ndarray) else field)
    labels, num, image, area, box, value_sum, value_mean, argmax = fields
    return labels, num, image, area, box, value_sum, value_mean, argmax


_components_op = custom_op("connected_components")(_components_impl)


@_components_op.register_fake
def _components_fake(mask: torch.Tensor, connectivity: int, values: Optional[torch.Tensor],
                     backend: Optional[str]) -> _Fields:
    n = torch.library.get_ctx().new_dynamic_size()
    k = 0 if values is None else n
    new = mask.new_empty
    return (new(mask.shape, dtype=torch.int32), new((mask.shape[0],), dtype=torch.int64),
            new((n,), dtype=torch.int64), new((n,), dtype=torch.int64), new((n, 4), dtype=torch.int32),
            new((k,), dtype=torch.float32), new((k,), dtype=torch.float32), new((k, 2), dtype=torch.int64))


def connected_components(mask: ArrayLike, connectivity: int = 8, values: Optional[ArrayLike] = None, *,
                         backend: Optional[str] = None) -> Components:
    """The torch front end of ``icl.ops.connected_components`` (documented there): tensors, and the numpy calls
    ``icl.ops._host`` hands over."""
    x, was_numpy = as_tensor(mask, "mask")
    if x.dtype.is_floating_point or x.dtype.is_complex:
        raise TypeError(f"mask: expected bool or an integer dtype (nonzero = foreground), got {x.dtype}")
    if x.ndim not in (2, 3):
        raise ValueError(f"mask: expected [B, H, W] or [H, W], got shape {tuple(x.shape)}")
    if isinstance(connectivity, bool) or connectivity not in (4, 8):
        raise ValueError(f"connectivity: expected 4 or 8, got {connectivity!r}")
    m = x if x.dtype in (torch.bool, torch.uint8) else x != 0
    if m.ndim == 2:
        m = m.unsqueeze(0)
    vals = None
    if values is not None:
        vals, _ = as_tensor(values, "values")
        if vals.dtype not in FLOAT_DTYPES:
            raise TypeError(f"values: expected a float dtype, got {vals.dtype}")
        if tuple(vals.shape) != tuple(x.shape):
            raise ValueError(f"values: expected the shape of mask {tuple(x.shape)}, got {tuple(vals.shape)}")
        if vals.device != x.device:
            raise ValueError(f"values: expected a tensor on {x.device} like mask, got {vals.device}")
        vals = vals.detach().reshape(m.shape)
    fields = list(call_op("connected_components", m.detach(), int(connectivity), vals, backend))
    if values is None:
        fields[5:] = [None, None, None]
    if was_numpy:
        return Components(*(f.cpu().numpy() if isinstance(f, torch.Tensor) else f for f in fields))
    return Components(*fields)
