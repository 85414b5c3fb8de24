"""Converters of the visual benchmark's public releases into the canonical format.

``python -m icl.data convert NAME RAW_DIR OUT_DIR`` (or :func:`convert`) reads a release as
its publisher ships it (``docs/datasets.md`` says which files to download) and writes one
dataset directory per canonical dataset under ``OUT_DIR`` (usually the data root): e.g.
``ixi`` writes ``ixi-axial``, ``ixi-coronal`` and ``ixi-sagittal``; ``cdd`` writes ``cdd`` and
one ``cdd-<type>`` per degradation type. Each carries ``convert-report.json`` (kept against the
paper's count, what the paper's filters removed and why, which raw files were bad) and
``manifest.json`` (the completion marker, with counts and hashes). ``convert all RAW_ROOT
OUT_ROOT`` converts every release it recognises among RAW_ROOT's folders.

Nothing the user gave is changed: OUT_DIR may not equal, contain or lie inside RAW_DIR
(:class:`UnsafeOutput`), each dataset is built in a hidden sibling folder and renamed into place
when complete, and a failure discards only that folder.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from icl.data.convert._common import (ConvertError, RawError, Report, UnsafeOutput, abort_open, describe,
                                      raw_root_set)
from icl.data.convert.outputs import CDD_TYPES as CDD_TYPES, OUTPUTS as OUTPUTS, PAPER_COUNTS as PAPER_COUNTS
from icl.data.images import display_path

# NAME -> "module:function" (relative to icl.data.convert); each function is
# convert(raw_dir, out_dir, global_seed) -> list[Report]
CONVERTERS: dict[str, str] = {
    "ap10k": "coco_pose:convert_ap10k",
    "atlantis": "segmentation:convert_atlantis",
    "cdd": "cdd:convert",
    "cub": "cub:convert",
    "deepcrack": "deepcrack:convert",
    "dram": "segmentation:convert_dram",
    "duke": "duke:convert",
    "ixi": "ixi:convert",
    "llvip": "llvip:convert",
    "nyuv2": "nyu:convert",
    "otp": "coco_pose:convert_otp",
    "rord": "rord:convert",
    "seathru": "seathru:convert",
    "suim": "segmentation:convert_suim",
}

__all__ = ["CONVERTERS", "OUTPUTS", "PAPER_COUNTS", "ConvertError", "RawError", "Report", "UnsafeOutput",
           "convert", "convert_all", "list_converters", "recognise"]


def list_converters() -> list[str]:
    """Names accepted by :func:`convert`."""
    return sorted(CONVERTERS)


def check_paths(raw: Path, out: Path) -> None:
    """:class:`UnsafeOutput` when ``out`` equals, contains or lies inside ``raw`` (symbolic links
    resolved): a conversion there could replace the release's own files."""
    r, o = Path(os.path.realpath(raw)), Path(os.path.realpath(out))
    if o == r:
        raise UnsafeOutput(f"OUT_DIR {display_path(out)} is the raw folder itself; choose another OUT_DIR (nothing was changed)")
    if r in o.parents:
        raise UnsafeOutput(f"OUT_DIR {display_path(out)} lies inside the raw folder {display_path(raw)}; choose a "
                           "folder outside it (nothing was changed)")
    if o in r.parents:
        raise UnsafeOutput(f"OUT_DIR {display_path(out)} contains the raw folder {display_path(raw)}; move the release "
                           "out of it or choose another OUT_DIR (nothing was changed)")


def convert(name: str, raw_dir: str | Path, out_dir: str | Path, global_seed: int = 0) -> list[Report]:
    """Convert release ``name`` found in ``raw_dir`` into datasets under ``out_dir``.
    ``global_seed`` drives the few random choices (CUB's 30 images per class, SeaThru's
    train split for its depth range). Raises :class:`ConvertError` (one line, nothing changed
    under ``out_dir``) for a wrong layout, :class:`UnsafeOutput` for an ``out_dir`` that
    overlaps ``raw_dir``."""
    spec = CONVERTERS.get(name)
    if spec is None:
        raise ConvertError(f"unknown converter {name!r}; known: {', '.join(list_converters())}")
    raw = Path(raw_dir).expanduser()
    if not raw.is_dir():
        raise ConvertError(f"raw directory {display_path(raw)} does not exist")
    out = Path(out_dir).expanduser()
    check_paths(raw, out)
    module, func = spec.split(":")
    fn = getattr(importlib.import_module(f"icl.data.convert.{module}"), func)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with raw_root_set(raw):
            return list(fn(raw, out, global_seed))
    except ConvertError:
        abort_open()
        raise
    except (KeyboardInterrupt, SystemExit):
        abort_open()
        raise
    except Exception as exc:  # a converter bug or a hostile file outside any sample: one line, nothing kept
        abort_open()
        raise ConvertError(f"{name}: conversion failed ({describe(exc)}); nothing was changed under "
                           f"{display_path(out)}") from exc


