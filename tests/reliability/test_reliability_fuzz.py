"""Seeded fuzzing of every reader: only the documented error types may escape.

Each reader runs for ``ICL_FUZZ_SECONDS`` seconds (default 2; set more for a longer campaign)
over a deterministic sequence of mutations: byte flips, truncations, hostile snippets (deep
nesting, huge numbers, invalid UTF-8, NUL, escaping paths) and JSON-level field replacements.
A failure names the iteration's seed, so it can be replayed.
"""

import json
import os
import shutil
import time
import traceback

import numpy as np
import pytest

from icl.benchmarks.best50.package import PackageError, load_image, load_package
from icl.benchmarks.best50.predictions import PredictionsError, load_predictions
from icl.benchmarks.best50.score import score_records
from icl.benchmarks.best50.synthetic import write_package
from icl.data.dataset import DataError, DatasetMeta, load_dataset
from icl.data.images import ImageError
from icl.data.seeds import derive_seed, rng as seeded_rng
from icl.data.writer import DatasetWriter

SECONDS = float(os.environ.get("ICL_FUZZ_SECONDS", "2"))
SNIPPETS = [b"[" * 3000, b"{" * 3000, b"9" * 5000, b"1e999", b"-1e999", b"NaN", b"Infinity", b"\xff\xfe\xfa",
            b"\x00", b'"', b"\\", b"\\ud800", b"null", b"{}", b"[]", b"-1", b"true", b"0", b"\n", b"\r\n",
            b'"../../etc/passwd"', b'"/etc/passwd"', b"," * 10, b'"' + b"x" * 10000 + b'"']
VALUES = [None, [], {}, "", -1, 0, 1.5, 1e308, int("9" * 4000), True, "x" * 5000, "../../etc/passwd", "/etc/passwd",
          "a\x00b", [[0, 0, 1e308, 1e308]], [[-5, -5, -1, -1]], [[0, 0, 0, 0]], [[1, 2, 3]], [["a", 1, 2, 3]],
          "<bbox_start><x0><y0><x5000><y5000><bbox_end>", [1024, 1024], [0, 0], [10 ** 30, 1]]


def _nested(depth):
    value = 0
    for _ in range(depth):
        value = [value]
    return value


def _mutate_bytes(gen, data: bytes) -> bytes:
    op = int(gen.integers(4))
    pos = int(gen.integers(0, max(len(data), 1)))
    if op == 0 and data:
        b = bytearray(data)
        b[pos] = int(gen.integers(256))
        return bytes(b)
    if op == 1:
        return data[:pos]
    if op == 2:
        return data[:pos] + SNIPPETS[int(gen.integers(len(SNIPPETS)))] + data[pos:]
    return data[:pos] + data[pos + int(gen.integers(1, 50)):]


