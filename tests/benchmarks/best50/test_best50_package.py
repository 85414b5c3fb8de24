import json
import shutil

import cv2
import numpy as np
import pytest

from icl.benchmarks.best50.benchmark import Best50
from icl.benchmarks.best50.package import PackageError, image_size, load_package
from icl.models import ChatRequest
from icl.benchmarks.best50.synthetic import DEFAULT_CLASSES, write_package


def test_synthetic_package_loads_with_every_field(package_dir):
    pkg = load_package(package_dir)
    assert pkg.ks == [1, 2, 4, 8] and pkg.classes == sorted(DEFAULT_CLASSES)
    for k, samples in pkg.samples.items():
        assert len(samples) == 2 * len(DEFAULT_CLASSES)
        for s in samples:
            assert s.k == k and len(s.support_boxes_pixel) == k and len(s.support_boxes_tokens) == k
            assert len(s.query_gt_boxes_pixel) == len(s.query_gt_boxes_tokens) >= 1
            assert f"{k} example(s)" in s.prompt and "{k}" in s.prompt_template
            assert s.support_image.is_file() and s.query_image.is_file() and s.support_stem
    assert len(pkg.sha256) == 64


def test_synthetic_package_is_deterministic(tmp_path, package_dir):
    again = write_package(tmp_path / "again", n_per_class=2, seed=1)
    assert load_package(again).sha256 == load_package(package_dir).sha256
    other = write_package(tmp_path / "other", n_per_class=2, seed=2)
    assert load_package(other).sha256 != load_package(package_dir).sha256


