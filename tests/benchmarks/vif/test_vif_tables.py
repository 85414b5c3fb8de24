"""Every breakdown on a constructed set of scores with known answers, two-judge averaging (the
source's ensemble: per item mean over judges, items every judge scored; shim0114/VIF-Bench
summarize.py ``judge_scores``), PLCC/SRCC and the human-scores CSV."""

import math

import numpy as np
import pytest

from icl.benchmarks.vif.rubric import CRITERIA
from icl.benchmarks.vif.tables import plcc_srcc, ranks, read_human, summarise

GROUPS = {  # key: (task, variant, refs, vis, vi_types, conflicts)
    "k1": ("t1", "visual", 1, 1, "layout", "none"),
    "k2": ("t2", "visual", 5, 2, "layout+orientation", "orientation"),
    "k3": ("t3", "visual", 7, 4, "layout+orientation+wind+light", "wind"),
    "k4": ("t3", "ti-dense", 7, 4, "layout+orientation+wind+light", "wind"),
    "k5": ("t4", "visual", 2, 1, "layout", "none"),
    "k6": ("t5", "visual", 3, 3, "layout", "none"),
}
SCORES = {"A": {"k1": 2, "k2": 6, "k3": 5, "k4": 1, "k5": 9, "k6": 1}, "B": {"k1": 4, "k2": 8, "k3": 5, "k4": 3, "k6": 1}}


def _row(key, judge, val):
    task, variant, refs, vis, types, conflicts = GROUPS[key]
    failed = 1.0 if key == "k6" else 0.0
    return {"model": "m", "model_id": "x", "key": key, "status": "ok", "judge": judge, "task": task, "variant": variant,
            "refs": refs, "vis": vis, "vi_types": types, "conflicts": conflicts, **{c: float(val) for c in CRITERIA},
            "average": float(val), "failed": failed, "judge_parsed": 1.0 - failed, "layout_iou": val / 10,
            "centre_in_region": 1.0 if val > 4 else 0.0}


@pytest.fixture
def tables():
    rows = [_row(k, j, v) for j, by in SCORES.items() for k, v in by.items()]
    return summarise(rows)


def _pick(rows, **kw):
    hit = [r for r in rows if all(r[k] == v for k, v in kw.items())]
    assert len(hit) == 1, (kw, hit)
    return hit[0]


def test_headline_averages_the_judges_on_items_both_scored(tables):
    # k5 has only judge A: left out; per item means k1 3, k2 7, k3 5, k6 1 (failed)
    vis = _pick(tables["criteria"], variant="visual")
    assert vis["n"] == 4 and vis["failed"] == 1 and vis["average"] == pytest.approx(4.0)
    assert vis["scene_coherence"] == pytest.approx(4.0) and vis["average_lo"] <= 4.0 <= vis["average_hi"]
    assert _pick(tables["criteria"], variant="ti-dense")["average"] == pytest.approx(2.0)


def test_per_judge_table(tables):
    a = _pick(tables["criteria_by_judge"], judge="A", variant="visual")
    b = _pick(tables["criteria_by_judge"], judge="B", variant="visual")
    assert a["n"] == 5 and a["average"] == pytest.approx(23 / 5)
    assert b["n"] == 4 and b["average"] == pytest.approx(18 / 4)


def test_by_vi_type(tables):
    got = {r["vi_type"]: (r["n"], r["average"]) for r in tables["by_vi_type"]}
    layout = _pick(tables["by_vi_type"], vi_type="layout")
    assert 1.0 <= layout["average_lo"] < 4.0 < layout["average_hi"] <= 7.0  # per item 3, 7, 5, 1
    assert got == {"layout": (4, pytest.approx(4.0)), "orientation": (2, pytest.approx(6.0)),
                   "wind": (1, pytest.approx(5.0)), "light": (1, pytest.approx(5.0))}


def test_by_number_of_references_and_vis(tables):
    assert {r["refs"]: r["average"] for r in tables["by_refs"]} == {"1": 3.0, "3": 1.0, "5+": 6.0}
    assert {r["vis"]: r["average"] for r in tables["by_vis"]} == {"1": 3.0, "2": 7.0, "3": 1.0, "4+": 5.0}


def test_conflict(tables):
    got = {(r["vi_type"], r["conflict"]): (r["n"], r["visual_instruction_adherence"]) for r in tables["conflict"]}
    assert got == {("orientation", True): (1, 7.0), ("orientation", False): (1, 5.0), ("wind", True): (1, 5.0),
                   ("light", False): (1, 5.0)}


def test_visual_vs_text_on_the_text_subset(tables):
    assert {r["variant"]: (r["n"], r["average"]) for r in tables["variants"]} == {"ti-dense": (1, 2.0), "visual": (1, 5.0)}


def test_spatial(tables):
    r = _pick(tables["spatial"], variant="visual")
    # per item layout IoU: k1 0.3, k2 0.7, k3 0.5, k6 0.1; centre: k1 (0+0)/2, k2 1, k3 1, k6 0
    assert r["measured"] == 4 and r["layout_iou"] == pytest.approx(0.4) and r["centre_in_region"] == pytest.approx(0.5)


