"""Converted releases of every kind run through ``python -m icl.run vibe`` (the current runner
CLI): the oracle scores the encoding's ceiling (perfect here, where nothing is lossy) and
copy-target scores below it on every metric. Tiny fabricated releases, two queries each."""

from __future__ import annotations

import csv
import json

import cv2
import h5py
import nibabel as nib
import numpy as np
import scipy.io

from icl.data.convert import convert
from icl.data.convert.cdd import TYPES
from icl.run.__main__ import main
from tests.data.convert._convert_raw import rng, write_rgb, write_text

N = 8  # samples per release: 2 train, 2 val, 4 test


def _suim(raw, gen):
    for i in range(N):
        classes = np.repeat(gen.permutation(8), 5)[None, :].repeat(32, 0)  # every class in every mask
        bits = np.stack([(classes >> 2) & 1, (classes >> 1) & 1, classes & 1], -1) * 255
        write_rgb(raw / "train_val" / "masks" / f"s{i}.bmp", bits.astype(np.uint8))
        write_rgb(raw / "train_val" / "images" / f"s{i}.jpg", gen.integers(0, 256, (32, 40, 3), dtype=np.uint8))
    (raw / "TEST" / "images").mkdir(parents=True)
    (raw / "TEST" / "masks").mkdir(parents=True)


def _nyu(raw, gen):
    raw.mkdir(parents=True)
    labels = np.stack([np.repeat(gen.permutation(4) + 1, 10)[None, :].repeat(32, 0) for _ in range(N)])
    with h5py.File(raw / "nyu_depth_v2_labeled.mat", "w") as f:
        f["images"] = gen.integers(0, 256, (N, 32, 40, 3), dtype=np.uint8).transpose(0, 3, 2, 1)
        f["depths"] = gen.uniform(0.5, 9.5, (N, 32, 40)).astype(np.float32).transpose(0, 2, 1)
        f["labels"] = labels.astype(np.uint16).transpose(0, 2, 1)
    names = np.empty((1, 40), dtype=object)
    names[0, :] = [f"c{k}" for k in range(40)]
    scipy.io.savemat(raw / "classMapping40.mat", {"mapClass": (np.arange(894) % 40 + 1)[None, :].astype(float),
                                                 "className": names})


def _deepcrack(raw, gen):
    for i in range(N):
        mask = np.zeros((32, 40), np.uint8)
        cv2.line(mask, (0, int(gen.integers(0, 32))), (39, int(gen.integers(0, 32))), 255, 2)
        (raw / "train_lab").mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(raw / "train_lab" / f"c{i}.png"), mask)
        write_rgb(raw / "train_img" / f"c{i}.jpg", gen.integers(0, 256, (32, 40, 3), dtype=np.uint8))