def test_request_is_support_query_prompt_with_red_boxes(package_dir):
    bench = Best50({"package": package_dir})
    item = next(it for it in bench.items() if it.group["k"] == 4 and it.payload == bench.package.samples[4][3])
    s = item.payload
    req = bench.request(item)
    assert isinstance(req, ChatRequest) and req.id == f"k4/{s.sample_id}" and req.oracle_answer is None
    (message,) = req.messages
    assert message.role == "user" and message.content[2] == s.prompt and len(message.content) == 3
    support, query = req.images
    assert support.dtype == np.uint8 and support.shape == (s.support_image_size[1], s.support_image_size[0], 3)
    assert query.shape == (s.query_image_size[1], s.query_image_size[0], 3)
    for x0, y0, x1, y1 in s.support_boxes_pixel.astype(int).tolist():
        # the red outline sits 2 px outside the box (clipped to the image), RGB order
        assert support[max(0, y0 - 2), (x0 + x1) // 2].tolist() == [255, 0, 0]
    assert not (query == [255, 0, 0]).all(axis=-1).any()  # the query carries no marks


@pytest.mark.parametrize("ext", ["png", "jpg"])
@pytest.mark.parametrize("hw", [(1, 1), (37, 123), (480, 641)])
def test_image_size_from_headers_matches_opencv(tmp_path, ext, hw):
    path = tmp_path / f"x.{ext}"
    cv2.imwrite(str(path), np.full(hw + (3,), 90, np.uint8))
    img = cv2.imread(str(path))
    assert image_size(path) == (img.shape[1], img.shape[0])


def test_image_size_of_other_formats_and_non_images(tmp_path):
    cv2.imwrite(str(tmp_path / "x.bmp"), np.zeros((5, 9, 3), np.uint8))
    assert image_size(tmp_path / "x.bmp") == (9, 5)
    (tmp_path / "bad.png").write_bytes(b"not an image at all")
    with pytest.raises(ValueError, match="bad.png: unknown image format"):
        image_size(tmp_path / "bad.png")


def _mutated(tmp_path, package_dir, k, index, change):
    root = tmp_path / "pkg"
    shutil.copytree(package_dir, root)
    path = root / "inputs" / f"inputs_k{k}.jsonl"
    lines = path.read_text().splitlines()
    if isinstance(change, str):  # a raw replacement line
        lines[index] = change
    else:
        obj = json.loads(lines[index])
        change(obj)
        lines[index] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("k, change, message", [
    (1, lambda o: o.pop("sample_id"), "missing field 'sample_id'"),
    (1, lambda o: o.update({"class": ""}), "field 'class': expected a non-empty string"),
    (1, lambda o: o.pop("prompt"), "missing field 'prompt'"),
    (2, lambda o: o.update(k=4), "field 'k': expected 2"),
    (2, lambda o: o.update(k="2"), "field 'k'"),
    (1, lambda o: o.update(query_image="query_images/nope.png"), "field 'query_image': 'query_images/nope.png' does not exist"),
    (1, lambda o: o.update(support_image="/etc/hostname"), "leads outside the package"),
    (1, lambda o: o.update(query_image_size=[o["query_image_size"][1], o["query_image_size"][0]]),
     "field 'query_image_size': says"),
    (1, lambda o: o.update(query_image_size=[10]), "field 'query_image_size': expected \\[width, height\\]"),
    (4, lambda o: o["support_boxes_pixel"].pop(), "field 'support_boxes_pixel': expected 4 boxes"),
    (1, lambda o: o["query_gt_boxes_pixel"][0].__setitem__(2, 10_000), "lies outside"),
    (1, lambda o: o["query_gt_boxes_pixel"][0].__setitem__(2, o["query_gt_boxes_pixel"][0][0]),
     "expected x1 > x0"),
    (1, lambda o: o["query_gt_boxes_pixel"][0].__setitem__(1, "3"), "four finite numbers"),
    (1, "{not json", "not valid JSON"),
    (1, "[1, 2]", "expected a JSON object"),
])
def test_invalid_lines_name_file_line_and_field(tmp_path, package_dir, k, change, message):
    root = _mutated(tmp_path, package_dir, k, 2, change)
    with pytest.raises(PackageError, match=message) as info:
        load_package(root)
    assert info.value.problems[0].startswith(f"inputs/inputs_k{k}.jsonl:3: ")


@pytest.mark.parametrize("field, change, warning", [
    ("query_gt_boxes_tokens", lambda o: o["query_gt_boxes_tokens"].append(o["query_gt_boxes_tokens"][0]),
     "field 'query_gt_boxes_tokens': holds 2 box(es), the pixel boxes 1"),
    ("query_gt_boxes_tokens", lambda o: o.update(query_gt_boxes_tokens=["<bbox_start><x1><y2><x3><y4><bbox_end>"]),
     "does not match pixel box"),
    ("query_gt_boxes_tokens", lambda o: o.pop("query_gt_boxes_tokens"), "missing field 'query_gt_boxes_tokens'"),
    ("support_boxes_tokens", lambda o: o.update(support_boxes_tokens="<x1><y2>"),
     "field 'support_boxes_tokens': holds 0 box(es), the pixel boxes 1"),
    ("support_boxes_tokens", lambda o: o.update(support_boxes_tokens=7), "expected a string, got int"),
    ("support_boxes_tokens", lambda o: o.update(support_boxes_tokens="<bbox_start><x0><y0><x2000><y10><bbox_end>"),
     "off the 0-1024 grid"),
    ("support_stem", lambda o: o.pop("support_stem"), "missing field 'support_stem'"),
    ("prompt_template", lambda o: o.update(prompt_template=None), "field 'prompt_template': expected a string"),
])
def test_token_and_descriptive_fields_only_warn(tmp_path, package_dir, field, change, warning):
    root = _mutated(tmp_path, package_dir, 1, 2, change)
    pkg = load_package(root)
    (line,) = [w for w in pkg.warnings if w.startswith("inputs/inputs_k1.jsonl:3: ")]
    assert warning in line
    sample = pkg.samples[1][2]
    clean = load_package(package_dir).samples[1][2]
    # token boxes fall back to the pixel boxes' grid boxes, so they equal the clean package's
    assert sample.query_gt_boxes_tokens == clean.query_gt_boxes_tokens
    assert sample.support_boxes_tokens == clean.support_boxes_tokens
    assert len(pkg.samples[1]) == len(load_package(package_dir).samples[1])


def test_unknown_fields_warn_once_per_file(tmp_path, package_dir):
    root = tmp_path / "pkg"
    shutil.copytree(package_dir, root)
    path = root / "inputs" / "inputs_k2.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows[1:]:
        r["annotator"] = "x"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pkg = load_package(root)
    assert pkg.warnings == [f"inputs/inputs_k2.jsonl:2: unknown field 'annotator' (on {len(rows) - 1} line(s); ignored)"]


def test_published_list_and_integer_token_forms_are_read(tmp_path, package_dir):
    from icl.benchmarks.best50.parse import parse_grid_boxes

    def to_lists(o):
        o["query_gt_boxes_tokens"] = [list(parse_grid_boxes(t)[0]) for t in o["query_gt_boxes_tokens"]]

    pkg = load_package(_mutated(tmp_path, package_dir, 1, 0, to_lists))
    assert not [w for w in pkg.warnings if ":1: " in w]
    assert pkg.samples[1][0].query_gt_boxes_tokens == load_package(package_dir).samples[1][0].query_gt_boxes_tokens


def test_duplicate_ids_and_every_problem_listed(tmp_path, package_dir):
    root = tmp_path / "pkg"
    shutil.copytree(package_dir, root)
    path = root / "inputs" / "inputs_k8.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[0], "oops"]) + "\n")
    with pytest.raises(PackageError) as info:
        load_package(root)
    n = len(lines)
    assert info.value.problems == [
        f"inputs/inputs_k8.jsonl:{n + 1}: sample_id {json.loads(lines[0])['sample_id']!r} repeats line 1",
        f"inputs/inputs_k8.jsonl:{n + 2}: not valid JSON (Expecting value at column 1)"]


def test_missing_inputs_directory(tmp_path):
    with pytest.raises(PackageError, match="no inputs_k"):
        load_package(tmp_path)
