"""Restoration and translation tasks: inpainting, denoising, colorization, artifact removal,
modality transfer and object removal (PROTOCOL §1.2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from icl.data.dataset import DataError, DatasetMeta, Sample
from icl.data.seeds import ANY, rng
from icl.benchmarks.vibe.tasks.image import ImageTask

NOISE_SIGMA = 0.15
OUTLINE = 3  # px
OUTLINE_COLOUR = (255, 0, 0)


def inpaint_rect(sample: Sample, global_seed: int) -> tuple[float, float, float, float]:
    """Normalised (y0, x0, h, w) of the sample's inpainting rectangle: half its height and width,
    top-left drawn from ``derive_seed(global_seed, dataset, "*", id, "inpaint")``."""
    h, w = sample.image.shape[:2]
    rh, rw = h // 2, w // 2
    gen = rng(global_seed, sample.dataset, ANY, sample.id, "inpaint")
    y0 = int(gen.integers(0, h - rh + 1))
    x0 = int(gen.integers(0, w - rw + 1))
    return y0 / h, x0 / w, rh / h, rw / w


def apply_rect(image: np.ndarray, rect: tuple[float, float, float, float]) -> np.ndarray:
    """Zero the normalised rectangle ``rect`` (rounded half up to pixels) in a copy of ``image``."""
    h, w = image.shape[:2]
    y0, x0 = int(np.floor(rect[0] * h + 0.5)), int(np.floor(rect[1] * w + 0.5))
    rh, rw = int(np.floor(rect[2] * h + 0.5)), int(np.floor(rect[3] * w + 0.5))
    out = image.copy()
    out[y0 : y0 + rh, x0 : x0 + rw] = 0
    return out


def add_noise(sample: Sample, global_seed: int) -> np.ndarray:
    """``round(255 * clip(x / 255 + 0.15 N(0, 1), 0, 1))`` with the sample's "denoise" generator."""
    gen = rng(global_seed, sample.dataset, ANY, sample.id, "denoise")
    x = sample.image.astype(np.float64) / 255.0 + NOISE_SIGMA * gen.standard_normal(sample.image.shape)
    return np.rint(np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)


def to_grey(image: np.ndarray) -> np.ndarray:
    """``round(0.299 R + 0.587 G + 0.114 B)`` (exact integer arithmetic, halves rounded up) in all three channels."""
    rgb = image.astype(np.int64)
    grey = (299 * rgb[:, :, 0] + 587 * rgb[:, :, 1] + 114 * rgb[:, :, 2] + 500) // 1000
    return np.repeat(grey.astype(np.uint8)[:, :, None], 3, axis=2)


def draw_outline(image: np.ndarray, box: list[float]) -> np.ndarray:
    """A red 3 px ring just outside ``box`` (x0, y0, x1, y1; edges rounded half up), clipped to the image."""
    h, w = image.shape[:2]
    x0, y0, x1, y1 = (int(np.floor(v + 0.5)) for v in box)
    out = image.copy()
    ring = np.zeros((h, w), bool)
    ring[max(y0 - OUTLINE, 0) : max(y1 + OUTLINE, 0), max(x0 - OUTLINE, 0) : max(x1 + OUTLINE, 0)] = True
    ring[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = False
    out[ring] = OUTLINE_COLOUR
    return out


def paired_image(sample: Sample, task: str) -> tuple[np.ndarray, dict[str, Any]]:
    """The ``paired/<kind>`` image (and its sidecar) that ``task`` uses, kind from ``pair_kinds``."""
    ann = sample.annotations
    kind = ann.get("pair_kinds", {}).get(task)
    if kind is None or kind not in ann.get("paired", {}):
        raise DataError(f"no paired image for task {task!r} (kind {kind!r}) in dataset {sample.dataset!r}", sample_id=sample.id)
    return ann["paired"][kind], ann.get("paired_info", {}).get(kind, {})


class _PairedTask(ImageTask):
    def applies_to(self, meta: DatasetMeta) -> bool:
        return self.name in meta.tasks and meta.pair_kind(self.name) is not None


class Inpainting(ImageTask):
    name = "inpainting"
    paper_task = "inpainting"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        rect = inpaint_rect(query if query is not None else sample, global_seed)
        return apply_rect(sample.image, rect), sample.image


class Denoising(ImageTask):
    name = "denoising"
    paper_task = "denoising"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return add_noise(sample, global_seed), sample.image


class Colorization(ImageTask):
    name = "colorization"
    paper_task = "colorization"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return to_grey(sample.image), sample.image


class ArtifactRemoval(_PairedTask):
    """Input: the degraded image (``paired/<kind>``, e.g. rain, haze, low light); target: the clean one."""

    name = "artifact_removal"
    paper_task = "artifact removal"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return paired_image(sample, self.name)[0], sample.image


class ModalityTransfer(_PairedTask):
    """Input: the RGB image; target: the other modality (``paired/<kind>``, e.g. thermal)."""

    name = "modality_transfer"
    paper_task = "modality transfer"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return sample.image, paired_image(sample, self.name)[0]


class ObjectRemoval(_PairedTask):
    """Input: the image with a red 3 px outline around the object (sidecar ``box``); target:
    the paired image without the object."""

    name = "object_removal"
    paper_task = "object removal"

    def check_sample(self, sample: Sample, meta: DatasetMeta) -> str | None:
        if "box" not in paired_image(sample, self.name)[1]:
            return "object-removal pair has no box in its sidecar JSON"
        return None

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        clean, info = paired_image(sample, self.name)
        if "box" not in info:
            raise DataError("object-removal pair has no box in its sidecar JSON", sample_id=sample.id)
        return draw_outline(sample.image, info["box"]), clean
