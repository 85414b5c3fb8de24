"""The VI renderer against hand-computed geometry: box corners (outer edge = the normalised box x
canvas size, rounded), the pyramid apex for known yaw/pitch (orthographic projection of a 0.3 x
size facing vector: yaw 90 -> right, pitch 90 -> up), the arrow head at ``end * (size - 1)`` with
distinct colours per arrow. No official renderer exists to compare against (the release ships
pre-rendered images; docs/vif.md)."""

import math

import numpy as np
import pytest

from icl.benchmarks.vif.render import (ARROW_COLOURS, BOX_COLOURS, arrow_pixels, pyramid_points, render_arrows,
                                       render_layout, render_orientation, vi_images)
from icl.benchmarks.vif.schema import Orientation, parse_task
from icl.benchmarks.vif.spatial import decode_layout

SIZE = 128


def _task(**over):
    rec = {"id": "g", "references": [{"file": "a.png", "role": "main", "type": "dog"},
                                     {"file": "b.png", "role": "main", "type": "cat"}],
           "layout": [{"ref": 0, "box": [0.25, 0.25, 0.75, 0.5]}, {"ref": 1, "box": [0.5, 0.625, 0.875, 1.0]}],
           "instruction": "x"}
    rec.update(over)
    return parse_task(rec)


def _where(img, colour):
    ys, xs = np.nonzero(np.all(img == np.array(colour, np.uint8), axis=2))
    return xs, ys


def test_layout_box_corners():
    img = render_layout(_task(), SIZE)
    xs, ys = _where(img, BOX_COLOURS[0])
    assert (xs.min(), ys.min(), xs.max(), ys.max()) == (32, 32, 95, 63)  # 0.25*128 .. 0.75*128 - 1
    xs, ys = _where(img, BOX_COLOURS[1])
    assert (xs.min(), ys.min(), xs.max(), ys.max()) == (64, 80, 111, 127)
    for x, y in ((32, 32), (95, 32), (32, 63), (95, 63)):
        assert img[y, x].tolist() == list(BOX_COLOURS[0])
    assert img[31, 32].tolist() == [255, 255, 255] and img[48, 64].tolist() == [255, 255, 255]  # outside, inside
    assert decode_layout(img) == {0: (0.25, 0.25, 0.75, 0.5), 1: (0.5, 0.625, 0.875, 1.0)}
    assert decode_layout(np.zeros((SIZE, SIZE, 3), np.uint8)) == {}


@pytest.mark.parametrize("yaw, pitch, apex", [
    (0, 0, (64.0, 64.0)),  # facing the viewer: the apex projects onto the base centre
    (90, 0, (64 + 0.3 * SIZE, 64.0)),
    (-90, 0, (64 - 0.3 * SIZE, 64.0)),
    (0, 90, (64.0, 64 - 0.3 * SIZE)),
    (0, -45, (64.0, 64 + 0.3 * SIZE * math.sin(math.radians(45)))),
    (30, 0, (64 + 0.3 * SIZE * 0.5, 64.0)),
    (180, 0, (64.0, 64.0)),
])
def test_pyramid_apex_direction(yaw, pitch, apex):
    got, corners = pyramid_points(Orientation(0, yaw, pitch), SIZE)
    assert got == pytest.approx(apex, abs=1e-9)
    centre = np.mean(corners, axis=0)
    assert centre == pytest.approx((64.0, 64.0), abs=1e-9)  # the base is centred on the canvas


def test_pyramid_base_is_a_square_perpendicular_to_the_facing():
    # yaw 90: facing right; the base lies in the plane x = 0, so it projects to a vertical segment
    _, corners = pyramid_points(Orientation(0, 90, 0), SIZE)
    assert {round(x, 9) for x, _ in corners} == {64.0}
    assert sorted({round(y, 9) for _, y in corners}) == [64 - 0.15 * SIZE, 64 + 0.15 * SIZE]
    # yaw 0: facing the viewer, the base is a full square of side 0.3 * size
    _, corners = pyramid_points(Orientation(0, 0, 0), SIZE)
    xs, ys = sorted({round(x, 9) for x, _ in corners}), sorted({round(y, 9) for _, y in corners})
    assert xs == [64 - 0.15 * SIZE, 64 + 0.15 * SIZE] and ys == xs


def test_orientation_image_marks_the_apex_in_the_subject_colour():
    img = render_orientation(Orientation(1, 90, 0), SIZE)
    xs, ys = _where(img, BOX_COLOURS[1])
    blob = (xs > 80) & (ys > 50)  # not the index label in the corner
    assert abs(xs[blob].mean() - (64 + 0.3 * SIZE)) < 1 and abs(ys[blob].mean() - 64) < 1


def test_arrows_run_tail_to_head_in_distinct_colours():
    task = _task(arrows=[{"kind": "wind", "start": [0.1, 0.5], "end": [0.9, 0.5]},
                         {"kind": "wind", "start": [0.5, 0.9], "end": [0.5, 0.1]},
                         {"kind": "light", "start": [0.0, 0.0], "end": [0.5, 0.5]}])
    assert arrow_pixels(task.arrows[0], SIZE) == ((13, 64), (114, 64))  # 0.1*127, 0.9*127 rounded
    img = render_arrows(task, "wind", SIZE)
    assert img[64, 114].tolist() == list(ARROW_COLOURS[0]) and img[64, 13].tolist() == list(ARROW_COLOURS[0])
    xs, ys = _where(img, ARROW_COLOURS[0])
    assert xs.min() >= 12 and xs.max() <= 115  # the shaft ends at the head (thickness 2)
    # the head's barbs sit behind the head, on both sides of the shaft
    barbs = xs > 100
    assert ys[barbs].min() < 60 and ys[barbs].max() > 68
    xs, ys = _where(img, ARROW_COLOURS[1])  # the upward arrow: head at the top
    assert ys.min() >= 12 and ys.max() <= 115 and img[13, 64].tolist() == list(ARROW_COLOURS[1])
    assert not _where(img, ARROW_COLOURS[2])[0].size  # the light arrow has its own image
    kinds = [k for k, _ in vi_images(task, SIZE)]
    assert kinds == ["layout", "wind", "light"]
    light = render_arrows(task, "light", SIZE)
    assert light[64, 64].tolist() == list(ARROW_COLOURS[2])


def test_rendering_is_deterministic():
    task = _task(orientations=[{"ref": 0, "yaw": 45, "pitch": 10}],
                 arrows=[{"kind": "light", "start": [0.9, 0.1], "end": [0.4, 0.6]}])
    a, b = vi_images(task, SIZE), vi_images(task, SIZE)
    assert [k for k, _ in a] == ["layout", "orientation", "light"]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a, b))
