"""CoBSAT tables: accuracy per task and shot with failures counted wrong (``evaluation_icl.py`` of
UW-Madison-Lee-Lab/CoBSAT divides by every prompt, a missing image scoring 0), a judge's
consistency with human labels, judge-vs-judge agreement and the mode comparison figure."""

import pytest

from icl.benchmarks.cobsat.benchmark import CoBSAT
from icl.benchmarks.cobsat.tables import (accuracy_table, agreement_plot, consistency_table, judge_agreement,
                                          mode_curves, read_labels)


def _row(key, model="m", task="Color-I", shots=2, mode="image", overall=1.0, obj=1.0, attr=1.0, failed=0.0):
    return {"model": model, "key": key, "status": "failed" if failed else "ok", "task": task, "shots": shots,
            "mode": mode, "variant": "default", "family": "emu2", "prompts": "paired0", "overall": overall,
            "object": obj, "attribute": attr, "textual": attr, "visual": obj, "failed": failed}


def test_accuracy_counts_failures_wrong():
    rows = [_row("a"), _row("b", overall=0.0, attr=0.0), _row("c", overall=0.0, obj=0.0, attr=0.0, failed=1.0),
            _row("d", shots=4)]
    acc = accuracy_table(rows)
    two = next(r for r in acc if r["shots"] == 2)
    assert two["prompts_scored"] == 3 and two["failed"] == 1
    assert two["overall"] == pytest.approx(100 / 3) and two["object"] == pytest.approx(200 / 3)
    assert two["attribute"] == pytest.approx(100 / 3)


def test_consistency_with_human_labels(tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("key,correct,object\na,1,1\nb,1,\nc,0,false\nzzz,1,1\n")
    got = read_labels(labels)
    assert got["b"] == {"overall": 1.0} and got["c"] == {"overall": 0.0, "object": 0.0}
    rows = [_row("a"), _row("b", overall=0.0, attr=0.0), _row("c", overall=0.0, obj=0.0, attr=0.0)]
    table = {(r["aspect"]): r for r in consistency_table(rows, got)}
    assert table["overall"]["labelled"] == 3 and table["overall"]["agree"] == 2
    assert table["overall"]["consistency"] == pytest.approx(2 / 3)
    assert table["object"]["labelled"] == 2 and table["object"]["agree"] == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("item,correct\na,1\n")
    with pytest.raises(ValueError, match="need a 'key' column"):
        read_labels(bad)
    bad.write_text("key,correct\na,maybe\n")
    with pytest.raises(ValueError, match="bad.csv:2: correct must be 1/0"):
        read_labels(bad)
    with pytest.raises(ValueError, match="cannot read human labels"):
        read_labels(tmp_path / "absent.csv")
    # through the benchmark: the consistency table and its report lines
    bench = CoBSAT({"fast": True, "human_labels": str(labels)})
    tables = bench.summarise(rows)
    assert tables["consistency"] and "Judge consistency with human labels" in bench.report(tables)


def test_judge_agreement_and_figures(tmp_path):
    a = [_row("a"), _row("b", overall=0.0, attr=0.0), _row("c", failed=1.0, overall=0.0, obj=0.0, attr=0.0)]
    b = [_row("a"), _row("b"), _row("c")]
    agree = {r["aspect"]: r for r in judge_agreement(a, b)}
    assert agree["overall"]["items"] == 2 and agree["overall"]["agreement"] == 0.5  # the failed row is left out
    assert agree["object"]["agreement"] == 1.0
    assert agreement_plot(judge_agreement(a, b), tmp_path)[0].is_file()
    acc = accuracy_table(a + [_row("x", mode="description", overall=0.0)])
    paths = mode_curves(acc, tmp_path)
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.is_file() for p in paths)  # a figure, two formats
    assert mode_curves(accuracy_table(a), tmp_path) == []
