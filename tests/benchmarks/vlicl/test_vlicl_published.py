"""The published release as it is, through ``python -m icl.run vlicl`` (conftest.make_published_release,
its sources cited there: the dataset ``ys-zong/VL-ICL`` on huggingface.co, tree at 6c63a33 and commit
469851d "add text ICL data", and its ``unzip.sh``; the reference code ``ys-zong/VL-ICL``
``utils/utils.py`` ``load_data`` / ``load_text_data``). No ``fast_*_t2i`` folders; text versions
published for three tasks only (``clevr_text``, ``operator_induction_text``,
``operator_induction_interleaved_text``); the other four text folders exist only as names the
reference code opens (``open_mi_captioned``, ``matching_mi_text``, ``open_t2i_mi_text``, ``cobsat_text``)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from icl.benchmarks.vlicl import VLICL
from icl.benchmarks.vlicl.tasks import TASKS
from icl.run.__main__ import main


def _run(args: list[str]) -> int:
    return main(["vlicl", "--no-progress", "--seeds", "0", *args])


def test_runs_by_default_and_lists_absent_tasks(published_release: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert _run(["--data-root", str(published_release), "--out", str(out), "--judge", "copy-last"]) == 0
    report = (out / "report.md").read_text()
    assert "absent from the release (not run): fast_count_t2i, fast_attr_t2i" in report
    assert f"the published release at `{published_release}`" in report
    bench = VLICL({"data_root": str(published_release)})
    for t in bench.task_ids():
        assert f"{t}: `{published_release / t}`, SHA-256 `{bench.data(t).digest}`" in report
    assert "judge of the text-to-image tasks: `copy-last`" in report
    meta = json.loads((out / "results.json").read_text())
    assert meta["judge"]["adapter"] == "copy-last"
    # every planned item has a line in predictions.jsonl; prompts are stored once by digest
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == meta["counts"]["planned"] and {p["task"] for p in preds} == set(bench.task_ids())
    prompts = {json.loads(line)["sha256"] for line in (out / "prompts.jsonl").read_text().splitlines()}
    assert {p["prompt_sha256"] for p in preds} == prompts
    assert meta["artifacts"]["predictions.jsonl"] and meta["artifacts"]["prompts.jsonl"]
    op = next(p for p in preds if p["task"] == "operator_induction" and p["shots"] == 2)
    assert set(op["parsed"]) == {"legacy", "lenient"} and set(op["correct"]) == {"legacy", "lenient"}
    assert op["answer"] is not None and "<image:operator_induction/support/" in _prompt(out, op["prompt_sha256"])
    t2i = next(p for p in preds if p["task"] == "cobsat")
    assert t2i["answer"].startswith("<image ") and len(t2i["judge_yes"]) == 2


def _prompt(out: Path, sha: str) -> str:
    for line in (out / "prompts.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["sha256"] == sha:
            return rec["text"]
    raise KeyError(sha)


def test_text_variant_reads_the_published_folders(published_release: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run(["--data-root", str(published_release), "--out", str(out), "--variant", "text"]) == 0
    report = (out / "report.md").read_text()
    assert ("absent from the release (not run): open_mi (no open_mi_captioned), matching_mi (no matching_mi_text), "
            "open_t2i_mi (no open_t2i_mi_text), cobsat (no cobsat_text)") in report
    assert f"`{published_release / 'operator_induction_interleaved_text'}`" in report
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {p["task"] for p in preds} == {"clevr", "operator_induction", "operator_induction_interleaved"}


def test_reference_code_names_still_load(published_release: Path, tmp_path: Path) -> None:
    """A copy unpacked under the reference code's internal names (``math_induction_text``, as
    its text-ICL scripts read them) loads the same records."""
    root = tmp_path / "rel"
    shutil.copytree(published_release, root)
    (root / "operator_induction_text").rename(root / "math_induction_text")
    bench = VLICL({"data_root": str(root), "variant": "text", "tasks": ("operator_induction",)})
    assert bench.data("operator_induction").origin == str(root / "math_induction_text")


def test_no_guessed_text_folder_is_read(published_release: Path, tmp_path: Path) -> None:
    """``open_mi_text`` is named by no source (neither the release nor the reference code): a
    folder of that name is not read, open_mi stays absent from the text variant."""
    root = tmp_path / "rel"
    shutil.copytree(published_release, root)
    shutil.copytree(root / "clevr_text", root / "open_mi_text")
    bench = VLICL({"data_root": str(root), "variant": "text"})
    assert "open_mi" not in bench.task_ids() and "open_mi" in bench.absent


def test_unpublished_text_versions_load_under_the_reference_names(reference_text_release: Path) -> None:
    """The four text versions the release does not publish are read from the folders the reference
    code opens (``ys-zong/VL-ICL`` ``utils/utils.py`` ``load_text_data``), their captions standing
    in for the images (conftest.add_reference_text_folders: record shapes assumed, not sourced)."""
    root = reference_text_release
    bench = VLICL({"data_root": str(root), "variant": "text", "shots": (0, 1), "seeds": (0,)})
    assert bench.task_ids() == [t for t in TASKS if TASKS[t].has_text] and bench.absent == []
    expected = {"open_mi": "open_mi_captioned", "matching_mi": "matching_mi_text",
                "open_t2i_mi": "open_t2i_mi_text", "cobsat": "cobsat_text"}
    for task, folder in expected.items():
        assert bench.data(task).origin == str(root / folder)
    shown = {}
    for item in bench.items():
        if item.group["shots"] == 1 and item.group["task"] in ("open_mi", "matching_mi"):
            req = bench.request(item)
            assert not req.images
            shown[item.group["task"]] = str(req.messages)
    assert "a picture, number 0" in shown["open_mi"] and "Same?" in shown["matching_mi"]


def test_asked_absent_task_and_builtin_judge_are_one_line_errors(published_release: Path, tmp_path: Path,
                                                                capsys) -> None:
    out = tmp_path / "out"
    assert _run(["--data-root", str(published_release), "--out", str(out), "--tasks", "clevr,fast_count_t2i"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no folder for fast_count_t2i" in err[0]
    assert _run(["--data-root", str(published_release), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "open_t2i_mi, cobsat on release data need a vision-language judge" in err[0]
    # the built-in data keeps its built-in judge
    assert _run(["--fast", "--out", str(tmp_path / "fast"), "--tasks", "cobsat", "--shots", "0,1"]) == 0


def _huge_png(path: Path, side: int = 20000) -> None:
    """A valid 1-bit grayscale PNG of ``side`` x ``side`` pixels (a few hundred KB; OpenCV would
    decode it to side * side * 3 bytes)."""
    row = b"\x00" + b"\x00" * ((side + 7) // 8)
    comp = zlib.compressobj(9)
    data = b"".join(comp.compress(row) for _ in range(side)) + comp.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
                     + chunk(b"IDAT", data) + chunk(b"IEND", b""))


@pytest.mark.slow
def test_huge_support_image_fails_its_items_only(published_release: Path, tmp_path: Path) -> None:
    """Issue 28: a 20000 x 20000 PNG in a support set fails the episodes that show it, through the
    capped reader (``icl.data.images``), in a real subprocess; every other item is answered."""
    root = tmp_path / "rel"
    shutil.copytree(published_release, root)
    support = json.loads((root / "clevr" / "support.json").read_text())
    huge = support[3]["image"][0]
    _huge_png(root / huge)
    out = tmp_path / "out"
    args = ["--data-root", str(root), "--out", str(out), "--tasks", "clevr", "--shots", "0,1,2,4", "--seeds", "0"]
    proc = subprocess.run([sys.executable, "-m", "icl.run", "vlicl", "--no-progress", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    bench = VLICL({"data_root": str(root), "tasks": ("clevr",), "shots": (0, 1, 2, 4), "seeds": (0,)})
    shows = {it.key for it in bench.items() if any(huge in d.images for d in bench.episode(it).support)}
    assert shows and len(shows) < len(list(bench.items()))
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["failed"] == len(shows)
    assert meta["counts"]["computed"] == len(list(bench.items())) - len(shows)
    assert "exceeds" in proc.stderr or "pixels" in proc.stderr


def test_text_records_keeping_image_paths_show_their_text(published_release: Path, tmp_path: Path) -> None:
    """A text version whose records still carry the image paths shows the record's text only."""
    root = tmp_path / "rel"
    shutil.copytree(published_release, root)
    path = root / "clevr_text" / "query.json"
    records = json.loads(path.read_text())
    for r in records:
        r["image"] = ["clevr/query/does-not-exist.png"]
    path.write_text(json.dumps(records))
    bench = VLICL({"data_root": str(root), "variant": "text", "tasks": ("clevr",), "shots": (0,), "seeds": (0,)})
    item = next(iter(bench.items()))
    (turn,) = bench.request(item).messages
    assert turn.content[-1] == records[0]["question"] and not bench.request(item).images


def test_text_variant_names_the_text_folders_the_release_lacks(published_release: Path, tmp_path: Path,
                                                              capsys) -> None:
    """A release with the image folders only: ``--variant text`` names the folders to provide
    (``clevr_text``, ``operator_induction_text``; docs/vlicl.md), not the task names alone."""
    root = tmp_path / "release"
    for task in ("clevr", "operator_induction"):
        shutil.copytree(published_release / task, root / task)
    assert _run(["--data-root", str(root), "--out", str(tmp_path / "out"), "--variant", "text"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "clevr (clevr_text/query.json or clevr_simple_text/query.json)" in err[0]
    assert "operator_induction (operator_induction_text/query.json or math_induction_text/query.json)" in err[0]
    assert _run(["--data-root", str(root), "--out", str(tmp_path / "out"), "--variant", "text",
                 "--tasks", "clevr"]) == 2
    assert "no folder for clevr (clevr_text/query.json" in capsys.readouterr().err
