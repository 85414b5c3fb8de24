"""The paper's 106 dataset-task combinations as data (its Table 6, appendix A.3, Tables 23-66).

Each :class:`DatasetSpec` is one canonical dataset (a directory under the data root, written by
``python -m icl.data convert``). The paper's rule decides its tasks:

- the tasks its annotations serve (``annotated``): segmentation, depth, edges, detection,
  keypoints, artifact removal (one dataset per CDD degradation type), modality transfer,
  object removal;
- plus, once per paper dataset (on the variant marked ``generic``), the tasks that need no
  annotation: inpainting, denoising, rotation and flip, and colorization when the images are in
  colour (the grey MRI, OCT and thermal images of IXI, Duke and OpenThermalPose are not
  colorized).

``combinations()`` applies that rule; ``present(data_root)`` lists the combinations whose
dataset is converted under a data root and declares the task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

GENERIC_TASKS = ("inpainting", "denoising", "rotation", "flip")
COLOUR_TASKS = ("colorization",)

# CDD-11's degradation types (its test-split folder names), in the order of appendix A.3
CDD_TYPES = (
    "haze", "haze_rain", "haze_snow", "low_haze_rain", "low_haze_snow", "low_haze",
    "low_rain", "low", "rain", "snow", "low_snow",
)


@dataclass(frozen=True)
class DatasetSpec:
    """One canonical dataset of the benchmark.

    ``paper_name`` is its column label in the paper's result tables; ``classes`` the number of
    classes for segmentation/detection (None: none); ``depth_range`` metres, or the rule that
    fixes it from the data (a string; the converter writes the number into ``meta.json``);
    ``pairs`` task -> ``paired/<kind>``; ``samples`` the paper's count after its filters."""

    name: str
    paper_name: str
    domain: str
    annotated: tuple[str, ...]
    colour: bool
    generic: bool
    samples: int
    classes: int | None = None
    depth_range: tuple[float, float] | str | None = None
    pairs: dict[str, str] = field(default_factory=dict)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The paper's rule (module docstring)."""
        extra = (GENERIC_TASKS + (COLOUR_TASKS if self.colour else ())) if self.generic else ()
        return self.annotated + extra


@dataclass(frozen=True)
class Combination:
    """One dataset-task pairing: ``dataset`` the canonical name, ``paper_name`` its column label."""

    dataset: str
    task: str
    paper_name: str


_SEATHRU_RANGE = "0 to the 99.5th percentile of the valid train depths, rounded up to a metre"

SPECS: tuple[DatasetSpec, ...] = (
    DatasetSpec("duke-fluid", "Duke", "medical", ("segmentation",), False, False, 78, classes=2),
    DatasetSpec("duke-layers", "Duke", "medical", ("edges",), False, True, 110),
    *(DatasetSpec(f"ixi-{plane}", f"IXI ({plane.capitalize()})", "medical", ("modality_transfer",), False, True, 578,
                  pairs={"modality_transfer": "pd"}) for plane in ("axial", "coronal", "sagittal")),
    DatasetSpec("atlantis", "ATLANTIS", "underwater", ("segmentation",), True, True, 5195, classes=56),
    DatasetSpec("seathru", "Sea-Thru", "underwater", ("depth",), True, True, 1205, depth_range=_SEATHRU_RANGE),
    DatasetSpec("suim", "SUIM", "underwater", ("segmentation",), True, True, 1635, classes=8),
    DatasetSpec("nyuv2", "NYU-D V2", "indoor", ("depth", "segmentation"), True, True, 1449, classes=40,
                depth_range=(0.0, 10.0)),
    DatasetSpec("deepcrack", "DeepCrack", "indoor", ("edges",), True, True, 537),
    DatasetSpec("cdd", "CDD", "arts", (), True, True, 200),
    *(DatasetSpec(f"cdd-{kind}", "CDD", "arts", ("artifact_removal",), True, False, 200,
                  pairs={"artifact_removal": kind}) for kind in CDD_TYPES),
    DatasetSpec("dram", "DRAM", "arts", ("segmentation",), True, True, 718, classes=12),
    DatasetSpec("otp", "OTP", "human", ("keypoints",), False, True, 1950),
    DatasetSpec("rord", "RORD", "human", ("object_removal",), True, True, 343, pairs={"object_removal": "removed"}),
    DatasetSpec("llvip", "LLVIP", "human", ("detection", "modality_transfer"), True, True, 608, classes=1,
                pairs={"modality_transfer": "infrared"}),
    DatasetSpec("ap10k", "AP-10K", "wildlife", ("detection", "keypoints"), True, True, 5961, classes=54),
    DatasetSpec("cub", "Caltech Birds", "wildlife", ("detection", "keypoints"), True, True, 6000, classes=200),
)


def spec(name: str) -> DatasetSpec:
    """The spec of canonical dataset ``name``."""
    for s in SPECS:
        if s.name == name:
            return s
    raise KeyError(f"unknown benchmark dataset {name!r}; known: {', '.join(s.name for s in SPECS)}")


def combinations() -> list[Combination]:
    """All dataset-task combinations of the paper (106), in ``SPECS`` order."""
    return [Combination(s.name, t, s.paper_name) for s in SPECS for t in s.tasks]


def present(data_root: str | Path) -> list[Combination]:
    """The combinations whose dataset directory ``{data_root}/{dataset}`` is a complete
    conversion (its completion manifest) with a ``meta.json`` declaring the task (read, not
    validated: ``python -m icl.data validate`` does that)."""
    from icl.data.digest import manifest_summary

    root = Path(data_root).expanduser()
    declared: dict[str, set[str]] = {}
    for s in SPECS:
        meta = root / s.name / "meta.json"
        if manifest_summary(root / s.name) is None:
            continue
        try:
            tasks = json.loads(meta.read_text(encoding="utf-8")).get("tasks", [])
        except (OSError, ValueError, AttributeError):
            continue
        declared[s.name] = {t for t in tasks if isinstance(t, str)}
    return [c for c in combinations() if c.task in declared.get(c.dataset, ())]


def kept_counts(data_root: str | Path) -> list[str]:
    """Per converted dataset: ``name: kept/paper`` from its completion manifest, with a warning
    when it falls short of the paper's count by more than 1%."""
    from icl.data.digest import manifest_summary

    root = Path(data_root).expanduser()
    lines = []
    for s in SPECS:
        m = manifest_summary(root / s.name)
        if m is None:
            continue
        kept, paper = m.get("kept"), s.samples
        line = f"{s.name}: {kept}/{paper} samples (kept/paper)"
        if isinstance(kept, int) and kept < 0.99 * paper:
            line += f" -- warning: {paper - kept} short of the paper's count"
        lines.append(line)
    return lines
