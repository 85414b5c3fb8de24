"""CoBSAT's release as ``python -m icl.data fetch cobsat`` knows it (icl/benchmarks/cobsat/release.py,
``CoBSAT.releases`` / ``check_release``) on a fabricated copy (test_cobsat_data.py ``fabricate``):
an image its captions file does not caption is a typed error (:class:`MissingCaption`, still the
ValueError callers catch) that the check counts rather than refuses; a captions file it cannot
read is refused in one line."""

from __future__ import annotations

import csv

import pytest

from tests.benchmarks.cobsat.test_cobsat_data import fabricate

from icl.benchmarks.cobsat.benchmark import CoBSAT
from icl.benchmarks.cobsat.data import MissingCaption, ReleaseImages
from icl.benchmarks.cobsat.vocab import THEMES
from icl.data.release import HubRelease, ReleaseError

ALL = tuple(THEMES)


def _drop_caption(root, theme: str, image: str) -> None:
    path = root / "datasets" / f"{theme}.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["image"] != image]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["image", "caption"])
        w.writeheader()
        w.writerows(rows)


def test_the_benchmark_declares_its_hub_release():
    rel = CoBSAT.releases["cobsat"]
    assert isinstance(rel, HubRelease) and rel.repo == "yzeng58/CoBSAT" and len(rel.commit) == 40
    assert rel.allow_patterns == ("datasets/*",)  # never the loading script


def test_a_missing_caption_is_a_typed_value_error(tmp_path):
    root = fabricate(tmp_path, themes=("style_object",))
    _drop_caption(root, "style_object", "3d_car.jpg")
    release = ReleaseImages(root)
    with pytest.raises(MissingCaption, match=r"style_object.csv has no caption for 3d_car.jpg") as err:
        release.caption(THEMES["style_object"], "3d", "car")
    assert isinstance(err.value, ValueError)  # what callers caught before the type existed
    assert release.caption(THEMES["style_object"], "3d", "leaf") == "caption of 3d leaf"


def test_the_check_counts_an_uncaptioned_image_and_refuses_an_unreadable_captions_file(tmp_path):
    root = fabricate(tmp_path, themes=ALL)
    _drop_caption(root, "style_object", "3d_car.jpg")
    counts = CoBSAT.check_release("cobsat", root)
    assert counts["themes"]["style_object"] == {"images": 100, "captions": 99}
    assert counts["images"] == 500 and CoBSAT.release_summary("cobsat", counts) == "5 themes, 500 images"
    (root / "datasets" / "color_object.csv").write_text("name,text\nx,y\n")
    with pytest.raises(ReleaseError, match=r"^CoBSAT release at .*color_object.csv has no 'image' and 'caption' "
                                           r"columns \(has name, text\)$"):
        CoBSAT.check_release("cobsat", root)


def test_the_check_refuses_a_theme_missing_an_image(tmp_path):
    root = fabricate(tmp_path, themes=ALL, skip={("red", "car")})
    with pytest.raises(ReleaseError, match=r"theme color_object: 1 of its 100 images missing after unpacking "
                                           r"\(first: datasets/color_car/red_car.jpg\)$"):
        CoBSAT.check_release("cobsat", root)
