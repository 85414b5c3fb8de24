import json

import numpy as np
import pytest

from icl.benchmarks.best50.package import load_package
from icl.benchmarks.best50.predictions import PredictionsError, read_predictions

GOOD = {"class": "a", "k": 1, "query_gt_boxes_pixel": [[0, 0, 10, 10]], "pred_boxes_pixel": [[0, 0, 10, 10]]}


def write(tmp_path, lines):
    path = tmp_path / "pred.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_pixel_boxes_and_text(tmp_path):
    text = {"class": "b", "k": 2, "query_gt_boxes_pixel": [], "query_image_size": [200, 100],
            "response": "<bbox_start><x0><y0><x512><y512><bbox_end>"}
    under_text = {**{k: v for k, v in text.items() if k != "response"}, "text": text["response"]}
    recs = read_predictions(write(tmp_path, [GOOD, "", text, dict(text, response=None), dict(text, response="x"),
                                             under_text]))
    assert [r.line for r in recs] == [1, 3, 4, 5, 6]
    np.testing.assert_array_equal(recs[1].pred, [[0, 0, 100, 50]])
    assert recs[2].pred.shape == (0, 4) and recs[3].pred.shape == (0, 4)  # null / garbage text: no boxes
    np.testing.assert_array_equal(recs[4].pred, recs[1].pred)
    assert recs[1].k == 2 and recs[1].cls == "b"


def test_pred_boxes_take_precedence_over_text(tmp_path):
    (r,) = read_predictions(write(tmp_path, [dict(GOOD, response="garbage")]))
    assert r.pred.shape == (1, 4)


@pytest.mark.parametrize("line, message", [
    ("{bad json", "line 2: not valid JSON"),
    ("[]", "line 2: expected a JSON object"),
    ({k: v for k, v in GOOD.items() if k != "class"}, "line 2: missing field 'class'"),
    ({k: v for k, v in GOOD.items() if k != "k"}, "line 2: missing field 'k'"),
    ({k: v for k, v in GOOD.items() if k != "query_gt_boxes_pixel"}, "line 2: missing field 'query_gt_boxes_pixel'"),
    ({k: v for k, v in GOOD.items() if k != "pred_boxes_pixel"}, "line 2: missing field 'pred_boxes_pixel'"),
    ({"class": "a", "k": 1, "query_gt_boxes_pixel": [], "response": "x"}, "line 2: missing field 'query_image_size'"),
    (dict(GOOD, k=0), "line 2: field 'k'"),
    (dict(GOOD, k=True), "line 2: field 'k'"),
    (dict(GOOD, pred_boxes_pixel=[[0, 0, 1]]), "line 2: field 'pred_boxes_pixel': box 0"),
    (dict(GOOD, pred_boxes_pixel=[[5, 0, 1, 1]]), "line 2: field 'pred_boxes_pixel': box 0: expected x1 >= x0"),
    (dict(GOOD, query_gt_boxes_pixel=[[0, 0, float("nan"), 1]]), "line 2: field 'query_gt_boxes_pixel'"),
    (dict(GOOD, sample_id=3), "line 2: field 'sample_id'"),
])
def test_malformed_line_reports_line_number_and_field(tmp_path, line, message):
    with pytest.raises(PredictionsError, match=message):
        read_predictions(write(tmp_path, [GOOD, line, GOOD]))


def test_json_error_message_reads_once(tmp_path):
    # json's "Invalid control character at" must not become "... at at column N"
    with pytest.raises(PredictionsError) as info:
        read_predictions(write(tmp_path, [GOOD, '{"class": "a\tb"}']))
    assert info.value.problems == ["line 2: not valid JSON (Invalid control character at column 13)"]


def test_every_bad_line_is_listed(tmp_path):
    with pytest.raises(PredictionsError) as info:
        read_predictions(write(tmp_path, ["x", GOOD, "y", dict(GOOD, sample_id="s"), dict(GOOD, sample_id="s")]))
    assert [p.split(":")[0] for p in info.value.problems] == ["line 1", "line 3", "line 5"]
    assert "repeats line 4" in info.value.problems[2]


def test_empty_or_missing_file(tmp_path):
    with pytest.raises(PredictionsError, match="no predictions"):
        read_predictions(write(tmp_path, [""]))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_predictions(tmp_path / "nope.jsonl")


def test_cross_check_with_package(tmp_path, package_dir):
    pkg = load_package(package_dir)
    s = pkg.samples[2][0]
    good = {"sample_id": s.sample_id, "class": s.cls, "k": 2, "query_gt_boxes_pixel": s.query_gt_boxes_pixel.tolist(),
            "pred_boxes_pixel": []}
    assert len(read_predictions(write(tmp_path, [good]), pkg)) == 1
    for bad, message in [(dict(good, sample_id="nope"), "'nope' is not in the package at k=2"),
                         (dict(good, k=16), "is not in the package at k=16"),
                         (dict(good, **{"class": "zzz"}), "field 'class'"),
                         (dict(good, query_gt_boxes_pixel=[]), "differs from the package")]:
        with pytest.raises(PredictionsError, match=message):
            read_predictions(write(tmp_path, [bad]), pkg)
