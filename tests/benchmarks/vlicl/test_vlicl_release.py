"""The published-layout loader on a fabricated tiny copy of the release (conftest.make_release)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from icl.benchmarks.vlicl import VLICL
from icl.benchmarks.vlicl.episodes import select_support
from icl.benchmarks.vlicl.records import RecordError, load_published
from icl.benchmarks.vlicl.tasks import PER_CLASS, TASKS
from icl.models.requests import ChatRequest, GenerationRequest


def _read(root: Path, rel: str) -> np.ndarray:
    return cv2.imread(str(root / rel))[:, :, ::-1]


def test_loads_every_task(release: Path) -> None:
    for task in TASKS:
        data = load_published(release, task)
        assert len(data.queries) == 3 and data.origin == str(release / task)
        assert len(data.digest) == 64
        assert [q["id"] for q in data.queries] == list(data.by_id)


def test_episode_images_come_from_the_files(release: Path) -> None:
    bench = VLICL({"data_root": str(release), "shots": (0, 1, 2)})
    items = list(bench.items())
    assert {i.group["task"] for i in items} == set(TASKS)
    for item in items:
        req = bench.request(item)
        ep = bench.episode(item)
        task = item.group["task"]
        refs = [r for d in ep.support for r in d.images] + list(ep.query.images)
        pairs = task in PER_CLASS or task == "matching_mi"
        assert len(ep.support) == item.group["shots"] * (2 if pairs else 1)
        if TASKS[task].direction == "I2T":
            assert isinstance(req, ChatRequest)
            assert len(req.messages) == 2 * len(ep.support) + 1
            assert [m.role for m in req.messages] == ["user", "assistant"] * len(ep.support) + ["user"]
        else:
            assert isinstance(req, GenerationRequest) and req.size is None
        got = req.images
        assert len(got) == len(refs)
        for img, ref in zip(got, refs):
            np.testing.assert_array_equal(img, _read(release, ref))


def test_operator_answers_follow_the_query_operator(release: Path) -> None:
    bench = VLICL({"data_root": str(release), "tasks": ("operator_induction",), "shots": (4,), "seeds": (0,)})
    for item in bench.items():
        req = bench.request(item)
        q = bench.data("operator_induction").by_id[item.payload[3]]
        op = "+-x".index(q["operator"])
        sup = {r["id"]: r for r in bench.data("operator_induction").support}
        ep = bench.episode(item)
        answers = [m.content[0] for m in req.messages if m.role == "assistant"]
        assert answers == [str(sup[d.id]["answer"][op]) for d in ep.support]


def _copy(release: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "rel"
    shutil.copytree(release, dst)
    return dst


def _edit(root: Path, task: str, kind: str, fn) -> None:
    p = root / task / f"{kind}.json"
    recs = json.loads(p.read_text())
    fn(recs)
    p.write_text(json.dumps(recs, indent=1))


def test_clear_errors(release: Path, tmp_path: Path) -> None:
    root = _copy(release, tmp_path)
    _edit(root, "operator_induction", "query", lambda r: r[1].pop("operator"))
    with pytest.raises(RecordError, match=r"operator_induction/query.json record 1 \(id o1\): missing field 'operator'"):
        load_published(root, "operator_induction")
    _edit(root, "clevr", "support", lambda r: r[2].update(image="../../etc/passwd"))
    data = load_published(root, "clevr")
    with pytest.raises(RecordError, match="must be relative"):
        data.source.image("../../etc/passwd")
    (root / "textocr" / "query.json").write_text('[\n{"id": 1,\n "question": }\n]')
    with pytest.raises(RecordError, match="invalid JSON at line 3"):
        load_published(root, "textocr")
    _edit(root, "open_mi", "query", lambda r: r[0].update(answer="zorb"))
    with pytest.raises(RecordError, match=r"record 0 \(id m0\): answer class 'zorb' is not in classes"):
        load_published(root, "open_mi")
    _edit(root, "matching_mi", "support", lambda r: r[3]["diff"].update(answer="yes"))
    with pytest.raises(RecordError, match=r"record 3 \(id ps3\)\.diff: answer must be 'no'"):
        load_published(root, "matching_mi")
    _edit(root, "matching_mi", "query", lambda r: r[1].update(answer="same"))
    with pytest.raises(RecordError, match=r"matching_mi/query.json record 1 \(id p1\): answer must be 'yes' or 'no'"):
        load_published(root, "matching_mi")
    _edit(root, "cobsat", "query", lambda r: r[2].update(answer="car"))
    with pytest.raises(RecordError, match=r"cobsat/query.json record 2 \(id b2\): answer must be \[latent"):
        load_published(root, "cobsat")
    _edit(root, "fast_count_t2i", "query", lambda r: r.append(dict(r[0])))
    with pytest.raises(RecordError, match="duplicate id"):
        load_published(root, "fast_count_t2i")
    shutil.rmtree(root / "open_t2i_mi")
    with pytest.raises(RecordError, match="task open_t2i_mi is absent .*open_t2i_mi/query.json"):
        load_published(root, "open_t2i_mi")
    (root / "clevr" / "support.json").unlink()
    with pytest.raises(RecordError, match=r"clevr/support.json: not found"):
        load_published(root, "clevr")


def test_shots_the_data_cannot_supply(release: Path) -> None:
    bench = VLICL({"data_root": str(release), "tasks": ("open_mi", "cobsat", "clevr"), "many_shot": True})
    planned = {(i.group["task"], i.group["shots"]) for i in bench.items()}
    assert {k for t, k in planned if t == "open_mi"} == {0, 1, 2, 4, 5}
    assert {k for t, k in planned if t == "cobsat"} == {0, 1, 2}  # 3 records share the queries' latent value
    assert {k for t, k in planned if t == "clevr"} == {0, 1, 2, 4, 8}  # a pool of 10
    report = bench.report({})
    assert "- open_mi 16-shot: 5 support images per class" in report
    assert "- cobsat 4-shot: 3 support records share a query's latent value" in report
    assert "- clevr 16-shot: a support pool of 10" in report
    # asked for anyway, an episode says what is missing
    with pytest.raises(RecordError, match="has 5 support images; 8 shots need 8 per class"):
        select_support(bench.data("open_mi"), "m0", 8, 0)
    with pytest.raises(RecordError, match=r"cobsat query b0 \(task color_I, object = car\): 4 support records needed, "
                                          r"the pool has 3"):
        select_support(bench.data("cobsat"), "b0", 4, 0)


def test_digest_follows_the_files(release: Path, tmp_path: Path) -> None:
    root = _copy(release, tmp_path)
    before = load_published(root, "clevr").digest
    assert load_published(root, "clevr").digest == before
    _edit(root, "clevr", "query", lambda r: r[0].update(answer=7))
    assert load_published(root, "clevr").digest != before


def test_real_names_need_their_field(release: Path, tmp_path: Path) -> None:
    bench = VLICL({"data_root": str(release), "variant": "real_names", "shots": (1,), "seeds": (0,)})
    item = next(iter(bench.items()))
    answers = [m.content[0] for m in bench.request(item).messages if m.role == "assistant"]
    assert all(a.startswith("real_") for a in answers) and bench.episode(item).query.answer.startswith("real_")
    root = _copy(release, tmp_path)
    _edit(root, "open_mi", "query", lambda r: [q["support"]["blicket"].pop("real_name") for q in r])
    bad = VLICL({"data_root": str(root), "variant": "real_names", "shots": (1,), "seeds": (0,)})
    with pytest.raises(RecordError, match=r"open_mi/query.json record m0 support\['blicket'\]: missing field 'real_name'"):
        list(bad.items())
    # through the runner: one line, exit 2 (a configuration the data cannot serve)
    from icl.run.__main__ import main
    assert main(["vlicl", "--data-root", str(root), "--variant", "real_names", "--shots", "1", "--seeds", "0",
                 "--out", str(tmp_path / "out"), "--no-progress"]) == 2


def test_lone_surrogate_names_file_record_and_field(release: Path, tmp_path: Path) -> None:
    """``"\\ud800"`` is legal JSON but no Unicode: the record fails with one line naming the file,
    the record and the field (it used to crash with a UnicodeEncodeError at the first write)."""
    root = _copy(release, tmp_path)
    path = root / "clevr" / "query.json"
    recs = json.loads(path.read_text())
    recs[1]["question"] = "how many \ud800 cubes?"
    path.write_text(json.dumps(recs, indent=1))  # ensure_ascii: written as the escape \ud800
    assert "\\ud800" in path.read_text()
    with pytest.raises(RecordError, match=r"clevr/query.json record 1: field 'question': not valid Unicode: "
                                          r"a lone surrogate U\+D800 at character 9"):
        load_published(root, "clevr")
    recs[1]["question"] = "fine"
    recs[2]["image"] = ["ok.png", "\udcff.png"]  # nested: the list element is named
    path.write_text(json.dumps(recs, indent=1))
    with pytest.raises(RecordError, match=r"record 2: field 'image\[1\]': not valid Unicode: a lone surrogate U\+DCFF"):
        load_published(root, "clevr")


def test_episodes_csv_escapes_formula_ids(release: Path, tmp_path: Path) -> None:
    """Release ids a spreadsheet would run as formulas are written with a leading ``'`` in
    episodes.csv (the one table writer's rule); numbers are left as they are."""
    import csv
    import io

    root = _copy(release, tmp_path)
    bad = ["=HYPERLINK(\"http://x\")", "+1+2", "-3", "@SUM(A1)"]

    def ids(recs):
        for i, rec in enumerate(recs):
            rec["id"] = f"{bad[i % 4]}{i}"

    _edit(root, "clevr", "query", ids)
    _edit(root, "clevr", "support", ids)
    bench = VLICL({"data_root": str(root), "tasks": ("clevr",), "shots": (2,), "seeds": (0,)})
    rows = list(csv.DictReader(io.StringIO(bench.episodes_csv())))
    assert {r["query_id"] for r in rows} == {"'" + f"{b}{i}" for i, b in enumerate(bad[:3])}  # three queries
    assert {r["support_id"][:2] for r in rows} <= {"'" + b[0] for b in bad} and len(rows) == 6
    assert all(r["seed"] == "0" and r["shots"] == "2" for r in rows)
