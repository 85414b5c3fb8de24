"""The 13 tasks of the visual in-context benchmark, by name.

The paper counts 12 task categories: rotation and flip are one category there ("geometric
transformation"); every other task is its own category. ``Task.paper_task`` records it.
"""

from __future__ import annotations

import importlib

from icl.benchmarks.vibe.tasks.base import Task

# name -> "module:Class" (relative to icl.benchmarks.vibe.tasks), in the canonical order
_TASKS: dict[str, str] = {
    "segmentation": "segmentation:Segmentation",
    "edges": "edges:Edges",
    "depth": "depth:Depth",
    "detection": "detection:Detection",
    "keypoints": "keypoints:Keypoints",
    "inpainting": "restoration:Inpainting",
    "denoising": "restoration:Denoising",
    "colorization": "restoration:Colorization",
    "artifact_removal": "restoration:ArtifactRemoval",
    "modality_transfer": "restoration:ModalityTransfer",
    "rotation": "geometry:Rotation",
    "flip": "geometry:Flip",
    "object_removal": "restoration:ObjectRemoval",
}
_INSTANCES: dict[str, Task] = {}


def list_tasks() -> list[str]:
    """The 13 task names, in canonical order."""
    return list(_TASKS)


def get_task(name: str) -> Task:
    """The (stateless, shared) task object called ``name``."""
    if name not in _INSTANCES:
        spec = _TASKS.get(name)
        if spec is None:
            raise KeyError(f"unknown task {name!r}; known: {', '.join(_TASKS)}")
        module, cls = spec.split(":")
        _INSTANCES[name] = getattr(importlib.import_module(f"icl.benchmarks.vibe.tasks.{module}"), cls)()
    return _INSTANCES[name]


def paper_tasks() -> dict[str, list[str]]:
    """The paper's 12 task categories -> our task names."""
    out: dict[str, list[str]] = {}
    for name in _TASKS:
        out.setdefault(get_task(name).paper_task, []).append(name)
    return out
