"""The one table writer (issue 28): text that a spreadsheet would run as a formula gets a
leading ``'`` in every CSV a run writes, numbers never do, and numpy scalars are written as
plain numbers (``np.float64(0.5)`` is ``repr``-ed as that text by numpy 2).

The audit found best50 and VL-ICL ids reaching the CSVs as formulas.
"""

import csv
import io
import json

import numpy as np
import pytest

from icl.benchmarks.best50.synthetic import write_package
from icl.report.tables import csv_cell, csv_text, jsonable
from icl.run import RunConfig, run
from icl.store.atomic import write_csv


@pytest.mark.parametrize("value, text", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1", "'+1"), ("-2+3", "'-2+3"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("plain", "plain"), ("a=b", "a=b"), ("", ""), (None, ""),
    (-1.5, "-1.5"), (-3, "-3"), (float("-inf"), "-inf"), (float("nan"), "nan"), (True, "True"),
    (np.float64(0.1), "0.1"), (np.float32(-0.25), "-0.25"), (np.int64(-7), "-7"), (np.bool_(False), "False"),
    (np.array(2.5), "2.5"), ([-1, 2], "-1 2"), ((np.float64(-0.5), 1), "-0.5 1"), (["=a", "b"], "'=a b"),
])
def test_cells(value, text):
    assert csv_cell(value) == text


def test_every_table_writer_guards_and_plain_numbers(tmp_path):
    rows = [{"id": "=1+1", "v": np.float64(0.5)}, {"id": "ok", "v": np.int64(-2)}]
    text = csv_text(rows)
    assert text == "id,v\n'=1+1,0.5\nok,-2\n"
    assert csv_text([["-x", np.float32(1.0)]], ["a", "b"]) == "a,b\n'-x,1.0\n"
    write_csv(tmp_path / "t.csv", rows, header=["id", "v"])
    assert (tmp_path / "t.csv").read_text() == text
    assert json.dumps(jsonable({"a": np.float32(0.5), "b": [np.int64(3)], "c": np.arange(2)})) == \
        '{"a": 0.5, "b": [3], "c": [0, 1]}'


def test_a_best50_sample_id_never_reaches_a_csv_as_a_formula(tmp_path):
    """A real best50 run (synthetic package from the benchmark's own writer, the oracle) whose
    sample ids look like formulas."""
    pkg = write_package(tmp_path / "pkg", n_per_class=1, classes=("circle",), ks=(1,))
    path = pkg / "inputs" / "inputs_k1.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    hostile = '=HYPERLINK("http://example.invalid","click")'
    rows[0]["sample_id"] = hostile
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    config = RunConfig("best50", options={"package": str(pkg)}, out=out, plots=False, progress=False)
    assert run(config, stdout=io.StringIO(), stderr=io.StringIO()).exit_code == 0
    with open(out / "per_sample.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["sample_id"] for r in table] == ["'" + hostile]
    for p in out.glob("*.csv"):
        for row in csv.reader(io.StringIO(p.read_text())):
            for cell in row:
                assert "np." not in cell, (p.name, cell)
                assert not cell.startswith(("=", "+", "@")), (p.name, cell)
                if cell.startswith("-"):
                    float(cell)  # only numbers may start with a minus


def test_every_csv_icl_writes_goes_through_csv_text():
    """One writer for every CSV (results tables, episodes.csv, contexts.csv, prompts.csv,
    context_sensitivity.csv, ...): no other module builds a csv writer, so no CSV escapes the
    formula rule (issue 40: episodes.csv wrote release ids starting with =, +, -, @ unescaped)."""
    import re
    from pathlib import Path

    import icl

    root = Path(icl.__file__).parent
    writers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                     if re.search(r"csv\.(writer|DictWriter)\(", p.read_text(encoding="utf-8")))
    assert writers == ["_csv.py"]
