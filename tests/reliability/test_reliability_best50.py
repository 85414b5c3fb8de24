"""best50 under hostile input: paths out of the package, undecodable images, coverage holes,
repeats, and a kill while predictions are appended."""

import json
import os
import shutil
from pathlib import Path

import pytest

from icl.benchmarks.best50.package import PackageError, load_image, load_package
from icl.benchmarks.best50.predictions import load_predictions, read_predictions, PredictionsError
from icl.benchmarks.best50.score import score_records
from icl.benchmarks.best50.synthetic import write_package
from icl.data.images import ImageError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return write_package(tmp_path_factory.mktemp("b50") / "pkg", n_per_class=2, classes=("circle", "square"),
                         ks=(1, 2))


@pytest.fixture
def pkg_dir(tmp_path, pristine):
    root = tmp_path / "pkg"
    shutil.copytree(pristine, root, symlinks=True)
    return root


def _set(root, k, index, **fields):
    path = root / "inputs" / f"inputs_k{k}.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[index].update(fields)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("exists", [True, False])
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink-file", "symlink-dir"])
def test_paths_out_of_the_package_are_refused_with_the_line(tmp_path, pkg_dir, how, exists):
    outside = tmp_path / "outside" / "secret.png"
    outside.parent.mkdir()
    if exists:
        shutil.copy(next((pkg_dir / "query_images").rglob("*.png")), outside)
    if how == "dotdot":
        rel = "query_images/../../outside/secret.png"
    elif how == "absolute":
        rel = str(outside)
    elif how == "symlink-file":
        rel = "query_images/link.png"
        os.symlink(outside, pkg_dir / rel)
    else:
        rel = "linked/secret.png"
        os.symlink(outside.parent, pkg_dir / "linked")
    _set(pkg_dir, 2, 1, query_image=rel)
    with pytest.raises(PackageError) as info:
        load_package(pkg_dir)
    assert info.value.problems == [
        f"inputs/inputs_k2.jsonl:2: field 'query_image': {rel!r} leads outside the package (image paths must be "
        f"package-relative, without '..' and without a symlink out of the package)"]


def test_symlinks_inside_the_package_are_fine(pkg_dir):
    first = sorted((pkg_dir / "query_images").rglob("*.png"))[0]
    os.symlink(first, pkg_dir / "query_images" / "alias.png")
    rows = [json.loads(x) for x in (pkg_dir / "inputs" / "inputs_k1.jsonl").read_text().splitlines()]
    index = next(i for i, r in enumerate(rows) if (pkg_dir / r["query_image"]) == first)
    _set(pkg_dir, 1, index, query_image="query_images/alias.png")
    assert load_package(pkg_dir).samples[1][index].query_image.name == "alias.png"


def test_undecodable_image_fails_its_sample_not_the_package(pkg_dir, pristine):
    s = load_package(pkg_dir).samples[1][2]
    data = s.query_image.read_bytes()
    s.query_image.write_bytes(data[: len(data) // 2])  # the header (and so the size) is intact
    pkg = load_package(pkg_dir)
    clean = load_package(pristine)
    for k in pkg.ks:
        for got, want in zip(pkg.samples[k], clean.samples[k]):
            if got.query_image == s.query_image:
                with pytest.raises(ImageError, match="truncated PNG"):
                    load_image(got.query_image)
                continue
            assert got.prompt == want.prompt
            for a, b in ((got.support_image, want.support_image), (got.query_image, want.query_image)):
                assert (load_image(a) == load_image(b)).all()


def _prediction(s):
    return {"sample_id": s.sample_id, "class": s.cls, "k": s.k, "query_gt_boxes_pixel": s.query_gt_boxes_pixel.tolist(),
            "pred_boxes_pixel": s.query_gt_boxes_pixel.tolist()}


def test_coverage_holes_and_repeats_are_reported(tmp_path, pristine):
    pkg = load_package(pristine)
    samples = pkg.samples[1]
    lines = [_prediction(samples[0])] * 11 + [_prediction(samples[1])]
    path = tmp_path / "pred.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    pred = load_predictions(path, pkg)
    assert [r.line for r in pred.records] == [1, 12]
    assert pred.repeats == {(1, samples[0].sample_id): list(range(1, 12))}
    cov = pred.coverage(pkg)
    assert not cov.complete
    by_k = {c.k: c for c in cov.by_k}
    assert (by_k[1].expected, by_k[1].covered) == (len(samples), 2)
    assert by_k[2].covered == 0 and len(by_k[2].missing) == len(pkg.samples[2])
    assert by_k[1].repeated == ((samples[0].sample_id, 11),)
    warnings = cov.warnings()
    assert warnings[0].startswith(f"k=1: {len(samples) - 2} of {len(samples)} samples have no prediction")
    assert warnings[1].startswith(f"k=1: 1 sample(s) predicted more than once, first line kept ('{samples[0].sample_id}' x11)")
    assert json.loads(json.dumps(cov.to_json()))["1"]["repeated"] == {samples[0].sample_id: 11}
    # the scores of what is covered equal those of a clean file holding each sample once
    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(json.dumps(_prediction(s)) + "\n" for s in samples[:2]))
    assert score_records(pred.records).rows == score_records(read_predictions(clean, pkg)).rows
    with pytest.raises(PredictionsError, match="repeats line 1"):  # the strict reader still refuses
        read_predictions(path, pkg)


def test_lone_surrogates_are_field_errors(tmp_path, pkg_dir):
    path = pkg_dir / "inputs" / "inputs_k1.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    lines[0] = json.dumps(row).replace(json.dumps(row["query_image"]), '"query_images/\\ud800.png"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PackageError, match=r"inputs_k1.jsonl:1: field 'query_image': not valid Unicode"):
        load_package(pkg_dir)