def _mutate_json_line(gen, line: str) -> str:
    """One JSON-level change (delete, replace, deepen or add a field) of a JSON object text."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # an earlier byte mutation broke it already
        return line
    if not isinstance(obj, dict) or not obj:
        return line
    keys = sorted(obj)
    key = keys[int(gen.integers(len(keys)))]
    op = int(gen.integers(4))
    if op == 0:
        del obj[key]
    elif op == 1:
        obj[key] = VALUES[int(gen.integers(len(VALUES)))]
    elif op == 2:
        obj[key] = _nested(int(gen.integers(10, 400)))
    else:
        obj["extra_" + key] = VALUES[int(gen.integers(len(VALUES)))]
    return json.dumps(obj)


def _mutate_lines(gen, text: str) -> bytes:
    """1-3 changes to the lines of a JSONL text, each JSON-level or byte-level."""
    lines = [x.encode() for x in text.splitlines()]
    for _ in range(int(gen.integers(1, 4))):
        i = int(gen.integers(len(lines)))
        if gen.random() < 0.5:
            try:
                lines[i] = _mutate_json_line(gen, lines[i].decode("utf-8")).encode()
            except UnicodeDecodeError:  # an earlier byte mutation made it invalid UTF-8
                pass
        else:
            lines[i] = _mutate_bytes(gen, lines[i])
    return b"\n".join(lines) + b"\n"


def _campaign(name, one_iteration):
    """Run ``one_iteration(gen)`` over seeded generators for SECONDS; report the failing seed."""
    deadline = time.monotonic() + SECONDS
    i = 0
    while time.monotonic() < deadline or i < 5:
        seed = derive_seed(0, "fuzz", "*", name, f"iteration-{i}")
        try:
            one_iteration(np.random.default_rng(seed))
        except Exception:
            pytest.fail(f"{name} iteration {i} (seed {seed}) raised an undocumented error:\n{traceback.format_exc()}")
        i += 1
    print(f"fuzz {name}: {i} iterations in {SECONDS:g} s")  # shown with pytest -s
    return i


@pytest.fixture(scope="module")
def best50(tmp_path_factory):
    return write_package(tmp_path_factory.mktemp("fuzz50") / "pkg", n_per_class=2, classes=("circle", "ring"),
                         ks=(1, 2))


def test_fuzz_package_reader(tmp_path, best50):
    root = tmp_path / "pkg"
    shutil.copytree(best50, root)
    inputs = {p.name: p.read_text() for p in (root / "inputs").iterdir()}
    images = sorted(p for p in root.rglob("*.png"))
    originals = {p: p.read_bytes() for p in images}

    def iteration(gen):
        for name, text in inputs.items():
            (root / "inputs" / name).write_bytes(_mutate_lines(gen, text) if gen.random() < 0.7 else text.encode())
        victim = images[int(gen.integers(len(images)))]
        if gen.random() < 0.3:
            victim.write_bytes(_mutate_bytes(gen, originals[victim]))
        try:
            pkg = load_package(root)
        except PackageError:
            pkg = None
        if pkg is not None:
            for samples in pkg.samples.values():
                for s in samples[:2]:
                    try:
                        load_image(s.support_image), load_image(s.query_image)
                    except ImageError:
                        pass
        victim.write_bytes(originals[victim])

    assert _campaign("package", iteration) >= 5


def test_fuzz_predictions_reader(tmp_path, best50):
    pkg = load_package(best50)
    lines = []
    for k, samples in pkg.samples.items():
        for j, s in enumerate(samples):
            row = {"sample_id": s.sample_id, "class": s.cls, "k": k, "query_gt_boxes_pixel": s.query_gt_boxes_pixel.tolist(),
                   "query_image_size": list(s.query_image_size), "model": "m"}
            if j % 2:
                row["pred_boxes_pixel"] = s.query_gt_boxes_pixel.tolist()
            else:
                row["response"] = "<bbox_start><x1><y2><x300><y400><bbox_end> and more"
            lines.append(json.dumps(row))
    text = "\n".join(lines) + "\n"
    path = tmp_path / "pred.jsonl"

    def iteration(gen):
        path.write_bytes(_mutate_lines(gen, text))
        for package in (None, pkg):
            try:
                pred = load_predictions(path, package)
            except PredictionsError:
                continue
            score_records(pred.records)
            if package is not None:
                pred.coverage(package).warnings()
                json.dumps(pred.coverage(package).to_json())

    assert _campaign("predictions", iteration) >= 5


META = DatasetMeta(name="fuzz", version="1", tasks=("segmentation", "depth", "keypoints", "detection", "object_removal"),
                   classes=("background", "thing"), depth_range=(0.0, 10.0), pairs=(("object_removal", "removed"),))


def test_fuzz_dataset_records(tmp_path):
    root = tmp_path / "ds"
    gen0 = seeded_rng(0, "fuzz", "*", "*", "dataset")
    writer = DatasetWriter(root, META)
    for i in range(3):
        writer.add(f"s{i}", image=gen0.integers(0, 256, (6, 9, 3), dtype=np.uint8),
                   segmentation=gen0.integers(0, 2, (6, 9)).astype(np.uint8),
                   depth=gen0.uniform(1, 9, (6, 9)).astype(np.float32), keypoints=np.array([[1.0, 2.0, 2]]),
                   boxes=np.array([[0.0, 0.0, 4.0, 3.0]]), box_classes=np.array([1]),
                   paired={"removed": gen0.integers(0, 256, (6, 9, 3), dtype=np.uint8)},
                   paired_info={"removed": {"box": [1, 1, 3, 3]}})
    files = sorted(p for p in root.rglob("*") if p.is_file())
    originals = {p: p.read_bytes() for p in files}

    def iteration(gen):
        victims = [files[int(gen.integers(len(files)))] for _ in range(int(gen.integers(1, 3)))]
        for v in victims:
            data = originals[v]
            if v.suffix == ".json" and gen.random() < 0.6:
                v.write_text(_mutate_json_line(gen, data.decode()))
            else:
                v.write_bytes(_mutate_bytes(gen, data))
        try:
            ds = load_dataset(root)
        except DataError:
            ds = None
        if ds is not None:
            for sid in ds.ids():
                try:
                    ds.load(sid)
                except DataError:
                    pass
        for v in victims:
            v.write_bytes(originals[v])

    assert _campaign("dataset", iteration) >= 5
