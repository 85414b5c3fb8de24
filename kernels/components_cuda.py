"""GPU connected components with statistics, in numba.cuda (union-find with atomics).

kernel -> launcher -> (public function in ``icl.ops.components``).

The batch is labelled as one flat raster (image-major), and neighbours never cross images.
Unions always hang the larger root under the smaller one (compare-and-swap), so each
component's final root is its smallest flat index: its first pixel in raster order. Numbering
roots by a prefix sum therefore yields labels in raster order of first pixels, per image, and
component ids in (image, label) order over the batch, as the CPU backend returns them.
Statistics are one pass of atomics: area, box, value sum, and the argmax as an int64 key
``(order-preserving float bits << 31) | (2^31 - 1 - pixel index)`` under ``atomic.max``, so
ties go to the first pixel in raster order.

Tested on the CPU with ``NUMBA_ENABLE_CUDASIM=1`` (numpy arrays stand in for device arrays).
"""

from __future__ import annotations

import torch
from numba import cuda, float64

THREADS = 256
_INDEX_BITS = 31


@cuda.jit(device=True)
def _find(parent, x):
    while True:
        p = parent[x]
        if p == x:
            return x
        x = p


@cuda.jit(device=True)
def _union(parent, a, b):
    while True:
        a = _find(parent, a)
        b = _find(parent, b)
        if a == b:
            return
        if a < b:
            a, b = b, a
        old = cuda.atomic.cas(parent, a, a, b)
        if old == a:
            return
        a = old


@cuda.jit
def _init_kernel(mask, parent):
    i = cuda.grid(1)
    if i < mask.size:
        parent[i] = i if mask[i] != 0 else -1


@cuda.jit
def _merge_kernel(mask, parent, height, width, eight):
    i = cuda.grid(1)
    if i >= mask.size or mask[i] == 0:
        return
    x = i % width
    y = (i // width) % height
    if x > 0 and mask[i - 1] != 0:
        _union(parent, i, i - 1)
    if y > 0:
        up = i - width
        if mask[up] != 0:
            _union(parent, i, up)
        if eight:
            if x > 0 and mask[up - 1] != 0:
                _union(parent, i, up - 1)
            if x + 1 < width and mask[up + 1] != 0:
                _union(parent, i, up + 1)


@cuda.jit
def _compress_kernel(parent, is_root):
    i = cuda.grid(1)
    if i < parent.size:
        if parent[i] >= 0:
            r = _find(parent, i)
            parent[i] = r
            is_root[i] = 1 if r == i else 0
        else:
            is_root[i] = 0


@cuda.jit
def _label_stats_kernel(parent, rank, image_first, labels, height, width,
                        area, box, value_sum, values, keys, best_key, has_values):
    i = cuda.grid(1)
    if i >= parent.size:
        return
    r = parent[i]
    if r < 0:
        labels[i] = 0
        return
    plane = height * width
    b = i // plane
    comp = rank[r] - 1  # global component id, (image, label) order
    labels[i] = comp - image_first[b] + 1
    local = i - b * plane
    x = local % width
    y = local // width
    cuda.atomic.add(area, comp, 1)
    cuda.atomic.min(box, (comp, 0), x)
    cuda.atomic.min(box, (comp, 1), y)
    cuda.atomic.max(box, (comp, 2), x + 1)
    cuda.atomic.max(box, (comp, 3), y + 1)
    if has_values:
        cuda.atomic.add(value_sum, comp, float64(values[i]))
        cuda.atomic.max(best_key, comp, keys[i])


def _argmax_keys(values: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """int64 keys whose maximum is the first raster position of the largest value."""
    values = values + 0.0  # -0.0 -> +0.0: equal values must share a key prefix
    bits = values.contiguous().view(torch.int32).reshape(-1).to(torch.int64) & 0xFFFFFFFF
    negative = bits >= 0x80000000
    ordered = torch.where(negative, 0xFFFFFFFF - bits, bits | 0x80000000)
    local = torch.arange(height * width, device=values.device, dtype=torch.int64).repeat(values.shape[0])
    return (ordered << _INDEX_BITS) | ((1 << _INDEX_BITS) - 1 - local)


def _dev(t: torch.Tensor):
    """A numba view of a torch tensor: device array on CUDA, the numpy array under the simulator."""
    return cuda.as_cuda_array(t) if t.is_cuda else t.numpy()


def connected_components_cuda(mask: torch.Tensor, connectivity: int, values: torch.Tensor | None):
    """Launcher. mask bool/uint8 [B, H, W]; values float32 [B, H, W] or None.

    Returns (labels int32 [B,H,W], num int64 [B], image, area, box, value_sum, value_mean, argmax)
    as specified by ``icl.ops.components.Components``.
    """
    bsz, height, width = mask.shape
    device = mask.device
    n = bsz * height * width
    flat_mask = mask.reshape(-1).to(torch.uint8).contiguous()
    parent = torch.empty(n, dtype=torch.int32, device=device)
    is_root = torch.empty(n, dtype=torch.int32, device=device)
    labels = torch.empty(n, dtype=torch.int32, device=device)
    blocks = max((n + THREADS - 1) // THREADS, 1)
    stream = cuda.external_stream(torch.cuda.current_stream(device).cuda_stream) if mask.is_cuda else 0
    m, p, roots = _dev(flat_mask), _dev(parent), _dev(is_root)
    if n:
        _init_kernel[blocks, THREADS, stream](m, p)
        _merge_kernel[blocks, THREADS, stream](m, p, height, width, connectivity == 8)
        _compress_kernel[blocks, THREADS, stream](p, roots)
    rank = torch.cumsum(is_root, 0, dtype=torch.int32) if n else is_root
    num = is_root.view(bsz, -1).sum(dim=1, dtype=torch.int64)
    image_first = (torch.cumsum(num, 0) - num).to(torch.int32)
    total = int(num.sum().item())
    area = torch.zeros(total, dtype=torch.int64, device=device)
    box = torch.empty((total, 4), dtype=torch.int32, device=device)
    box[:, :2] = torch.iinfo(torch.int32).max
    box[:, 2:] = -1
    has_values = values is not None
    if has_values:
        vals = values.reshape(-1).to(torch.float32).contiguous()
        keys = _argmax_keys(vals.view(bsz, height, width), height, width)
        # float64 accumulation, as the contract says: float32 atomics drift on large components
        value_sum = torch.zeros(total, dtype=torch.float64, device=device)
        best_key = torch.full((total,), -1, dtype=torch.int64, device=device)
    else:
        vals = torch.zeros(1, dtype=torch.float32, device=device)
        keys = torch.zeros(1, dtype=torch.int64, device=device)
        value_sum = torch.zeros(1, dtype=torch.float64, device=device)
        best_key = torch.zeros(1, dtype=torch.int64, device=device)
    if n:
        _label_stats_kernel[blocks, THREADS, stream](
            p, _dev(rank), _dev(image_first), _dev(labels), height, width,
            _dev(area), _dev(box), _dev(value_sum), _dev(vals), _dev(keys), _dev(best_key), has_values,
        )
    image = torch.repeat_interleave(torch.arange(bsz, device=device), num)
    out_labels = labels.view(bsz, height, width)
    if not has_values:
        return out_labels, num, image, area, box, None, None, None
    local = (1 << _INDEX_BITS) - 1 - (best_key & ((1 << _INDEX_BITS) - 1))
    argmax = torch.stack([local // width, local % width], dim=1)
    value_mean = (value_sum / area.clamp(min=1).double()).to(torch.float32)
    return out_labels, num, image, area, box, value_sum.to(torch.float32), value_mean, argmax
