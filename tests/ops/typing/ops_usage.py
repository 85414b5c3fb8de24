"""Checked by ``mypy --strict`` in ``make test`` (never run): the public kernels are typed
as users call them: ``icl.ops.ssim`` is the function (not the module), numpy in gives numpy
out and Tensor in gives Tensor out."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

import icl.ops
from icl.ops import Components, box_iou, lpips, nearest_palette, psnr, ssim, turbo_decode


def tensors(a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    labels: torch.Tensor = nearest_palette(a, [[0, 0, 0], [255, 255, 255]])
    comp: Components = icl.ops.connected_components(a[..., 0] > 0)
    return [icl.ops.ssim(a, b, 1.0), psnr(a, b, 1.0), lpips(a, b), box_iou(a[0, :, :4], b[0, :, :4]),
            turbo_decode(a, 0.5, 10.0), labels, icl.ops.redness(a)[1], comp.labels]


def arrays(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8]) -> list[npt.NDArray[np.float64]]:
    return [ssim(a, b), psnr(a, b), icl.ops.turbo_bins(a), icl.ops.turbo_encode(a.astype(float), 0.0, 1.0)]
