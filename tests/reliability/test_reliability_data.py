"""Hostile dataset files fail only their own sample, with file, sample and cause recorded; every
other sample loads exactly as from a clean copy of the dataset."""

import json
import os
import sqlite3
import struct
import zlib

import cv2
import numpy as np
import pytest

from icl.data.dataset import DataError, DatasetMeta, load_dataset
from icl.data.images import DEFAULT_MAX_PIXELS, ImageError, decode_image, read_header, read_npy_header
from icl.data.seeds import rng as seeded_rng
from icl.data.writer import DatasetWriter

META = DatasetMeta(name="hostile", version="1", tasks=("segmentation", "depth", "keypoints", "detection"),
                   classes=("background", "thing"), depth_range=(0.0, 10.0))
IDS = [f"s{i}" for i in range(5)]


def _write(root):
    gen = seeded_rng(0, "hostile", "*", "*", "write")
    writer = DatasetWriter(root, META)
    for sid in IDS:
        h, w = 8, 11
        writer.add(sid, image=gen.integers(0, 256, (h, w, 3), dtype=np.uint8),
                   segmentation=gen.integers(0, 2, (h, w)).astype(np.uint8),
                   depth=gen.uniform(1, 9, (h, w)).astype(np.float32),
                   keypoints=np.array([[1.0, 2.0, 2]]), boxes=np.array([[0.0, 0.0, 4.0, 3.0]]), box_classes=np.array([1]))
    return root


@pytest.fixture
def clean(tmp_path):
    return load_dataset(_write(tmp_path / "clean"))


@pytest.fixture
def hostile(tmp_path):
    return _write(tmp_path / "hostile")


