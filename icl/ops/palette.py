"""Nearest palette colour per pixel (PROTOCOL §1.3, segmentation decoding)."""

from __future__ import annotations

from typing import Any, Optional, overload

import numpy as np
import torch

from icl.ops._dispatch import native, op
from icl.ops._tensor import (ArrayLike, NDArray, as_tensor, batch_images, check_quantisable, call_op, custom_op, restore_one,
                             to_uint8)

_OP = op("nearest_palette", gpu_module="icl.ops._gpu.palette")

_CHUNK = 1 << 16  # pixels per block in the reference (block x P distances in memory)


@_OP.register("reference")
def nearest_palette_reference(images: torch.Tensor, palette: torch.Tensor, candidates: Optional[torch.Tensor]) -> torch.Tensor:
    batch, height, width, _ = images.shape
    pal = palette.to(torch.float64)
    # |x - p|^2 = |x|^2 - 2 x.p + |p|^2, and |x|^2 is the same for every colour. Every term is
    # an integer below 2^53, so float64 is exact, and argmin returns the first minimum: ties
    # go to the lower palette index.
    norms = (pal * pal).sum(1)
    flat = images.reshape(batch, height * width, 3)
    out = torch.empty((batch, height * width), dtype=torch.int32, device=images.device)
    for b in range(batch):
        bias = norms if candidates is None else norms.masked_fill(~candidates[b], float("inf"))
        for start in range(0, height * width, _CHUNK):
            x = flat[b, start : start + _CHUNK].to(torch.float64)
            out[b, start : start + _CHUNK] = (bias - 2.0 * (x @ pal.T)).argmin(1).to(torch.int32)
    return out.reshape(batch, height, width)


@_OP.register("cpu")
def _cpu(images: torch.Tensor, palette: torch.Tensor, candidates: Optional[torch.Tensor]) -> torch.Tensor:
    _C = native()
    cand = None if candidates is None else candidates.numpy().view(np.uint8)
    return torch.from_numpy(_C.nearest_palette(images.numpy(), palette.numpy(), cand))


def _check_palette(palette: Any, device: torch.device) -> torch.Tensor:
    """``palette`` as a ``[P, 3]`` integer tensor on ``device``: integer dtypes (or a nested
    list of ints), 1 <= P <= 256. The values (0..255) are checked by :func:`_palette_values`."""
    if isinstance(palette, (list, tuple, np.ndarray)):
        palette = np.array(palette)  # a small copy; read-only arrays (TURBO_TABLE) are fine
    pal, _ = as_tensor(palette, "palette")
    if pal.dtype == torch.bool or pal.is_floating_point() or pal.is_complex():
        raise TypeError(f"palette: expected an integer dtype with values in 0..255, got {pal.dtype}")
    if pal.ndim != 2 or pal.shape[1] != 3:
        raise ValueError(f"palette: expected shape [P, 3], got {tuple(pal.shape)}")
    if not 1 <= pal.shape[0] <= 256:
        raise ValueError(f"palette: expected 1 to 256 colours, got {pal.shape[0]}")
    return pal.detach().to(device=device)


def _palette_values(pal: torch.Tensor) -> torch.Tensor:
    """Contiguous uint8 ``[P, 3]``; values outside 0..255 raise (a data check, run in the op)."""
    if pal.dtype != torch.uint8 and (int(pal.min()) < 0 or int(pal.max()) > 255):
        raise ValueError(f"palette: values must lie in 0..255, got {int(pal.min())}..{int(pal.max())}")
    return pal.to(torch.uint8).contiguous()


def _check_candidates(candidates: Any, batch: int, colours: int, device: torch.device) -> Optional[torch.Tensor]:
    if candidates is None:
        return None
    cand, _ = as_tensor(candidates, "candidates")
    if cand.dtype != torch.bool:
        raise TypeError(f"candidates: expected a bool mask, got {cand.dtype}")
    if cand.ndim == 1 and cand.shape[0] == colours:
        cand = cand.unsqueeze(0).expand(batch, colours)
    elif cand.ndim != 2 or tuple(cand.shape) != (batch, colours):
        raise ValueError(f"candidates: expected shape [{batch}, {colours}] or [{colours}], got {tuple(cand.shape)}")
    return cand.detach().to(device)


def _candidate_rows(cand: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """Contiguous candidates; an image without any raises (a data check, run in the op)."""
    if cand is None:
        return None
    empty = (~cand.any(1)).nonzero()
    if len(empty):
        raise ValueError(f"candidates: image {int(empty[0, 0])} has no candidate colour")
    return cand.contiguous()


def _nearest_palette_impl(images: torch.Tensor, palette: torch.Tensor, candidates: Optional[torch.Tensor],
                          backend: Optional[str]) -> torch.Tensor:
    x = to_uint8(images, "images").contiguous()
    out: torch.Tensor = _OP(x.device.type, x, _palette_values(palette), _candidate_rows(candidates), backend=backend)
    return out


_nearest_palette_op = custom_op("nearest_palette")(_nearest_palette_impl)


@_nearest_palette_op.register_fake
def _nearest_palette_fake(images: torch.Tensor, palette: torch.Tensor, candidates: Optional[torch.Tensor],
                          backend: Optional[str]) -> torch.Tensor:
    return images.new_empty(images.shape[:3], dtype=torch.int32)


@overload
def nearest_palette(images: NDArray, palette: Any, candidates: Any = None, *,
                    backend: Optional[str] = None) -> NDArray: ...
@overload
def nearest_palette(images: torch.Tensor, palette: Any, candidates: Any = None, *,
                    backend: Optional[str] = None) -> torch.Tensor: ...
def nearest_palette(images: ArrayLike, palette: Any, candidates: Any = None, *,
                    backend: Optional[str] = None) -> ArrayLike:
    """The torch front end of ``icl.ops.nearest_palette`` (documented there): tensors, and the numpy calls
    ``icl.ops._host`` hands over."""
    x, was_numpy = as_tensor(images, "images")
    x, single = batch_images(x, "images")
    check_quantisable(x, "images")
    x = x.detach()
    pal = _check_palette(palette, x.device)
    cand = _check_candidates(candidates, x.shape[0], pal.shape[0], x.device)
    out = call_op("nearest_palette", x, pal, cand, backend)
    return restore_one(out[0] if single else out, was_numpy)
