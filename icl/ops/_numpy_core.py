"""The numpy-only pieces that both the numpy path (``icl.ops._host``) and the ops' torch front
ends use: the connected-components result type, redness in numpy, average precision's recall
thresholds. A leaf module (numpy alone), so neither side imports the other for them."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Components(NamedTuple):
    """Labels and per-component statistics; components flattened over the batch in (image, label) order."""

    labels: Any  # int32 [B, H, W]: 0 background, 1..n in raster order of each component's first pixel
    num: Any  # int64 [B]: components per image
    image: Any  # int64 [N]: image of each component
    area: Any  # int64 [N]
    box: Any  # int32 [N, 4]: x0, y0, x1, y1 (x1, y1 exclusive)
    value_sum: Any  # float32 [N] or None
    value_mean: Any  # float32 [N] or None
    argmax: Any  # int64 [N, 2]: (y, x) of the max value, first in raster order on ties; or None


def redness_numpy(images: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """``S = clip(R - max(G, B), 0, 1)`` of uint8 ``[..., 3]`` images on levels / 255 in float32,
    and ``S > threshold`` (compared in float32, as torch compares with a Python float): the
    reference backend's operations, so the same bits. S <= 1 always (R / 255 <= 1, the max >= 0),
    so only the lower clip can act."""
    x = images.astype(np.float32)
    x /= np.float32(255.0)
    s = x[..., 0] - np.maximum(x[..., 1], x[..., 2])
    np.maximum(s, np.float32(0.0), out=s)
    return s, s > np.float32(threshold)


#: pycocotools' ``recThrs`` (``np.linspace(0, 1, 101)``) and the interpolations of average_precision
COCO_RECALL_THRESHOLDS = np.linspace(0.0, 1.0, 101)
INTERPOLATIONS = ("all", "coco101")