def _png_header_only(width, height):
    """A PNG signature and a valid IHDR claiming ``width x height``, and nothing else."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk


def _assert_rest_equal(ds, clean, failed, parts=None):
    """``failed`` fails with a DataError naming it; every other sample equals the clean load."""
    for sid in IDS:
        if sid == failed:
            with pytest.raises(DataError) as info:
                ds.load(sid, parts=parts)
            assert info.value.sample_id == sid
            json.dumps({"path": info.value.path, "message": str(info.value)})  # storable as UTF-8
            continue
        got, want = ds.load(sid, parts=parts), clean.load(sid, parts=parts)
        np.testing.assert_array_equal(got.image, want.image)
        assert got.annotations.keys() == want.annotations.keys()
        for key in want.annotations:
            np.testing.assert_array_equal(got.annotations[key], want.annotations[key])
    return info.value


def test_header_only_png_claiming_100000_squared_fails_before_decoding(hostile, clean):
    (hostile / "images" / "s1.png").write_bytes(_png_header_only(100_000, 100_000))
    err = _assert_rest_equal(load_dataset(hostile), clean, "s1")
    assert "100000x100000" in str(err) and f"{DEFAULT_MAX_PIXELS:,}" in str(err) and err.cause == "ImageError"
    assert err.path.endswith("images/s1.png")


def test_6000_squared_image_under_a_lowered_cap(hostile, clean, monkeypatch):
    big = np.zeros((6000, 6000, 3), np.uint8)
    cv2.imwrite(str(hostile / "images" / "s2.png"), big, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    err = _assert_rest_equal(load_dataset(hostile, max_pixels=10_000_000), clean, "s2")
    assert "36,000,000 pixels, over the limit of 10,000,000" in str(err)
    monkeypatch.setenv("ICL_MAX_IMAGE_PIXELS", "1000000")
    with pytest.raises(ImageError, match="over the limit of 1,000,000"):
        decode_image(hostile / "images" / "s2.png")
    monkeypatch.setenv("ICL_MAX_IMAGE_PIXELS", "lots")
    with pytest.raises(ValueError, match="ICL_MAX_IMAGE_PIXELS"):
        decode_image(hostile / "images" / "s2.png")


@pytest.mark.parametrize("ext, cut", [("jpg", 0.5), ("jpg", 0.97), ("png", 0.5), ("png", 0.99)])
def test_truncated_images_are_data_failures(hostile, clean, ext, cut):
    src = hostile / "images" / "s3.png"
    img = cv2.imread(str(src))
    src.unlink()
    path = hostile / "images" / f"s3.{ext}"
    big = cv2.resize(img, (160, 120), interpolation=cv2.INTER_NEAREST)  # enough bytes to cut
    cv2.imwrite(str(path), big)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * cut)])
    if ext == "jpg":
        # OpenCV alone decodes a cut JPEG into an image (libjpeg only warns): the failure OpenCV misses
        assert cv2.imread(str(path)) is not None
    err = _assert_rest_equal(load_dataset(hostile), clean, "s3", parts=())
    assert "truncated" in str(err)


def test_annotation_sizes_are_checked_from_headers_before_decoding(hostile, clean):
    # a depth .npy whose header claims 100000 x 100000 float64 (80 GB) but holds 8 bytes of data
    header = {"descr": "<f8", "fortran_order": False, "shape": (100_000, 100_000)}
    buf = bytearray(b"\x93NUMPY\x01\x00")
    text = repr(header).encode() + b" " * (117 - len(repr(header))) + b"\n"
    buf += struct.pack("<H", len(text)) + text + b"\x00" * 8
    (hostile / "depth" / "s0.npy").write_bytes(bytes(buf))
    with pytest.raises(ImageError, match="truncated .npy: shape \\(100000, 100000\\) float64 needs 80000000000"):
        read_npy_header(hostile / "depth" / "s0.npy")
    err = _assert_rest_equal(load_dataset(hostile), clean, "s0")
    assert "truncated .npy" in str(err)
    # a well-formed .npy of another size than the image: refused from its header
    np.save(hostile / "depth" / "s0.npy", np.zeros((3, 4), np.float32))
    err = _assert_rest_equal(load_dataset(hostile), clean, "s0")
    assert "depth has size (3, 4), the image (8, 11)" in str(err)
    # a segmentation PNG whose header says another size than the image: refused from the header
    (hostile / "depth" / "s0.npy").write_bytes((clean.root / "depth" / "s0.npy").read_bytes())
    (hostile / "segmentation" / "s4.png").write_bytes(_png_header_only(50_000, 50_000))
    err = _assert_rest_equal(load_dataset(hostile), clean, "s4")
    assert "segmentation PNG has size (50000, 50000), the image (8, 11)" in str(err)


@pytest.mark.parametrize("payload, message", [
    (b"\x93NUMPY\x01\x00\x10\x00{'descr': 1}    \n", "bad .npy header"),
    (b"not numpy at all", "bad .npy header"),
    (b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 65535, "bad .npy header"),
])
def test_bad_npy_headers_are_clear_per_file_errors(hostile, clean, payload, message):
    (hostile / "depth" / "s2.npy").write_bytes(payload)
    err = _assert_rest_equal(load_dataset(hostile), clean, "s2")
    assert message in str(err) and err.path.endswith("depth/s2.npy")


@pytest.mark.parametrize("text, message", [
    ('{"points": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ('{"points": [[1, 2, ' + "9" * 5000 + "]]}", "cannot read JSON"),
    ('{"points": [[1e999, 2, 2]]}', "finite"),
    ('{"points": [[' + "9" * 4000 + ', 2, 2]]}', "points"),
    (b"\xff\xfe{}".decode("latin-1"), "cannot read JSON"),
])
def test_hostile_json_fails_its_sample_only(hostile, clean, text, message):
    (hostile / "keypoints" / "s1.json").write_text(text, encoding="latin-1")
    err = _assert_rest_equal(load_dataset(hostile), clean, "s1")
    assert message in str(err)


def test_hostile_meta_json_is_a_clear_dataset_error(hostile):
    (hostile / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match="nested too deeply") as info:
        load_dataset(hostile)
    assert info.value.path.endswith("meta.json")


def test_missing_annotation_file_fails_only_its_sample(hostile, clean):
    (hostile / "boxes" / "s3.json").unlink()
    ds = load_dataset(hostile)
    assert [(p.sample_id, p.path.endswith("boxes/s3.json")) for p in ds.problems] == [("s3", True)]
    _assert_rest_equal(ds, clean, "s3")
    # the sample still serves tasks that do not read the missing file
    np.testing.assert_array_equal(ds.load("s3", parts=("depth",)).annotations["depth"],
                                  clean.load("s3", parts=("depth",)).annotations["depth"])


def test_non_utf8_file_name_is_recorded_safely(hostile, clean, tmp_path):
    raw = os.path.join(os.fsencode(hostile / "images"), b"caf\xe9.png")
    with open(raw, "wb") as f:
        f.write((hostile / "images" / "s0.png").read_bytes())
    ds = load_dataset(hostile)
    assert ds.ids() == IDS
    (problem,) = ds.problems
    assert problem.sample_id is None and problem.path.endswith("images/caf\\xe9.png")
    assert "is not a valid sample id" in str(problem)
    with sqlite3.connect(tmp_path / "failures.sqlite") as db:  # storable as it is
        db.execute("create table f (path text, message text)")
        db.execute("insert into f values (?, ?)", (problem.path, str(problem)))
    for sid in IDS:
        np.testing.assert_array_equal(ds.load(sid).image, clean.load(sid).image)


def test_duplicate_id_fails_that_sample_only(hostile, clean):
    cv2.imwrite(str(hostile / "images" / "s4.jpg"), np.zeros((8, 11, 3), np.uint8))
    ds = load_dataset(hostile)
    err = _assert_rest_equal(ds, clean, "s4")
    assert "two images share the sample id" in str(err)


@pytest.mark.parametrize("ext", ["png", "jpg", "bmp", "gif", "webp", "tiff"])
def test_headers_of_every_format_match_opencv(tmp_path, ext):
    img = seeded_rng(0, "hostile", "*", ext, "header").integers(0, 256, (37, 53, 3), dtype=np.uint8)
    path = tmp_path / f"x.{ext}"
    if not cv2.imwrite(str(path), img):
        pytest.skip(f"this OpenCV build cannot write {ext}")
    header = read_header(path)
    decoded = decode_image(path)
    assert (header.width, header.height) == (53, 37) == (decoded.shape[1], decoded.shape[0])
    (tmp_path / "x.pgm").write_bytes(b"P5\n53 37\n255\n" + bytes(53 * 37))
    with pytest.raises(ImageError, match="unknown image format"):
        read_header(tmp_path / "x.pgm")


def test_data_errors_survive_pickling_with_their_fields(hostile):
    import pickle

    (hostile / "images" / "s1.png").write_bytes(_png_header_only(100_000, 100_000))
    with pytest.raises(DataError) as info:
        load_dataset(hostile).load("s1")
    again = pickle.loads(pickle.dumps(info.value))
    assert (str(again), again.path, again.sample_id, again.cause) == (
        str(info.value), info.value.path, "s1", "ImageError")


# -- issue 28: stale scores, FIFOs, hostile raw files (real subprocesses) ----------------------------
import shutil
import subprocess
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


def _vibe(data, out, store):
    return subprocess.run([sys.executable, "-m", "icl.run", "vibe", "--data-root", str(data), "--datasets", "mine",
                           "--tasks", "edges", "--models", "identity", "--limit", "2", "--out", str(out),
                           "--store", str(store), "--no-plots", "--no-progress"],
                          cwd=_REPO, capture_output=True, text=True, timeout=300)


def _mine(builtin_root, dst):
    from icl.data.registry import get_dataset

    shutil.copytree(get_dataset("scenes-a", root=builtin_root, fast=True).root, dst)
    meta = json.loads((dst / "meta.json").read_text())
    meta["name"] = "mine"
    (dst / "meta.json").write_text(json.dumps(meta))
    return dst


@pytest.mark.slow
def test_edited_dataset_with_the_same_version_is_recomputed(builtin_root, tmp_path):
    """Inverting every image of a dataset without bumping its version gave "0 computed, N already
    in the store": the dataset's content digest is now part of every item key."""
    ds = _mine(builtin_root, tmp_path / "data" / "mine")
    store = tmp_path / "store.sqlite"
    first = _vibe(tmp_path / "data", tmp_path / "run1", store)
    assert first.returncode == 0, first.stderr
    again = _vibe(tmp_path / "data", tmp_path / "run2", store)
    assert " 0 items computed" in again.stdout + again.stderr  # unchanged: all reused
    for path in (ds / "images").iterdir():
        img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        cv2.imwrite(str(path), 255 - img)
    edited = _vibe(tmp_path / "data", tmp_path / "run3", store)
    assert edited.returncode == 0, edited.stderr
    text = edited.stdout + edited.stderr
    assert " 0 already in the store" in text and " 0 items computed" not in text


