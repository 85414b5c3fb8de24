"""A converter trusted with the only copy of a release, on real subprocesses: it never writes into,
around or over the raw folder (exit 2, one line, nothing changed), never shows a half-written
dataset (SIGKILL mid-run leaves the previous good conversion, or nothing, under the final name),
and takes hostile names and files one at a time (non-UTF-8 names, a truncated JPEG)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from icl.benchmarks.vibe.combinations import present
from icl.data.registry import get_dataset, list_datasets
from tests.data.convert._convert_raw import rng, write_rgb

ROOT = Path(__file__).resolve().parents[3]


def _cli(*args: str, timeout: float = 120, env: dict | None = None, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "icl.data", "convert", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})}, **popen)


def _deepcrack(raw: Path, n: int, side: int = 16) -> Path:
    """DeepCrack's published layout (train_img/*.jpg + train_lab/*.png, DeepCrack.zip)."""
    gen = rng()
    (raw / "train_lab").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        write_rgb(raw / "train_img" / f"{i:05d}.jpg", gen.integers(0, 256, (side, side, 3), dtype=np.uint8))
        mask = np.zeros((side, side), np.uint8)
        mask[side // 2] = 255
        cv2.imwrite(str(raw / "train_lab" / f"{i:05d}.png"), mask)
    return raw


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", ["raw-itself", "inside-raw", "around-raw", "dataset-is-raw"])
def test_output_overlapping_the_release_is_refused(tmp_path, where):
    raw = _deepcrack(tmp_path / "D" / "deepcrack", 3)
    out = {"raw-itself": raw, "inside-raw": raw / "converted", "around-raw": tmp_path,
           "dataset-is-raw": tmp_path / "D"}[where]  # the last: OUT/deepcrack is the release
    before = _tree(tmp_path)
    done = _cli("deepcrack", str(raw), str(out))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was changed" in lines[0] and "Traceback" not in done.stderr
    assert _tree(tmp_path) == before


@pytest.mark.slow
def test_killed_conversion_leaves_the_previous_good_one(tmp_path):
    raw, out = _deepcrack(tmp_path / "raw" / "DeepCrack", 400, side=48), tmp_path / "data"
    small = _deepcrack(tmp_path / "small" / "DeepCrack", 3)
    assert _cli("deepcrack", str(small.parent), str(out)).returncode == 0
    good = _tree(out / "deepcrack")

    # the second conversion is killed half-way (one worker: slow enough to catch in the middle)
    proc = subprocess.Popen([sys.executable, "-m", "icl.data", "convert", "deepcrack", str(raw.parent), str(out)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "ICL_CONVERT_WORKERS": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        building = list(out.glob(".deepcrack.tmp-*/images/*"))
        if len(building) >= 50:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the conversion ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert list(out.glob(".deepcrack.tmp-*")), "the killed build should have left its hidden folder"
    assert _tree(out / "deepcrack") == good  # the previous good conversion, untouched
    assert "deepcrack" in list_datasets(out) and len(get_dataset("deepcrack", root=out)) == 3
    assert [c.task for c in present(out) if c.dataset == "deepcrack"]

    # a rerun completes and clears the killed build's leftovers
    done = _cli("deepcrack", str(raw.parent), str(out))
    assert done.returncode == 0, done.stderr
    assert len(get_dataset("deepcrack", root=out)) == 400 and not list(out.glob(".deepcrack.*"))
    manifest = json.loads((out / "deepcrack" / "manifest.json").read_text())
    assert manifest["complete"] is True and manifest["kept"] == 400 and manifest["paper"] == 537


@pytest.mark.slow
def test_killed_first_conversion_is_absent(tmp_path):
    raw, out = _deepcrack(tmp_path / "raw" / "DeepCrack", 400, side=48), tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "icl.data", "convert", "deepcrack", str(raw.parent), str(out)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "ICL_CONVERT_WORKERS": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(out.glob(".deepcrack.tmp-*/images/*"))) < 50:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (out / "deepcrack").exists()
    assert "deepcrack" not in list_datasets(out) and not [c for c in present(out) if c.dataset == "deepcrack"]
    listed = subprocess.run([sys.executable, "-m", "icl.run", "vibe", "--list", "--data-root", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "0 of 106 present" in listed.stdout and "deepcrack" not in listed.stdout


def test_old_half_written_conversion_is_not_present(tmp_path):
    """A folder written by the old converter when it was killed: meta.json and some samples, no
    completion manifest. It is not listed, not present, and opening it says why."""
    out = tmp_path / "data"
    (out / "suim" / "images").mkdir(parents=True)
    (out / "suim" / "meta.json").write_text(json.dumps({"name": "suim", "version": "v", "tasks": ["flip"]}))
    write_rgb(out / "suim" / "images" / "a.png", np.zeros((4, 4, 3), np.uint8))
    assert "suim" not in list_datasets(out) and present(out) == []
    with pytest.raises(Exception, match="incomplete conversion"):
        get_dataset("suim", root=out)


def test_non_utf8_name_and_truncated_jpeg(tmp_path):
    """cv2.imread of a non-UTF-8 path crashed the process (SIGSEGV, exit 139, a dataset holding only
    meta.json); a truncated JPEG became a 68% grey image. Now: bytes decoded in memory, the rest
    converts, the truncated file is reported by name."""
    raw, out = _deepcrack(tmp_path / "raw" / "DeepCrack", 4), tmp_path / "data"
    odd = os.fsencode(raw / "train_img") + b"/caf\xe9.jpg"
    write_rgb(tmp_path / "tmp.jpg", rng().integers(0, 256, (16, 16, 3), dtype=np.uint8))
    Path(os.fsdecode(odd)).write_bytes((tmp_path / "tmp.jpg").read_bytes())
    # (cv2.imwrite itself crashes on such a path: the bytes are encoded in memory)
    mask = cv2.imencode(".png", np.zeros((16, 16), np.uint8))[1].tobytes()
    Path(os.fsdecode(os.fsencode(raw / "train_lab") + b"/caf\xe9.png")).write_bytes(mask)
    jpeg = (raw / "train_img" / "00001.jpg").read_bytes()
    (raw / "train_img" / "00001.jpg").write_bytes(jpeg[: len(jpeg) // 2])  # cut short
    done = _cli("deepcrack", str(raw.parent), str(out))
    assert done.returncode == 0, done.stderr
    assert "bad raw file DeepCrack/train_img/00001.jpg: truncated JPEG" in done.stderr
    ds = get_dataset("deepcrack", root=out)
    assert ds.ids() == ["00000", "00002", "00003", "caf-xe9"]
    assert ds.problems == [] and ds.validate() == 4


def test_convert_all_finds_every_release(tmp_path):
    """``convert all RAW_ROOT OUT_ROOT``: each folder whose layout a converter recognises is
    converted (DeepCrack.zip's folders; SUIM's train_val/ + TEST/), an unknown folder is named and
    skipped, and OUT_ROOT inside RAW_ROOT is refused like any overlap."""
    raw_root, out = tmp_path / "releases", tmp_path / "data"
    _deepcrack(raw_root / "DeepCrack", 3)
    for part, stem in (("train_val", "d_r_1_"), ("TEST", "d_r_2_")):
        write_rgb(raw_root / "SUIM" / part / "images" / f"{stem}.jpg", np.zeros((6, 8, 3), np.uint8))
        write_rgb(raw_root / "SUIM" / part / "masks" / f"{stem}.bmp", np.zeros((6, 8, 3), np.uint8))
    (raw_root / "notes").mkdir()
    done = _cli("all", str(raw_root), str(out))
    assert done.returncode == 0, done.stderr
    assert "notes: skipped: no known release layout" in done.stderr
    assert "deepcrack: 3/537 (paper) samples kept" in done.stdout and "suim: 2/1635 (paper)" in done.stdout
    assert sorted(d for d in list_datasets(out) if d in ("deepcrack", "suim")) == ["deepcrack", "suim"]
    refused = _cli("all", str(raw_root), str(raw_root / "out"))
    assert refused.returncode == 2 and not (raw_root / "out").exists()


def test_ap10k_after_its_readme_rename(tmp_path):
    """AP-10K's README (AlexTheBad/AP-10K, README.md) unzips into data/ and runs
    ``mv data/ap-10k data/ap10k``: converting ``data/ap10k`` into ``data`` would have replaced the
    release with the dataset (exit 2 now, nothing changed); into another folder it converts."""
    data = tmp_path / "data"
    root = data / "ap10k"
    (root / "annotations").mkdir(parents=True)
    kp = [v for k in range(17) for v in (1 + k % 10, 1 + k % 8, 2)]
    coco = {"images": [{"id": 1, "file_name": "000000000001.jpg", "width": 16, "height": 12}],
            "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [1, 1, 10, 8], "keypoints": kp}],
            "categories": [{"id": 3, "name": "dog"}]}
    for split in ("train", "val", "test"):
        (root / "annotations" / f"ap10k-{split}-split1.json").write_text(json.dumps(coco if split == "train" else
                                                                                   {**coco, "images": [], "annotations": []}))
    write_rgb(root / "data" / "000000000001.jpg", np.full((12, 16, 3), 77, np.uint8))
    before = _tree(data)
    refused = _cli("ap10k", str(root), str(data))
    assert refused.returncode == 2 and _tree(data) == before
    done = _cli("ap10k", str(data), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert get_dataset("ap10k", root=tmp_path / "out").ids() == ["000000000001"]


def test_failed_rerun_keeps_the_previous_good_one(tmp_path):
    """A rerun that fails (here every image of the new release is corrupt: no sample survives)
    used to delete the previous good conversion first; now it exits 1 and leaves it as it was."""
    out = tmp_path / "data"
    assert _cli("deepcrack", str(_deepcrack(tmp_path / "good" / "DeepCrack", 3).parent), str(out)).returncode == 0
    good = _tree(out / "deepcrack")
    broken = _deepcrack(tmp_path / "broken" / "DeepCrack", 2)
    for p in (broken / "train_img").iterdir():
        p.write_bytes(b"\xff\xd8\xff garbage")
    done = _cli("deepcrack", str(broken.parent), str(out))
    assert done.returncode == 1 and "no sample survived" in done.stderr
    assert _tree(out / "deepcrack") == good and not list(out.glob(".deepcrack.*"))


def test_previous_dataset_moved_aside_by_a_killed_conversion_is_put_back(tmp_path):
    """Where no atomic exchange exists the previous dataset is renamed aside for an instant; a
    conversion killed right then leaves it as ``.<name>.old-<pid>-<hex>``: the next conversion
    puts it back before building (and replaces it only once complete)."""
    out = tmp_path / "data"
    assert _cli("deepcrack", str(_deepcrack(tmp_path / "good" / "DeepCrack", 3).parent), str(out)).returncode == 0
    good = _tree(out / "deepcrack")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / "deepcrack").rename(out / f".deepcrack.old-{int(dead.stdout)}-0123abcd")
    broken = _deepcrack(tmp_path / "broken" / "DeepCrack", 1)
    (broken / "train_img" / "00000.jpg").write_bytes(b"\xff\xd8\xff garbage")
    assert _cli("deepcrack", str(broken.parent), str(out)).returncode == 1  # fails: nothing replaces it
    assert _tree(out / "deepcrack") == good and not list(out.glob(".deepcrack.*"))