# -- recognising releases ---------------------------------------------------------------------------
def _any(raw: Path, *rels: str) -> bool:
    return any((raw / r).exists() for r in rels)


def _glob(raw: Path, pattern: str, depth: int = 3) -> bool:
    for d in range(depth + 1):
        if next(iter(raw.glob("/".join(["*"] * d + [pattern]))), None) is not None:
            return True
    return False


_SIGNATURES: dict[str, Callable[[Path], bool]] = {
    "ap10k": lambda r: _any(r, "annotations/ap10k-train-split1.json", "ap10k/annotations/ap10k-train-split1.json",
                            "ap-10k/annotations/ap10k-train-split1.json"),
    "atlantis": lambda r: _any(r, "images/train", "atlantis/images/train") and _any(r, "masks/train", "atlantis/masks/train"),
    "cdd": lambda r: _any(r, "clear", "CDD-11_test/clear", "test/clear") and _any(r, "haze", "CDD-11_test/haze", "test/haze"),
    "cub": lambda r: _any(r, "images.txt", "CUB_200_2011/images.txt"),
    "deepcrack": lambda r: _any(r, "train_img", "test_img", "DeepCrack/train_img", "DeepCrack/test_img"),
    "dram": lambda r: _any(r, "labels", "DRAM_processed/labels") and _any(r, "test", "DRAM_processed/test"),
    "duke": lambda r: _glob(r, "Subject_*.mat", 2),
    "ixi": lambda r: _glob(r, "IXI*-T2.nii*", 2),
    "llvip": lambda r: _any(r, "visible", "LLVIP/visible") and _any(r, "infrared", "LLVIP/infrared"),
    "nyuv2": lambda r: _any(r, "nyu_depth_v2_labeled.mat"),
    "otp": lambda r: _any(r, "train/labels", "OpenThermalPose/train/labels") and _any(r, "train/images", "OpenThermalPose/train/images"),
    "rord": lambda r: _any(r, "img", "val/img", "RORD/val/img") and _any(r, "gt", "val/gt", "RORD/val/gt"),
    "seathru": lambda r: _glob(r, "depth", 2) or _glob(r, "depthMaps", 2) or _glob(r, "depth_resized", 2),
    "suim": lambda r: _any(r, "TEST/masks", "SUIM/TEST/masks") and _any(r, "train_val", "SUIM/train_val"),
}


def recognise(folder: str | Path) -> list[str]:
    """The converters whose release layout ``folder`` has (usually one)."""
    folder = Path(folder)
    return [name for name, test in sorted(_SIGNATURES.items()) if test(folder)]


@dataclass
class Outcome:
    """One release of :func:`convert_all`: its folder, converter, reports or error."""

    folder: Path
    name: str | None
    reports: list[Report]
    error: str | None = None


def convert_all(raw_root: str | Path, out_root: str | Path, global_seed: int = 0,
                on_start: Callable[[Path, str], None] | None = None) -> list[Outcome]:
    """Convert every release recognised among the folders of ``raw_root`` (each converted or
    failed on its own; an unrecognised or ambiguous folder is reported, not guessed)."""
    raw_root, out_root = Path(raw_root).expanduser(), Path(out_root).expanduser()
    if not raw_root.is_dir():
        raise ConvertError(f"raw root {display_path(raw_root)} does not exist")
    check_paths(raw_root, out_root)
    outcomes = []
    for folder in sorted(p for p in raw_root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        names = recognise(folder)
        if len(names) != 1:
            why = "no known release layout" if not names else f"matches several layouts ({', '.join(names)})"
            outcomes.append(Outcome(folder, None, [], why))
            continue
        if on_start is not None:
            on_start(folder, names[0])
        try:
            outcomes.append(Outcome(folder, names[0], convert(names[0], folder, out_root, global_seed)))
        except ConvertError as exc:
            outcomes.append(Outcome(folder, names[0], [], str(exc)))
    return outcomes