def test_fifo_as_a_dataset_image_does_not_hang(tmp_path):
    """A FIFO where an image should be hung planning forever (open() waits for a writer): files
    are opened only when they are regular files, so the sample fails and the rest loads."""
    root = _write(tmp_path / "ds")
    os.unlink(root / "images" / "s1.png")
    os.mkfifo(root / "images" / "s1.png")
    code = ("import sys; from icl.data.dataset import load_dataset; ds = load_dataset(sys.argv[1]); "
            "print(repr(ds.precheck('s1'))); print(ds.precheck('s0'))")
    done = subprocess.run([sys.executable, "-c", code, str(root)], cwd=_REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "not a regular file" in done.stdout and done.stdout.strip().endswith("None")


def _convert(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "icl.data", "convert", *map(str, args)], cwd=_REPO,
                          capture_output=True, text=True, timeout=timeout)


def _ap10k(raw, file_names):
    """AP-10K's published layout after its README's ``mv ap-10k ap10k`` (annotations/ap10k-*-split1.json
    + data/<file_name>; AlexTheBad/AP-10K README)."""
    root = raw / "ap10k"
    (root / "data").mkdir(parents=True)
    images, anns = [], []
    for i, name in enumerate(file_names, 1):
        images.append({"id": i, "file_name": name, "width": 16, "height": 12})
        kp = [v for k in range(17) for v in (1 + k % 10, 1 + k % 8, 2)]
        anns.append({"id": i, "image_id": i, "category_id": 1, "bbox": [1, 1, 10, 8], "keypoints": kp,
                     "num_keypoints": 17})
    coco = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "dog"}]}
    (root / "annotations").mkdir()
    (root / "annotations" / "ap10k-train-split1.json").write_text(json.dumps(coco))
    for split in ("val", "test"):
        (root / "annotations" / f"ap10k-{split}-split1.json").write_text(json.dumps(
            {"images": [], "annotations": [], "categories": coco["categories"]}))
    return root


