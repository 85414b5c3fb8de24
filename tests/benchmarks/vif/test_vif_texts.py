"""TI Dense / Medium / Sparse texts of known records (PROTOCOL §5: dense exact coordinates and
angles; medium a 3 x 3 grid and 8 directions; sparse left/centre/right and a coarse direction).
The source generates its texts from its own annotations with templates not in the stored code
repository (shim0114/VIF-Bench ships them as text_instruction/*.jsonl); the wording is ours."""

import pytest

from icl.benchmarks.vif.schema import parse_task
from icl.benchmarks.vif.texts import cell, direction8, ti_text


def _task():
    return parse_task({
        "id": "k", "references": [{"file": "a.png", "role": "main", "type": "dog"},
                                  {"file": "b.png", "role": "main", "type": "person"}],
        "layout": [{"ref": 0, "box": [0.05, 0.1, 0.3, 0.4]}, {"ref": 1, "box": [0.4, 0.4, 0.9, 0.95]}],
        "orientations": [{"ref": 0, "yaw": 60, "pitch": 30}],
        "arrows": [{"kind": "wind", "start": [0.9, 0.1], "end": [0.1, 0.9]}],
        "poses": [{"ref": 1, "file": "p.png", "description": "arms raised."}],
        "instruction": "x", "text_subset": True})


def test_dense():
    assert ti_text(_task(), "dense") == (
        "Place the subject of Image 0 inside the box from (0.05, 0.10) to (0.30, 0.40). "
        "Place the subject of Image 1 inside the box from (0.40, 0.40) to (0.90, 0.95). "
        "The subject of Image 0 faces yaw 60 degrees and pitch 30 degrees (0/0 faces the viewer; positive yaw "
        "turns to the image's right, positive pitch tilts up). "
        "The wind blows from (0.90, 0.10) toward (0.10, 0.90). The person of Image 1: arms raised.")


def test_medium():
    # box 0 centre (0.175, 0.25): top left, area 0.075 -> medium-sized; box 1 centre (0.65, 0.675): bottom
    # centre (0.675 > 2/3), area 0.275 -> large; facing (sin60 cos30, sin30) = (0.75, 0.5): 33.7 deg -> upper
    # right; wind (-0.8, -0.8) in y-up terms -> lower left, from the top right cell
    assert ti_text(_task(), "medium") == (
        "Place the subject of Image 0, medium-sized, in the top left of the image. "
        "Place the subject of Image 1, large, in the bottom centre of the image. "
        "The subject of Image 0 faces upper right. The wind blows from the top right toward the lower left. "
        "The person of Image 1: arms raised.")


def test_sparse():
    assert ti_text(_task(), "sparse") == (
        "Place the subject of Image 0 on the left. Place the subject of Image 1 in the centre. "
        "The subject of Image 0 faces right. The wind blows toward the left. The person of Image 1: arms raised.")


@pytest.mark.parametrize("dx, dy, name", [(1, 0, "right"), (1, 1, "upper right"), (0, 1, "up"), (-1, 0.1, "left"),
                                          (-1, -1, "lower left"), (0.2, -1, "down"), (1, -0.5, "lower right")])
def test_direction8(dx, dy, name):
    assert direction8(dx, dy) == name


def test_grid_cells_and_levels():
    assert cell(0.5, 0.5) == "centre" and cell(0.1, 0.9) == "bottom left" and cell(0.9, 0.5) == "middle right"
    with pytest.raises(ValueError, match="unknown text level 'exact'"):
        ti_text(_task(), "exact")
