"""Training-free image analogies (Hertzmann et al. 2001, "Image Analogies"): A : A' :: B : B'.

B' is synthesised coarse to fine over Gaussian pyramids. At each level a nearest-neighbour
field from B's patches to A's patches (:func:`icl.ops.patch_match`, with Hertzmann's coherence
``kappa``) picks, for every pixel of B', the A' pixel at its match. The search features are
the input images (A against B) and, below the coarsest level, the outputs of the coarser level
enlarged to this one (A' against the B' synthesised there, weighted by ``output_weight``), as
Hertzmann's coarse-level neighbourhood term. The field found at one level, upsampled, starts
the search at the next. Every B' pixel is copied from A' (never averaged), so label-like
outputs (segmentation colours, edge maps) keep the context's exact colours.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from icl.data.seeds import ANY, derive_seed
from icl.models.base import Adapter
from icl.models.builtin import as_output
from icl.models.requests import AnalogyRequest
from icl.models.vicl.canvas import check_analogy, host_image, resize_area, resize_bilinear, resize_nearest


def pyramid(image: np.ndarray, levels: int, nearest: bool) -> list[np.ndarray]:
    """``levels`` images, finest first, each half (rounded up) the size of the one before;
    area averaging, or nearest neighbour for label-like images."""
    out = [image]
    for _ in range(levels - 1):
        h, w = out[-1].shape[:2]
        size = ((h + 1) // 2, (w + 1) // 2)
        out.append(resize_nearest(out[-1], size) if nearest else resize_area(out[-1], size))
    return out


def upsample_field(nnf: np.ndarray, size: tuple[int, int], source_size: tuple[int, int]) -> np.ndarray:
    """A coarse field ``[h, w, 2]`` as a field on a target of ``size`` into a source of
    ``source_size`` (both twice the coarse size, up to rounding): fine pixel ``(y, x)`` starts
    at ``2 * nnf[y // 2, x // 2] + (y % 2, x % 2)``, clipped to the source."""
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w]
    coarse = nnf[np.minimum(yy // 2, nnf.shape[0] - 1), np.minimum(xx // 2, nnf.shape[1] - 1)]
    sy = np.clip(2 * coarse[..., 0] + yy % 2, 0, source_size[0] - 1)
    sx = np.clip(2 * coarse[..., 1] + xx % 2, 0, source_size[1] - 1)
    return np.stack([sy, sx], -1).astype(np.int32)


def gather(image: np.ndarray, nnf: np.ndarray) -> np.ndarray:
    """``image[nnf[..., 0], nnf[..., 1]]``: one source pixel per target pixel."""
    return image[nnf[..., 0], nnf[..., 1]]


class ImageAnalogies(Adapter):
    """Hertzmann et al.'s image analogies with PatchMatch fields (module docstring).

    K-shot: every context pair is used. Each pair is resized to the query's working size and
    the pairs are tiled left to right into one source mosaic (A | A | ...) and (A' | A' | ...),
    so any pixel of B' may come from any context output. Weight-free: no files to load.

    Model arguments: ``patch_size`` (odd), ``levels`` (most pyramid levels; fewer when the
    coarsest side would fall below 16 px), ``iterations`` (PatchMatch iterations per search),
    ``searches`` (searches per level, each refining B'), ``kappa`` (coherence at the finest
    level, scaled by ``2 ** (level - finest)`` as in the paper), ``output_weight`` (weight of
    the A'/B' features), ``max_side`` (the query is processed at most this large).
    """

    name = "image-analogies"
    version = "1"
    batch_size = 8
    shots_policy = "all K pairs, resized to the query and tiled into one source mosaic (A|A|..., A'|A'|...)"

    def __init__(self, patch_size: int = 5, levels: int = 3, iterations: int = 4, searches: int = 2,
                 kappa: float = 0.5, output_weight: float = 1.0, max_side: int = 256):
        if patch_size < 1 or patch_size % 2 == 0:
            raise ValueError(f"image-analogies: patch_size must be a positive odd integer, got {patch_size}")
        for arg, value in (("levels", levels), ("iterations", iterations), ("searches", searches),
                           ("max_side", max_side)):
            if value < 1:
                raise ValueError(f"image-analogies: {arg} must be >= 1, got {value}")
        if kappa < 0 or output_weight < 0:
            raise ValueError(f"image-analogies: kappa and output_weight must be >= 0, got {kappa}, {output_weight}")
        self.patch_size = patch_size
        self.levels = levels
        self.iterations = iterations
        self.searches = searches
        self.kappa = kappa
        self.output_weight = output_weight
        self.max_side = max_side

    def working_size(self, query_shape: Sequence[int]) -> tuple[int, int]:
        """The query's size, scaled down (aspect kept) so that its longer side is at most ``max_side``."""
        h, w = int(query_shape[0]), int(query_shape[1])
        scale = min(1.0, self.max_side / max(h, w))
        return max(1, round(h * scale)), max(1, round(w * scale))

    def source_mosaic(self, req: AnalogyRequest, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Context inputs and outputs resized to ``size`` and tiled left to right: ``[h, K * w, 3]`` each."""
        ins = [resize_area(host_image(x), size) for x in req.context_inputs]
        outs = [resize_nearest(host_image(x), size) for x in req.context_outputs]
        return np.concatenate(ins, axis=1), np.concatenate(outs, axis=1)

    def analogy(self, req: AnalogyRequest) -> np.ndarray:
        """B' for one request: uint8 ``[h, w, 3]`` at the working size."""
        from icl.ops.patch_match import patch_match

        check_analogy(req, self.name)
        size = self.working_size(req.query.shape)
        a, a_out = self.source_mosaic(req, size)
        b = resize_area(host_image(req.query), size)
        n_levels = 1
        while n_levels < self.levels and min(size) / 2 ** n_levels >= 16:
            n_levels += 1
        pa, pa_out, pb = pyramid(a, n_levels, False), pyramid(a_out, n_levels, True), pyramid(b, n_levels, False)
        nnf = None
        b_out = np.zeros(0, np.uint8)
        for level in range(n_levels - 1, -1, -1):
            fa = pa[level].astype(np.float32) / 255
            fb = pb[level].astype(np.float32) / 255
            src, tgt = fa, fb
            if nnf is not None:
                # output features: A' and B' of the coarser level, enlarged (Hertzmann's l-1 term;
                # this level's own B' would only vote for itself)
                w = self.output_weight / 255
                fa_out = resize_bilinear(pa_out[level + 1], fa.shape[:2]).astype(np.float32) * w
                fb_out = resize_bilinear(b_out, fb.shape[:2]).astype(np.float32) * w
                src, tgt = np.concatenate([fa, fa_out], -1), np.concatenate([fb, fb_out], -1)
                nnf = upsample_field(nnf, fb.shape[:2], fa.shape[:2])
            kappa = self.kappa * 2.0 ** (-level)
            for step in range(self.searches):
                seed = derive_seed(req.seed, req.dataset, ANY, req.query_id, f"image-analogies/{level}/{step}")
                nnf, _ = patch_match(src, tgt, patch_size=self.patch_size, iterations=self.iterations,
                                     init=nnf, kappa=kappa, seed=seed)
            assert nnf is not None  # searches >= 1 (__init__)
            b_out = gather(pa_out[level], nnf)
        return np.ascontiguousarray(b_out)

    def predict(self, requests: Sequence[AnalogyRequest]) -> list[Any]:
        return [as_output(self.analogy(req), self.precision) for req in requests]