def test_converter_reads_nothing_outside_the_release(tmp_path):
    """AP-10K ``file_name`` of ``../../etc/hostname`` or an absolute path, and a symlink leading out
    of the raw folder, are reported bad files; nothing of the outside file reaches a message or
    the report. A FIFO in the release is skipped, not waited on."""
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(b"TOP-SECRET-LINE\n" * 10)
    raw = tmp_path / "raw"
    root = _ap10k(raw, ["000001.jpg", "../../etc/hostname", str(secret), "000004.jpg", "000005.jpg"])
    cv2.imwrite(str(root / "data" / "000001.jpg"), np.full((12, 16, 3), 90, np.uint8))
    os.symlink(secret, root / "data" / "000004.jpg")
    os.mkfifo(root / "data" / "000005.jpg")
    out = tmp_path / "out"
    done = _convert("ap10k", raw, out)
    assert done.returncode == 0, done.stderr
    report = (out / "ap10k" / "convert-report.json").read_text()
    assert "TOP-SECRET" not in done.stdout + done.stderr + report
    bad = json.loads(report)["bad_files"]
    assert len(bad) == 4 and json.loads(report)["kept"] == 1
    assert sum("outside the release" in why for why in bad.values()) == 2
    assert "outside the raw folder" in bad["ap10k/data/000004.jpg"]
    assert "not a regular file" in bad["ap10k/data/000005.jpg"]


def test_hostile_raw_files_are_bad_files_not_tracebacks(tmp_path):
    """Declared sizes are checked before allocating (a NIfTI header asking for ~28 GiB from a few
    bytes), a truncated or foreign file is one bad file, and the rest converts (exit 0)."""
    import nibabel as nib

    raw = tmp_path / "raw"
    raw.mkdir()
    for subject in ("IXI002-Guys-0828", "IXI012-HH-1211"):
        for mod in ("T2", "PD"):
            vol = np.random.default_rng(1).uniform(0, 100, (6, 7, 5)).astype(np.float32)
            nib.save(nib.Nifti1Image(vol, np.eye(4)), raw / f"{subject}-{mod}.nii.gz")
    huge = nib.Nifti1Header()
    huge.set_data_shape((3000, 3000, 400))
    huge.set_data_dtype(np.float64)
    with open(raw / "IXI099-IOP-0001-T2.nii", "wb") as f:
        f.write(huge.binaryblock + b"\x00" * 4)
    shutil.copy(raw / "IXI012-HH-1211-PD.nii.gz", raw / "IXI099-IOP-0001-PD.nii.gz")
    (raw / "IXI013-HH-1212-T2.nii.gz").write_bytes(b"\x1f\x8b truncated")
    shutil.copy(raw / "IXI012-HH-1211-PD.nii.gz", raw / "IXI013-HH-1212-PD.nii.gz")
    out = tmp_path / "out"
    done = _convert("ixi", raw, out)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    bad = json.loads((out / "ixi-axial" / "convert-report.json").read_text())["bad_files"]
    assert "over the limit" in bad["IXI099-IOP-0001-T2.nii"]
    assert "cannot read NIfTI" in bad["IXI013-HH-1212-T2.nii.gz"]
    assert len(load_dataset(out / "ixi-axial")) == 2


