"""Hostile data through the runner (issue 12): one damaged sample is reported by file and left
out, and the rest of the run equals a clean run of the dataset without that sample."""

import csv
import json
import os
import shutil
import struct
import zlib

import cv2
import numpy as np
import pytest

from icl.data.registry import get_dataset
from icl.run.__main__ import main

VICTIM = "s0003"


def _copy(builtin_root, dst):
    src = get_dataset("scenes-a", root=builtin_root, fast=True).root
    shutil.copytree(src, dst)
    meta = json.loads((dst / "meta.json").read_text())
    meta["name"] = "mine"
    (dst / "meta.json").write_text(json.dumps(meta))
    return dst


def _remove(ds, sid):
    for path in ds.rglob(f"{sid}.*"):
        path.unlink()


def _bomb_png(path):
    """A valid PNG header claiming 100000 x 100000 pixels, and nothing else."""
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk)


def _damage(ds, how, monkeypatch):
    image = ds / "images" / f"{VICTIM}.png"
    if how == "bomb-header":
        _bomb_png(image)
    elif how == "over-the-cap":  # a genuine large image under a lowered cap
        big = cv2.resize(cv2.imread(str(image)), (1200, 1100), interpolation=cv2.INTER_NEAREST)
        cv2.imwrite(str(image), big)
        for part in ("segmentation", "edges"):  # annotations at the image's size, as a real sample would be
            p = ds / part / f"{VICTIM}.png"
            cv2.imwrite(str(p), cv2.resize(cv2.imread(str(p), cv2.IMREAD_UNCHANGED), (1200, 1100),
                                           interpolation=cv2.INTER_NEAREST))
        monkeypatch.setenv("ICL_MAX_IMAGE_PIXELS", str(1_000_000))
    elif how == "truncated":
        data = image.read_bytes()
        image.write_bytes(data[: len(data) // 2])
    elif how == "missing-annotation":
        (ds / "segmentation" / f"{VICTIM}.png").unlink()
    elif how == "not-utf8-name":  # an extra file whose name is not UTF-8: listed as a problem, left out
        shutil.copy(image, os.fsdecode(bytes(ds / "images") + b"/\xff\xfe.png"))
        return None
    return image


def _run(data, out):
    return main(["vibe", "--data-root", str(data), "--datasets", "mine", "--tasks", "segmentation,edges",
                 "--models", "identity,copy-target", "--out", str(out), "--no-plots", "--no-progress",
                 "--rank-reference", "true"])


@pytest.mark.parametrize("how", ["bomb-header", "over-the-cap", "truncated", "missing-annotation", "not-utf8-name"])
def test_damaged_sample_is_left_out_and_the_rest_equals_a_clean_run(how, builtin_root, tmp_path, monkeypatch, capsys):
    bombed = _copy(builtin_root, tmp_path / "bombed" / "mine")
    damaged = _damage(bombed, how, monkeypatch)
    clean = _copy(builtin_root, tmp_path / "clean" / "mine")
    if damaged is not None:
        _remove(clean, VICTIM)
    code = _run(tmp_path / "bombed", tmp_path / "out-bombed")
    err = capsys.readouterr().err
    # a file that names no sample is a data failure too (issue 28), though nothing else changes
    assert code == (1 if damaged is not None or how == "not-utf8-name" else 0), err
    if how == "not-utf8-name":
        assert "is not a valid sample id" in err and "xff" in err
    if damaged is not None:
        assert str(damaged) in err or how == "missing-annotation"
        assert VICTIM in err and "Traceback" not in err
    assert _run(tmp_path / "clean", tmp_path / "out-clean") == 0
    for name in ("vibe_results.csv", "ranks.csv", "contexts.csv"):
        assert (tmp_path / "out-bombed" / name).read_bytes() == (tmp_path / "out-clean" / name).read_bytes(), name
    # the long results.csv too, but for its data origin (the datasets' content digests differ)
    assert _without_data(tmp_path / "out-bombed") == _without_data(tmp_path / "out-clean")


def _without_data(out):
    with open(out / "results.csv", newline="") as f:
        return [{k: v for k, v in r.items() if k != "data"} for r in csv.DictReader(f)]
