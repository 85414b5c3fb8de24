"""Geometric transformations: rotation by 90 degrees counter-clockwise and left-right flip."""

from __future__ import annotations

from typing import Any

import numpy as np

from icl.data.dataset import Sample
from icl.benchmarks.vibe.tasks.image import ImageTask


class Rotation(ImageTask):
    name = "rotation"
    paper_task = "geometric transformation"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return sample.image, np.ascontiguousarray(np.rot90(sample.image, k=1))


class Flip(ImageTask):
    name = "flip"
    paper_task = "geometric transformation"

    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        return sample.image, np.ascontiguousarray(sample.image[:, ::-1])
