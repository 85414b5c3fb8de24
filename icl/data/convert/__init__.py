"""Converters of the visual benchmark's public releases into the canonical format.

``python -m icl.data convert NAME RAW_DIR OUT_DIR`` (or :func:`convert`) reads a release as
its publisher ships it (``docs/datasets.md`` says which files to download) and writes one
dataset directory per canonical dataset under ``OUT_DIR`` (usually the data root): e.g.
``ixi`` writes ``ixi-axial``, ``ixi-coronal`` and ``ixi-sagittal``; ``cdd`` writes ``cdd`` and
one ``cdd-<type>`` per degradation type. Each carries ``convert-report.json`` (what the
paper's filters removed and why, which raw files were bad) and ``manifest.json`` (hashes).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from icl.data.convert._common import ConvertError, RawError, Report

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

__all__ = ["CONVERTERS", "ConvertError", "RawError", "Report", "convert", "list_converters"]


def list_converters() -> list[str]:
    """Names accepted by :func:`convert`."""
    return sorted(CONVERTERS)


def convert(name: str, raw_dir: str | Path, out_dir: str | Path, global_seed: int = 0) -> list[Report]:
    """Convert release ``name`` found in ``raw_dir`` into datasets under ``out_dir``.
    ``global_seed`` drives the few random choices (CUB's 30 images per class, SeaThru's
    train split for its depth range). Raises :class:`ConvertError` for a wrong layout."""
    spec = CONVERTERS.get(name)
    if spec is None:
        raise ConvertError(f"unknown converter {name!r}; known: {', '.join(list_converters())}")
    raw = Path(raw_dir).expanduser()
    if not raw.is_dir():
        raise ConvertError(f"raw directory {raw} does not exist")
    module, func = spec.split(":")
    fn = getattr(importlib.import_module(f"icl.data.convert.{module}"), func)
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    return list(fn(raw, out, global_seed))
