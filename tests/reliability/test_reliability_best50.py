"""best50 under hostile input: paths out of the package, undecodable images, coverage holes,
repeats, and a kill while predictions are appended."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from icl.benchmarks.best50.package import PackageError, build_request, load_package
from icl.benchmarks.best50.predictions import PredictionsLog, load_predictions, read_predictions, PredictionsError
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
                    build_request(got)
                continue
            a, b = build_request(got), build_request(want)
            assert a.prompt == b.prompt and all((x == y).all() for x, y in zip(a.images, b.images))


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


APPENDER = textwrap.dedent("""
    import sys
    from icl.benchmarks.best50.predictions import PredictionsLog
    with PredictionsLog(sys.argv[1], "m") as log:
        print(len(log.done), flush=True)
        i = 0
        while True:
            log.append([{"k": 1, "sample_id": f"s{i + j}", "response": "x" * 5000} for j in range(50)])
            i += 50
""")


def test_resume_only_appends_and_survives_a_kill(tmp_path):
    path = tmp_path / "predictions.jsonl"
    with PredictionsLog(path, "m") as log:
        log.append([{"k": 1, "sample_id": "first", "response": ""}])
    proc = subprocess.Popen([sys.executable, "-c", APPENDER, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "1"
    before = path.read_bytes()
    while path.stat().st_size < 3_000_000:
        pass
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    killed = path.read_bytes()
    # a torn last line is cut; nothing before it changes
    with PredictionsLog(path, "m") as log:
        after = path.read_bytes()
        assert killed.startswith(after) and after.startswith(before) and after.endswith(b"\n")
        assert len(killed) - len(after) < 50 * 5100
        done = set(log.done)
        assert len(done) == after.count(b"\n")
        log.append([{"k": 1, "sample_id": "last", "response": ""}])
    assert path.read_bytes().startswith(after)
    assert [json.loads(x)["sample_id"] for x in path.read_text().splitlines()][-1] == "last"
    with pytest.raises(ValueError, match="written by model 'm', not 'other'"):
        PredictionsLog(path, "other")
    with open(path, "ab") as f:
        f.write(b"{broken}\n")
    with pytest.raises(ValueError, match=r"predictions.jsonl:\d+: not valid JSON"):
        PredictionsLog(path, "m")


def test_lone_surrogates_are_field_errors_and_can_be_logged(tmp_path, pkg_dir):
    path = pkg_dir / "inputs" / "inputs_k1.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    lines[0] = json.dumps(row).replace(json.dumps(row["query_image"]), '"query_images/\\ud800.png"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PackageError, match=r"inputs_k1.jsonl:1: field 'query_image': not valid Unicode"):
        load_package(pkg_dir)
    with PredictionsLog(tmp_path / "p.jsonl", "m") as log:
        log.append([{"k": 1, "sample_id": "s", "response": "\ud800 odd answer"}])
    assert json.loads((tmp_path / "p.jsonl").read_text())["response"] == "\ud800 odd answer"
