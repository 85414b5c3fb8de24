"""Shared pieces of the visual in-context adapters: request checks, resizing, canvases and
grouping of requests by size (so same-size canvases are stacked into one batch)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable, Sequence

import cv2
import numpy as np

from icl.models.requests import AnalogyRequest


def host_image(image: Any) -> np.ndarray:
    """A request image as a uint8 ``[H, W, 3]`` numpy array (torch tensors are copied to the host)."""
    if hasattr(image, "detach"):
        image = image.detach().cpu().numpy()
    return np.ascontiguousarray(image)


def _check_image(image: Any, what: str, model: str, req: AnalogyRequest) -> None:
    shape = tuple(getattr(image, "shape", ()))
    dtype = str(getattr(image, "dtype", type(image).__name__))
    if len(shape) != 3 or shape[2] != 3 or shape[0] < 1 or shape[1] < 1 or "uint8" not in dtype:
        raise ValueError(f"{model}: {what} of request {req.task}/{req.dataset}/{req.query_id} must be a uint8 "
                         f"[H, W, 3] image, got {dtype} of shape {shape}")


def check_analogy(req: AnalogyRequest, model: str) -> None:
    """Raise ``ValueError`` naming the request when it has no context or an image is malformed."""
    if not isinstance(req, AnalogyRequest):
        raise TypeError(f"{model}: expected an AnalogyRequest, got {type(req).__name__}")
    if req.shots < 1 or len(req.context_outputs) != req.shots:
        raise ValueError(f"{model}: request {req.task}/{req.dataset}/{req.query_id} needs at least one context "
                         f"pair, got {len(req.context_inputs)} inputs and {len(req.context_outputs)} outputs")
    _check_image(req.query, "the query", model, req)
    for k, (x, y) in enumerate(zip(req.context_inputs, req.context_outputs)):
        _check_image(x, f"context input {k}", model, req)
        _check_image(y, f"context output {k}", model, req)


def resize_area(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize to ``(h, w)``: area averaging when shrinking, bilinear when enlarging (OpenCV)."""
    h, w = size
    if image.shape[:2] == (h, w):
        return image
    shrink = h <= image.shape[0] and w <= image.shape[1]
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def resize_pil(image: Any, size: tuple[int, int], mode: str = "bicubic") -> np.ndarray:
    """A uint8 image resized to ``size`` (h, w) as PIL's ``Image.resize(..., BICUBIC)`` (or
    ``BILINEAR``) does (the official Painter, LVM and DeLVM preprocessing): antialiased filter,
    horizontal pass first, each pass rounded half up and clipped to uint8. Computed in float64
    with torch, it equals PIL within 1 grey level (PIL rounds its weights to 22-bit integers);
    float32, or one pass without the intermediate clip, differs by up to 20 when enlarging."""
    import torch
    import torch.nn.functional as F

    h, w = size
    # the float64 copy made in numpy: a read-only request image (the guard's copies) is never
    # wrapped by torch, which warns about non-writable arrays
    x = torch.from_numpy(host_image(image).astype(np.float64)).permute(2, 0, 1)[None]
    for target in ((x.shape[2], w), (h, w)):
        if tuple(x.shape[2:]) != target:
            x = F.interpolate(x, size=target, mode=mode, antialias=True, align_corners=False)
            x = (x + 0.5).floor().clamp(0, 255)
    return x[0].permute(1, 2, 0).to(torch.uint8).numpy()


def resize_short_side(h: int, w: int, side: int) -> tuple[int, int]:
    """torchvision ``Resize(side)``: the shorter side becomes ``side``, the longer
    ``int(side * long / short)``."""
    if h <= w:
        return side, int(side * w / h)
    return int(side * h / w), side


def centre_crop(image: np.ndarray, side: int) -> np.ndarray:
    """torchvision ``CenterCrop(side)`` of an image at least ``side`` on both axes."""
    h, w = image.shape[:2]
    top, left = int(round((h - side) / 2.0)), int(round((w - side) / 2.0))
    return image[top:top + side, left:left + side]


def resize_nearest(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize to ``(h, w)`` with OpenCV nearest neighbour (keeps label colours exact)."""
    h, w = size
    if image.shape[:2] == (h, w):
        return image
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_NEAREST)


def resize_bilinear(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize to ``(h, w)`` with OpenCV bilinear interpolation."""
    h, w = size
    if image.shape[:2] == (h, w):
        return image
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)


def group_by(items: Sequence[Any], key: Callable[[Any], Hashable]) -> "OrderedDict[Hashable, list[int]]":
    """Indices of ``items`` grouped by ``key`` (groups in first-seen order, indices ascending)."""
    groups: "OrderedDict[Hashable, list[int]]" = OrderedDict()
    for i, item in enumerate(items):
        groups.setdefault(key(item), []).append(i)
    return groups