def test_judge_against_judge(tables):
    rel = [r for r in tables["reliability"] if r["criterion"] == "average"]
    assert len(rel) == 1 and rel[0]["a"] == "A" and rel[0]["b"] == "B" and rel[0]["n"] == 5
    # A [2, 6, 5, 1, 1] vs B [4, 8, 5, 3, 1] on k1 k2 k3 k4 k6
    p, s = plcc_srcc([2, 6, 5, 1, 1], [4, 8, 5, 3, 1])
    assert rel[0]["plcc"] == pytest.approx(p) and rel[0]["srcc"] == pytest.approx(s)


def test_nan_criteria_are_skipped_not_zero():
    rows = [_row("k1", "A", 2), _row("k2", "A", 6)]
    rows[0]["scene_coherence"] = math.nan
    rows[0]["average"] = math.nan
    t = summarise(rows)
    vis = _pick(t["criteria"], variant="visual")
    assert vis["scene_coherence"] == 6.0 and vis["average"] == 6.0 and vis["visual_quality"] == 4.0


def test_rows_without_a_judge_column_are_one_judge():
    rows = [_row("k1", "A", 2), _row("k2", "A", 6)]
    for r in rows:
        del r["judge"]
    t = summarise(rows)
    assert _pick(t["criteria_by_judge"], variant="visual")["judge"] == "judge" and "reliability" not in t


def test_plcc_srcc_known_values():
    assert plcc_srcc([1, 2, 3, 4, 5], [2, 4, 6, 8, 10]) == pytest.approx((1.0, 1.0))
    p, s = plcc_srcc([1, 2, 3, 4, 5], [1, 4, 9, 16, 25])
    assert s == pytest.approx(1.0) and p == pytest.approx(60 / math.sqrt(10 * 374))  # by hand
    assert ranks(np.array([1, 1, 2, 3])).tolist() == [1.5, 1.5, 3.0, 4.0]
    assert plcc_srcc([1, 1, 2, 3], [1, 2, 3, 4])[1] == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert math.isnan(plcc_srcc([1, 1, 1], [1, 2, 3])[0])


def test_human_scores(tmp_path):
    path = tmp_path / "human.csv"
    path.write_text("model,key,average\nm,k1,5\nm,k2,13\nm,k3,11\nm,k6,3\n")  # 2 * judge A + 1
    rows = [_row(k, "A", v) for k, v in SCORES["A"].items()]
    t = summarise(rows, str(path))
    r = _pick(t["reliability"], b="human", criterion="average")
    assert r["n"] == 4 and r["plcc"] == pytest.approx(1.0) and r["srcc"] == pytest.approx(1.0)
    (tmp_path / "bad.csv").write_text("model,key,average\nm,k1,high\n")
    with pytest.raises(ValueError, match="bad.csv, line 2, column average: 'high' is not a number"):
        read_human(str(tmp_path / "bad.csv"))
    (tmp_path / "nokey.csv").write_text("model,average\nm,1\n")
    with pytest.raises(ValueError, match="no column 'key'"):
        read_human(str(tmp_path / "nokey.csv"))


def _judged(key, judge, six):
    """A row of ``judge`` with the six criteria ``six`` (NaN: the judge gave none); its average as
    the scorer computes it (NaN unless all six)."""
    row = _row(key, judge, 0)
    row.update(zip(CRITERIA, map(float, six)))
    row["average"] = math.nan if any(math.isnan(v) for v in map(float, six)) else sum(six) / 6
    return row


def test_two_judges_average_per_criterion_by_hand():
    """PROTOCOL §5: two judges score independently, the headline is their mean. Per item and
    criterion the mean of the judges that gave it; the average the mean of those six (with all six
    from both judges: the mean of the two judges' averages, as the source computes it)."""
    nan = math.nan
    rows = [_judged("k1", "A", [2, 4, 6, 8, 10, 6]), _judged("k1", "B", [4, 4, 4, 4, 6, 8]),  # averages 6 and 5
            _judged("k2", "A", [2, 4, 6, 8, nan, nan]), _judged("k2", "B", [4, 4, 4, 4, 6, 8]),  # A gave four
            _judged("k5", "A", [nan, 1, 1, 1, 1, 1]), _judged("k5", "B", [nan, 3, 3, 3, 3, 3])]  # neither gave TIF
    t = summarise(rows)
    # per item: k1 [3, 4, 5, 6, 8, 7] avg 5.5 (= (6 + 5) / 2); k2 [3, 4, 5, 6, 6, 8] avg 32/6; k5 [nan, 2 x 5] avg nan
    vis = _pick(t["criteria"], variant="visual")
    assert vis["n"] == 3
    assert vis["text_instruction_following"] == pytest.approx(3.0)  # k5 has none: mean of k1, k2
    assert vis["reference_consistency"] == pytest.approx((4 + 4 + 2) / 3)
    assert vis["scene_coherence"] == pytest.approx((8 + 6 + 2) / 3)
    assert vis["visual_quality"] == pytest.approx((7 + 8 + 2) / 3)
    assert vis["average"] == pytest.approx((5.5 + 32 / 6) / 2)  # k5's average is NaN: left out of the mean
    a = _pick(t["criteria_by_judge"], judge="A", variant="visual")
    assert a["average"] == pytest.approx(6.0) and a["scene_coherence"] == pytest.approx((10 + 1) / 2)
