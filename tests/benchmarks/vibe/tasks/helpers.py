"""Helpers shared by the task tests."""

import importlib.util

import numpy as np
import pytest

from icl.data.dataset import DatasetMeta, Sample

BUILTINS = ("scenes-a", "scenes-b", "photos")


def require_ops(*modules: str):
    """Skip until the named ``icl.ops.<module>`` kernels are merged (other helpers build them)."""
    missing = [m for m in modules if importlib.util.find_spec(f"icl.ops.{m}") is None]
    return pytest.mark.skipif(bool(missing), reason=f"icl.ops kernels not merged yet: {', '.join(missing)}")


def make_sample(image, dataset="hand", sid="s0", **annotations):
    return Sample(dataset=dataset, id=sid, image=np.ascontiguousarray(image), annotations=annotations)


HAND_META = DatasetMeta(
    name="hand",
    version="1",
    tasks=("segmentation", "depth", "edges", "keypoints", "detection", "flip"),
    classes=("background", "a", "b", "c"),
    depth_range=(0.0, 10.0),
)
