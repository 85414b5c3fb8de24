"""Fixtures: a fabricated tiny copy of the VL-ICL release layout (every task folder with its
``query.json``, ``support.json`` and PNG images), and a driver of the plugin at the interface level
(items -> request -> model -> follow-ups -> judge -> score), standing in for the runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np
import pytest

from icl.benchmarks.base import Benchmark
from icl.benchmarks.vlicl.records import image_list


def _png(root: Path, rel: str, value: int) -> str:
    """A 12x16 PNG whose pixels encode ``value`` (so tests can tell images apart)."""
    img = np.zeros((12, 16, 3), np.uint8)
    img[..., 0] = value % 256
    img[..., 1] = (value // 256) % 256
    img[..., 2] = 7
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(root / rel), img[:, :, ::-1])
    return rel


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


def make_release(root: Path) -> Path:
    """Write the fabricated release under ``root`` and return it."""
    nxt = _Counter()

    def img(task: str, split: str = "support") -> str:
        n = nxt()  # the release keeps query and support images in their own folders
        return _png(root, f"{task}/{split}/{n}.png", n)

    def dump(task: str, queries: list, support: list) -> None:
        (root / task).mkdir(parents=True, exist_ok=True)
        (root / task / "query.json").write_text(json.dumps(queries, indent=1))
        (root / task / "support.json").write_text(json.dumps(support, indent=1))

    names = ["dax", "blicket", "perpo"]
    dump("open_mi", [{"id": f"m{i}", "image": [img("open_mi", "query")], "question": "This is a", "answer": names[i % 3],
                      "classes": names,
                      "support": {n: {"images": [img("open_mi") for _ in range(5)], "real_name": f"real_{n}"}
                                  for n in names}, "real_name": f"real_{names[i % 3]}"} for i in range(3)], [])
    dump("clevr", [{"id": f"c{i}", "image": [img("clevr", "query")], "question": "color: red", "answer": i + 1} for i in range(3)],
         [{"id": f"cs{i}", "image": [img("clevr")], "question": "shape: cube", "answer": i % 4} for i in range(10)])
    for task, n_img in (("operator_induction", 1), ("operator_induction_interleaved", 2)):
        dump(task, [{"id": f"o{i}", "image": [img(task, "query") for _ in range(n_img)], "question": "What is the result?",
                     "operator": "+-x"[i % 3], "answer": [5, -3, 4][i % 3]} for i in range(3)],
             [{"id": f"os{i}", "image": [img(task) for _ in range(n_img)], "question": "What is the result?",
               "answer": [i + 2, i - 2, 2 * i]} for i in range(10)])
    dump("textocr", [{"id": f"t{i}", "image": img("textocr", "query"), "question": "What text?", "answer": f"word{i}"}
                     for i in range(3)],
         # support images as lists: every branch of the reference's ICL_I2T_inference iterates a support
         # record's 'image' (a bare path would be read character by character); queries go through
         # load_image, which takes either
         [{"id": f"ts{i}", "image": [img("textocr")], "question": "What text?", "answer": f"sup{i}"} for i in range(10)])
    dump("matching_mi", [{"id": f"p{i}", "image": [img("matching_mi", "query"), img("matching_mi", "query")], "question": "Same?",
                          "answer": ["yes", "no"][i % 2]} for i in range(3)],
         [{"id": f"ps{i}", "same": {"image": [img("matching_mi"), img("matching_mi")], "question": "Same?",
                                    "answer": "yes"},
           "diff": {"image": [img("matching_mi"), img("matching_mi")], "question": "Same?", "answer": "no"}}
          for i in range(6)])
    for task in ("open_t2i_mi", "fast_count_t2i", "fast_attr_t2i"):
        dump(task, [{"id": f"g{i}", "question": f"Generate a {names[i % 3]}", "task_label": names[i % 3],
                     "answer": f"concept{i}", "classes": names,
                     "support": {n: {"images": [img(task) for _ in range(5)],
                                     "captions": [f"{n} thing{j}" for j in range(5)]} for n in names}}
                    for i in range(3)], [])
    sup = []
    for i in range(12):
        latent = "object" if i % 2 == 0 else "color"
        sup.append({"id": f"bs{i}", "image": img("cobsat"), "task": "color_I" if latent == "object" else "color_II",
                    "latent": latent, "object": ["car", "cup"][i % 4 // 2], "color": ["red", "blue"][i % 3 // 2],
                    "question": "x: "})
    dump("cobsat", [{"id": f"b{i}", "task": "color_I", "latent": "object", "object": "car", "color": "blue",
                     "question": "blue: ", "answer": ["car", "blue"]} for i in range(3)], sup)
    return root


# The published release as it is, after its unzip.sh. Sources:
# - huggingface.co/datasets/ys-zong/VL-ICL, tree at 6c63a33 (its newest commit, "Update README.md"):
#   the folders clevr, clevr_text, cobsat, matching_mi, open_mi, open_t2i_mi, operator_induction,
#   operator_induction_interleaved, operator_induction_interleaved_text, operator_induction_text,
#   textocr; no fast_count_t2i / fast_attr_t2i. Its only text data is commit 469851d ("add text ICL
#   data"), which added exactly the three *_text folders, each holding query.json and support.json
#   and nothing else (tree/6c63a33/operator_induction_text, .../operator_induction_interleaved_text,
#   tree/main/clevr_text). No text folder of open_mi, matching_mi, open_t2i_mi or cobsat is published.
# - unzip.sh of that dataset: dirs=(clevr cobsat matching_mi open_mi open_t2i_mi operator_induction
#   operator_induction_interleaved textocr), each {dir}/support.zip and {dir}/query.zip unpacked
#   into {dir} (the text folders have no zips).
# - the reference code reads {dataDir}/{dataset}/query.json and support.json (ys-zong/VL-ICL
#   utils/utils.py load_data).
PUBLISHED_IMAGE_TASKS = ("open_mi", "clevr", "operator_induction", "operator_induction_interleaved", "textocr",
                         "matching_mi", "open_t2i_mi", "cobsat")
PUBLISHED_TEXT_FOLDERS = ("clevr_text", "operator_induction_text", "operator_induction_interleaved_text")

# The text folders the reference code opens for the four tasks whose text version the release does
# not publish (ys-zong/VL-ICL utils/utils.py load_text_data: {dataDir}/{dataset}/query.json and
# support.json for dataset in open_mi_captioned, cobsat_text, open_t2i_mi_text, matching_mi_text, ...).
REFERENCE_ONLY_TEXT_FOLDERS = {"open_mi": "open_mi_captioned", "matching_mi": "matching_mi_text",
                               "open_t2i_mi": "open_t2i_mi_text", "cobsat": "cobsat_text"}


def make_published_release(root: Path) -> Path:
    """The fabricated release without the ``fast_*`` folders, with the three published text
    folders (records with the numbers or scene written into ``question``, no ``image``), and an
    ``open_mi/support.json`` that no episode reads (valid JSON, records of no known shape)."""
    make_release(root)
    for task in ("fast_count_t2i", "fast_attr_t2i"):
        shutil.rmtree(root / task)
    (root / "open_mi" / "support.json").write_text(json.dumps([{"unused": True}, 3]))

    def dump(folder: str, queries: list, support: list) -> None:
        (root / folder).mkdir()
        (root / folder / "query.json").write_text(json.dumps(queries, indent=1))
        (root / folder / "support.json").write_text(json.dumps(support, indent=1))

    dump("clevr_text", [{"id": f"ct{i}", "question": f"Objects: {i + 1} red cubes. color: red", "answer": i + 1}
                        for i in range(3)],
         [{"id": f"cts{i}", "question": f"Objects: {i} cubes. shape: cube", "answer": i} for i in range(10)])
    for folder in ("operator_induction_text", "operator_induction_interleaved_text"):
        dump(folder, [{"id": f"ot{i}", "question": f"{i + 2} ? {i + 1} = ?", "operator": "+-x"[i % 3],
                       "answer": [2 * i + 3, 1, (i + 2) * (i + 1)][i % 3]} for i in range(3)],
             [{"id": f"ots{i}", "question": f"{i} ? 2 = ?", "answer": [i + 2, i - 2, 2 * i]} for i in range(10)])
    assert sorted(p.name for p in root.iterdir()) == sorted(PUBLISHED_IMAGE_TASKS + PUBLISHED_TEXT_FOLDERS)
    return root


def _drop_images(value: Any) -> Any:
    """``value`` with every ``image`` field replaced by a ``caption`` per image, and each per-class
    entry's images captioned."""
    if isinstance(value, list):
        return [_drop_images(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _drop_images(v) for k, v in value.items() if k != "image"}
    if "image" in value:
        out["caption"] = [f"a picture of record {value.get('id', '?')}"] * len(image_list(value["image"]))
    if "images" in out and "captions" not in out:
        out["captions"] = [f"a picture, number {j}" for j in range(len(out["images"]))]
    return out


def add_reference_text_folders(root: Path) -> Path:
    """Add the four text folders only the reference code names (``REFERENCE_ONLY_TEXT_FOLDERS``)
    to a fabricated release, as a copy of its authors' data would hold them. Their record shapes
    are published nowhere reachable (no release snapshot, no script that reads them): they are
    the image task's records without ``image`` fields, per-class images captioned -- the shape the
    loader accepts, not a known one; what the test shows is which folder names are read."""
    for task, folder in REFERENCE_ONLY_TEXT_FOLDERS.items():
        (root / folder).mkdir()
        for kind in ("query", "support"):
            records = json.loads((root / task / f"{kind}.json").read_text())
            (root / folder / f"{kind}.json").write_text(json.dumps(_drop_images(records), indent=1))
    return root


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("vlicl_release"))


@pytest.fixture(scope="session")
def published_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_published_release(tmp_path_factory.mktemp("vlicl_published"))


@pytest.fixture(scope="session")
def reference_text_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published release plus the four text folders only the reference code names."""
    return add_reference_text_folders(make_published_release(tmp_path_factory.mktemp("vlicl_reference_text")))


def drive(bench: Benchmark, model: Any, judge: Any, items: list | None = None,
          model_name: str = "model") -> list[dict[str, Any]]:
    """Score rows of ``model`` on ``bench`` the way the runner composes the seam."""
    items = list(bench.items()) if items is None else items
    first = model.predict([bench.request(i) for i in items])
    rows = []
    for item, answer in zip(items, first):
        answers = [answer]
        while (nxt := bench.followup(item, answers)) is not None:
            answers.append(model.predict([nxt])[0])
        jr = list(bench.judge_requests(item, answers[-1]))
        verdicts = judge.predict(jr) if jr else []
        rows.append({"model": model_name, "key": item.key, **item.group, **bench.score(item, answers[-1], verdicts)})
    return rows


@pytest.fixture(scope="session")
def driver() -> Callable[..., list[dict[str, Any]]]:
    return drive
