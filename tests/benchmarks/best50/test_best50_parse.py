import numpy as np
import pytest

from icl.benchmarks.best50.parse import (format_box, format_boxes, grid_to_pixels, parse_boxes, parse_grid_boxes,
                                         pixels_to_grid)


def test_well_formed_boxes_in_text_order_and_to_pixels():
    text = ("Here: <bbox_start><x0><y0><x512><y256><bbox_end> and "
            "<bbox_start> <x100> <y200>\n<x1024><y1024> <bbox_end>.")
    assert parse_grid_boxes(text) == [(0, 0, 512, 256), (100, 200, 1024, 1024)]
    px = parse_boxes(text, (640, 480))
    # grid / 1024 * size: x with the width, y with the height
    np.testing.assert_array_equal(px, [[0, 0, 320, 120], [62.5, 93.75, 640, 480]])
    assert px.dtype == np.float64


@pytest.mark.parametrize("box, kept", [
    ((0, 0, 1, 1), True),
    ((1024, 1024, 1025, 1025), True),    # A, B may reach 1024; C, D have no upper bound
    ((10, 10, 5000, 2048), True),        # far outside the image, still kept (package rule)
    ((1025, 0, 1030, 10), False),        # A > 1024
    ((0, 1025, 10, 1030), False),        # B > 1024
    ((10, 10, 10, 20), False),           # C == A
    ((10, 20, 30, 19), False),           # D < B
])
def test_package_keep_rule(box, kept):
    assert parse_grid_boxes(format_box(box)) == ([box] if kept else [])


def test_box_outside_image_is_not_clipped():
    px = parse_boxes(format_box((512, 0, 2048, 1024)), (100, 50))
    np.testing.assert_array_equal(px, [[50, 0, 200, 50]])


@pytest.mark.parametrize("text", [
    None, 17, b"<bbox_start><x1><y2><x3><y4><bbox_end>", ["<bbox_start>"], "", "no boxes here",
    "<bbox_start><x1><y2><x3><bbox_end>",                 # three coordinates
    "<bbox_start><x-1><y2><x3><y4><bbox_end>",            # negative
    "<bbox_start><x1.5><y2><x3><y4><bbox_end>",           # fractional
    "<bbox_start><y1><x2><y3><x4><bbox_end>",             # x/y swapped
    "<bbox_start><x1><y2><x3><y4>",                       # no end token
    "<x1><y2><x3><y4><bbox_end>",                         # no start token
    "<bbox_start><x\u0661><y2><x3><y4><bbox_end>",        # non-ASCII digit
    "<bbox_start><x1><y2><x3><y4><x5><bbox_end>",         # five coordinates
    "<bbox_start><bbox_start><bbox_end>" * 1000,
])
def test_malformed_text_gives_no_boxes(text):
    assert parse_grid_boxes(text) == []
    out = parse_boxes(text, (10, 10))
    assert out.shape == (0, 4) and out.dtype == np.float64


def test_malformed_box_does_not_swallow_the_next():
    text = "<bbox_start><x1><y2><x3><bbox_end><bbox_start><x5><y6><x7><y8><bbox_end>"
    assert parse_grid_boxes(text) == [(5, 6, 7, 8)]


def test_huge_numbers_never_raise():
    huge = "9" * 5000  # longer than Python's default int-parsing limit
    assert parse_grid_boxes(f"<bbox_start><x1><y2><x{huge}><y4><bbox_end>") == []
    big = "9" * 400  # parses, but no finite float64 pixel exists: dropped at conversion
    assert len(parse_grid_boxes(f"<bbox_start><x1><y2><x{big}><y4><bbox_end>")) == 1
    assert parse_boxes(f"<bbox_start><x1><y2><x{big}><y4><bbox_end>", (10, 10)).shape == (0, 4)


def test_grid_round_trip():
    size = (333, 217)
    px = [(0, 0, 333, 217), (10, 20, 30, 40), (100.4, 50.6, 200.2, 216.9)]
    grid = pixels_to_grid(px, size)
    assert grid[0] == (0, 0, 1024, 1024)
    back = grid_to_pixels(grid, size)
    assert np.abs(back - np.asarray(px)).max() <= max(size) / 1024 / 2 + 1e-9
    assert parse_grid_boxes(format_boxes(grid)) == grid
