"""Helpers shared by the task tests."""

import numpy as np
import pytest

import icl.ops
from icl.data.dataset import DatasetMeta, Sample

BUILTINS = ("scenes-a", "scenes-b", "photos")


def require_ops(*names: str):
    """Skip until the named icl.ops kernels are merged (they are built by other helpers)."""
    missing = [n for n in names if n not in icl.ops._EXPORTS]
    return pytest.mark.skipif(bool(missing), reason=f"icl.ops kernels not available yet: {', '.join(missing)}")


def make_sample(image, dataset="hand", sid="s0", **annotations):
    return Sample(dataset=dataset, id=sid, image=np.ascontiguousarray(image), annotations=annotations)


HAND_META = DatasetMeta(
    name="hand",
    version="1",
    tasks=("segmentation", "depth", "edges", "keypoints", "detection", "flip"),
    classes=("background", "a", "b", "c"),
    depth_range=(0.0, 10.0),
)