def _ap10k(raw, gen):
    images, anns = [], []
    for i in range(N):
        images.append({"id": i + 1, "file_name": f"{i:06d}.jpg", "width": 48, "height": 40})
        x0, y0 = int(gen.integers(0, 10)), int(gen.integers(0, 8))
        grid = [(x0 + 3 + 12 * (k % 3), y0 + 3 + 12 * (k // 3), 2) for k in range(7)]  # 12 px apart
        kp = np.zeros((17, 3))
        kp[:7] = grid
        anns.append({"id": 100 + i, "image_id": i + 1, "category_id": 1, "bbox": [x0, y0, 30, 28],
                     "keypoints": kp.reshape(-1).tolist()})
        write_rgb(raw / "data" / f"{i:06d}.jpg", gen.integers(0, 256, (40, 48, 3), dtype=np.uint8))
    for split in ("train", "val", "test"):
        part = [j for j in range(N) if ("train", "val", "test")[j % 3] == split]
        write_text(raw / "annotations" / f"ap10k-{split}-split1.json", json.dumps(
            {"images": [images[j] for j in part], "annotations": [anns[j] for j in part],
             "categories": [{"id": 1, "name": "antelope"}]}))


def _cdd(raw, gen):
    for i in range(N):
        for kind in ("clear", *TYPES):
            write_rgb(raw / kind / f"{i:06d}.png", gen.integers(0, 256, (32, 40, 3), dtype=np.uint8))


def _ixi(raw, gen):
    raw.mkdir(parents=True)
    for i in range(N):
        for mod in ("T2", "PD"):
            vol = gen.integers(0, 1000, (34, 36, 33)).astype(np.int16)
            nib.save(nib.Nifti1Image(vol, np.eye(4)), str(raw / f"IXI{i:03d}-Guys-{i:04d}-{mod}.nii.gz"))


def _rord(raw, gen):
    (raw / "val" / "seg").mkdir(parents=True)
    for i in range(N):
        write_rgb(raw / "val" / "img" / f"{i:06d}.jpg", gen.integers(0, 256, (32, 40, 3), dtype=np.uint8))
        write_rgb(raw / "val" / "gt" / f"{i:06d}.jpg", gen.integers(0, 256, (32, 40, 3), dtype=np.uint8))
        mask = np.zeros((32, 40), np.uint8)
        mask[8:20, 10:25] = 255
        cv2.imwrite(str(raw / "val" / "seg" / f"{i:06d}.png"), mask)


def _seathru(raw, gen):
    import tifffile

    (raw / "D1" / "depth").mkdir(parents=True)
    for i in range(N):
        tifffile.imwrite(raw / "D1" / "depth" / f"depthT_S{i:05d}.tif", gen.uniform(0.3, 13.0, (32, 40)).astype(np.float32))
        write_rgb(raw / "D1" / "Raw" / f"T_S{i:05d}.png", gen.integers(0, 256, (32, 40, 3), dtype=np.uint8))


RELEASES = {"suim": _suim, "nyuv2": _nyu, "deepcrack": _deepcrack, "ap10k": _ap10k, "cdd": _cdd, "ixi": _ixi,
            "rord": _rord, "seathru": _seathru}
DATASETS = "suim,nyuv2,deepcrack,ap10k,cdd-haze,ixi-axial,rord,seathru"
TASKS = "segmentation,depth,edges,detection,keypoints,artifact_removal,modality_transfer,object_removal"
LOWER = {"rmse", "abs_rel", "lpips"}


def test_converted_releases_run_with_oracle_at_ceiling(tmp_path, capsys):
    gen, root = rng(), tmp_path / "data"
    for name, fabricate in RELEASES.items():
        fabricate(tmp_path / "raw" / name, gen)
        convert(name, tmp_path / "raw" / name, root)
    out = tmp_path / "run"
    code = main(["vibe", "--data-root", str(root), "--datasets", DATASETS, "--tasks", TASKS, "--models", "oracle,copy-target",
                 "--limit", "2", "--out", str(out), "--no-progress", "--no-plots", "--qualitative", "0"])
    assert code == 0, capsys.readouterr().err
    with open(out / "vibe_results.csv") as f:
        rows = [r for r in csv.DictReader(f)]
    score = {(r["model"], r["dataset"], r["task"], r["metric"]): float(r["mean"]) for r in rows}
    runs = {(d, t) for _, d, t, _ in score}
    assert runs == {("suim", "segmentation"), ("nyuv2", "segmentation"), ("nyuv2", "depth"),
                    ("deepcrack", "edges"), ("ap10k", "detection"), ("ap10k", "keypoints"),
                    ("cdd-haze", "artifact_removal"), ("ixi-axial", "modality_transfer"), ("rord", "object_removal"),
                    ("seathru", "depth")}
    # Sea-thru's range comes from its train depths: 13 m rounds up to 13 (uniform up to 13.0)
    sea_max = json.loads((root / "seathru" / "meta.json").read_text())["depth_range"][1]
    assert sea_max == 13.0
    perfect = {"miou": 1.0, "f1": 1.0, "precision": 1.0, "recall": 1.0, "ap50": 1.0, "psnr": 100.0, "lpips": 0.0}
    for (model, dataset, task, metric), value in score.items():
        if model != "oracle":
            continue
        where = (dataset, task, metric)
        if metric in perfect:
            assert value == perfect[metric], where
        elif metric == "ssim":
            assert abs(value - 1.0) < 1e-6, where
        elif metric == "rmse":  # the quantisation floor of the dataset's own range
            assert value < 0.5 * (10.0 if dataset == "nyuv2" else sea_max) / 256, where
        copy = score[("copy-target", dataset, task, metric)]
        assert (copy > value) if metric in LOWER else (copy < value), (where, copy, value)