@pytest.mark.slow
def test_hdf5_links_and_external_storage_are_refused(tmp_path):
    """NYU's .mat is HDF5: a soft or external link, or a dataset with external storage, would read
    other files. Each is refused with one line (exit 1), nothing written."""
    import h5py
    import scipy.io

    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"TOP-SECRET" * 1000)
    for how in ("external-link", "soft-link", "external-storage"):
        raw = tmp_path / how
        raw.mkdir()
        scipy.io.savemat(raw / "classMapping40.mat", {"mapClass": np.arange(1, 895) % 40 + 1,
                                                      "className": np.array([f"c{i}" for i in range(40)], object)})
        with h5py.File(raw / "nyu_depth_v2_labeled.mat", "w") as f:
            f["images"] = np.zeros((1, 3, 8, 6), np.uint8)
            f["depths"] = np.ones((1, 8, 6), np.float32)
            if how == "external-link":
                f["labels"] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/labels")
            elif how == "soft-link":
                f["labels"] = h5py.SoftLink("/images")
            else:
                f.create_dataset("labels", (1, 8, 6), np.uint8, external=[(str(outside), 0, 48)])
        done = _convert("nyuv2", raw, tmp_path / "out")
        assert done.returncode == 1, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "refused" in done.stderr and "TOP-SECRET" not in done.stderr
        assert not (tmp_path / "out" / "nyuv2").exists()


def test_voc_xml_entities_are_refused(tmp_path):
    """LLVIP's VOC XML (bupt-ai-cz/LLVIP Annotations/<id>.xml): an external entity (XXE) or an
    entity-expansion bomb in an annotation is one bad file, its target never read."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    root = tmp_path / "raw" / "LLVIP"
    bodies = {
        "190001": "<annotation><size><width>16</width><height>12</height></size><object><name>person</name>"
                  "<bndbox><xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>",
        "190026": f'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file://{secret}">]>'
                  "<annotation><folder>&x;</folder></annotation>",
        "190051": '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
                  '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]><annotation><folder>&c;</folder></annotation>',
    }
    for i in range(51):
        stem = f"{190001 + i}"
        for modality in ("visible", "infrared"):
            (root / modality / "train").mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / modality / "train" / f"{stem}.jpg"), np.full((12, 16, 3), 60, np.uint8))
        (root / "Annotations").mkdir(exist_ok=True)
        (root / "Annotations" / f"{stem}.xml").write_text(bodies.get(stem, bodies["190001"]))
    done = _convert("llvip", tmp_path / "raw", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "out" / "llvip" / "convert-report.json").read_text()
    assert "TOP-SECRET" not in report + done.stderr + done.stdout
    bad = json.loads(report)["bad_files"]
    assert set(bad) == {"LLVIP/Annotations/190026.xml", "LLVIP/Annotations/190051.xml"}
    assert all("entity" in why for why in bad.values())


def test_mat_declaring_more_than_the_cap_is_a_bad_file(tmp_path):
    """Duke's MATLAB v5 subject files (2015_BOE_Chiu.zip: Subject_NN.mat with images,
    manualLayers1, manualFluid1): a compressed file declaring far more than it holds (a 4 MB .mat
    asked for 4.4 GB) is refused from its declared shape, before loading. Shown at a lowered cap
    so the test file stays small: 16 MB declared, ~20 KB on disk."""
    import scipy.io

    raw = tmp_path / "raw"
    raw.mkdir()
    h, w, n = 12, 10, 3
    layers = np.full((8, w, n), np.nan)
    layers[0, :, 1], layers[7, :, 1] = 3, 10
    fluid = np.zeros((h, w, n))
    fluid[4:6, 2:4, 1] = 1
    scipy.io.savemat(raw / "Subject_01.mat", {"images": np.zeros((h, w, n), np.uint8), "manualLayers1": layers,
                                              "manualFluid1": fluid})
    scipy.io.savemat(raw / "Subject_02.mat", {"images": np.zeros((1024, 2048, 1), np.uint8),
                                              "manualLayers1": np.zeros((8, 2048, 1))}, do_compression=True)
    assert (raw / "Subject_02.mat").stat().st_size < 100_000
    done = subprocess.run([sys.executable, "-m", "icl.data", "convert", "duke", str(raw), str(tmp_path / "out")],
                          cwd=_REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ICL_CONVERT_MAX_ARRAY_BYTES": str(8 << 20)})
    assert done.returncode == 0, done.stderr
    bad = json.loads((tmp_path / "out" / "duke-layers" / "convert-report.json").read_text())["bad_files"]
    assert "declares shape [1024, 2048, 1]" in bad["Subject_02.mat"] and "over the limit" in bad["Subject_02.mat"]
    assert len(load_dataset(tmp_path / "out" / "duke-layers")) == 1
