"""The canonical format: writer -> validating loader round trip, and clear DataErrors."""

import json

import cv2
import numpy as np
import pytest

from icl.data.dataset import DataError, DatasetMeta, load_dataset
from icl.data.writer import DatasetWriter

META = DatasetMeta(
    name="tiny",
    version="1",
    tasks=("segmentation", "depth", "edges", "keypoints", "detection", "artifact_removal", "object_removal", "flip"),
    classes=("background", "thing", "other"),
    depth_range=(0.0, 10.0),
    pairs=(("artifact_removal", "rain"), ("object_removal", "removed")),
)


def _sample(gen, h=9, w=13):
    seg = gen.integers(0, 3, (h, w)).astype(np.uint8)
    seg[0, 0] = 255
    depth = gen.uniform(0.5, 9.0, (h, w)).astype(np.float32)
    depth[1, 1] = -1.0
    return dict(
        image=gen.integers(0, 256, (h, w, 3), dtype=np.uint8),
        segmentation=seg,
        depth=depth,
        edges=gen.random((h, w)) < 0.3,
        keypoints=np.array([[1.0, 2.0, 2], [5.5, 3.0, 1], [40.0, 40.0, 0]]),
        boxes=np.array([[0.0, 0.0, 4.5, 3.0], [2.0, 1.0, 13.0, 9.0]]),
        box_classes=np.array([1, 2]),
        paired={
            "rain": gen.integers(0, 256, (h, w, 3), dtype=np.uint8),
            "removed": gen.integers(0, 256, (h, w, 3), dtype=np.uint8),
        },
        paired_info={"removed": {"box": [2, 1, 6, 5]}},
    )


@pytest.fixture
def tiny(tmp_path, rng):
    writer = DatasetWriter(tmp_path / "tiny", META)
    samples = {f"a{i}": _sample(rng) for i in range(3)}
    for sid, kw in samples.items():
        writer.add(sid, **kw)
    return tmp_path / "tiny", samples


def test_round_trip(tiny):
    root, samples = tiny
    ds = load_dataset(root)
    assert ds.meta == META
    assert ds.ids() == ["a0", "a1", "a2"]
    assert ds.validate() == 3
    for sid, kw in samples.items():
        s = ds.load(sid)
        np.testing.assert_array_equal(s.image, kw["image"])
        ann = s.annotations
        np.testing.assert_array_equal(ann["segmentation"], kw["segmentation"])
        np.testing.assert_array_equal(ann["depth"], kw["depth"])
        np.testing.assert_array_equal(ann["edges"], kw["edges"])
        np.testing.assert_array_equal(ann["keypoints"], kw["keypoints"])
        np.testing.assert_array_equal(ann["boxes"], kw["boxes"])
        np.testing.assert_array_equal(ann["box_classes"], kw["box_classes"])
        np.testing.assert_array_equal(ann["paired"]["rain"], kw["paired"]["rain"])
        assert ann["paired_info"]["removed"] == {"box": [2, 1, 6, 5]}
        assert ann["pair_kinds"] == {"artifact_removal": "rain", "object_removal": "removed"}
    assert ds.classes_present("a0", "boxes") == frozenset({1, 2})
    assert 255 not in ds.classes_present("a0", "segmentation")


def test_depth_png_in_millimetres(tiny):
    root, _ = tiny
    (root / "depth" / "a1.npy").unlink()
    mm = np.full((9, 13), 1500, np.uint16)
    mm[2, 3] = 0
    cv2.imwrite(str(root / "depth" / "a1.png"), mm)
    depth = load_dataset(root).load("a1").annotations["depth"]
    assert depth[0, 0] == np.float32(1.5)
    assert depth[2, 3] == -1.0


def test_corrupt_image_names_path_and_sample(tiny):
    root, _ = tiny
    (root / "images" / "a1.png").write_bytes(b"not a png at all")
    ds = load_dataset(root)
    with pytest.raises(DataError) as err:
        ds.load("a1")
    assert err.value.sample_id == "a1"
    assert err.value.path.endswith("images/a1.png")
    assert "a1" in str(err.value) and "images/a1.png" in str(err.value)


def test_missing_annotation_file_fails_only_its_sample(tiny):
    root, _ = tiny
    (root / "segmentation" / "a2.png").unlink()
    ds = load_dataset(root)
    (problem,) = ds.problems
    assert problem.sample_id == "a2" and "segmentation/a2.png" in str(problem)
    with pytest.raises(DataError, match="missing segmentation file") as err:
        ds.load("a2")
    assert err.value.sample_id == "a2"
    assert ds.load("a2", parts=("depth",)).annotations["depth"].shape == (9, 13)  # other parts still load
    assert ds.load("a0").id == "a0" and ds.load("a1").id == "a1"


def test_missing_paired_image(tiny):
    root, _ = tiny
    (root / "paired" / "rain" / "a0.png").unlink()
    ds = load_dataset(root)
    assert [p.sample_id for p in ds.problems] == ["a0"] and "paired/rain/a0.png" in str(ds.problems[0])
    with pytest.raises(DataError, match="paired/rain/a0.png"):
        ds.load("a0")


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: cv2.imwrite(str(r / "segmentation" / "a0.png"), np.full((9, 13), 7, np.uint8)), "class id 7"),
        (lambda r: cv2.imwrite(str(r / "segmentation" / "a0.png"), np.zeros((9, 12), np.uint8)), "size"),
        (lambda r: cv2.imwrite(str(r / "segmentation" / "a0.png"), np.zeros((9, 13, 3), np.uint8)), "single-channel"),
        (lambda r: np.save(r / "depth" / "a0.npy", np.zeros((9, 13), np.int32)), "float"),
        (lambda r: (r / "boxes" / "a0.json").write_text(json.dumps({"boxes": [{"box": [3, 0, 2, 4], "class": 1}]})), "box"),
        (lambda r: (r / "boxes" / "a0.json").write_text(json.dumps({"boxes": [{"box": [0, 0, 2, 4], "class": 9}]})), "class"),
        (lambda r: (r / "keypoints" / "a0.json").write_text(json.dumps({"points": [[20, 1, 2]]})), "outside"),
        (lambda r: (r / "keypoints" / "a0.json").write_text(json.dumps({"points": [[1, 1]]})), "points"),
        (lambda r: (r / "keypoints" / "a0.json").write_text("{"), "JSON"),
        (lambda r: (r / "paired" / "removed" / "a0.json").write_text(json.dumps({"box": [0, 0, 99, 2]})), "paired box"),
    ],
)
def test_corrupt_annotations(tiny, mutate, message):
    root, _ = tiny
    mutate(root)
    with pytest.raises(DataError, match=message) as err:
        load_dataset(root).load("a0")
    assert err.value.sample_id == "a0"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tasks": ["segmentation", "telepathy"]}, "unknown tasks"),
        ({"depth_range": [5, 1]}, "depth_range"),
        ({"depth_range": None}, "depth_range"),
        ({"pairs": {}}, "pairs"),
        ({"name": "has space"}, "name"),
        ({"classes": []}, "classes"),
    ],
)
def test_bad_meta(tiny, change, message):
    root, _ = tiny
    raw = json.loads((root / "meta.json").read_text())
    raw.update(change)
    (root / "meta.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match=message):
        load_dataset(root)


def test_not_a_dataset(tmp_path):
    with pytest.raises(DataError, match="meta.json"):
        load_dataset(tmp_path)


def test_unknown_sample(tiny):
    with pytest.raises(DataError, match="unknown sample"):
        load_dataset(tiny[0]).load("zzz")


def test_grey_and_rgba_images_become_rgb(tmp_path):
    meta = DatasetMeta(name="g", version="1", tasks=("flip",))
    DatasetWriter(tmp_path, meta)
    (tmp_path / "images").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "grey.png"), np.full((4, 5), 77, np.uint8))
    bgra = np.zeros((4, 5, 4), np.uint8)
    bgra[..., 2] = 200  # red in OpenCV's BGRA order
    cv2.imwrite(str(tmp_path / "images" / "rgba.png"), bgra)
    ds = load_dataset(tmp_path)
    assert (ds.load("grey").image == 77).all()
    assert ds.load("rgba").image.shape == (4, 5, 3) and (ds.load("rgba").image[..., 0] == 200).all()


def test_cli_validate(tiny, capsys):
    from icl.data.__main__ import main

    root, _ = tiny
    assert main(["validate", str(root)]) == 0
    assert "tiny 1: 3 samples" in capsys.readouterr().out
    (root / "edges" / "a2.png").write_bytes(b"junk")
    assert main(["validate", str(root)]) == 1
    assert "edges/a2.png" in capsys.readouterr().err


def test_image_removed_after_opening(tiny):
    root, _ = tiny
    ds = load_dataset(root)
    (root / "images" / "a0.png").unlink()
    with pytest.raises(DataError, match="missing image") as err:
        ds.load("a0")
    assert err.value.sample_id == "a0" and err.value.path.endswith("images/a0.png")


def test_lone_surrogate_in_json_names_file_and_field(tiny):
    """``"\\ud800"`` is legal JSON but no Unicode: a DataError naming the file and the field, for
    meta.json (the dataset) and an annotation (its sample only)."""
    root, _ = tiny
    (root / "paired" / "removed" / "a1.json").write_text('{"box": [2, 1, 6, 5], "note": "\\udcff"}')
    with pytest.raises(DataError, match=r"field 'note': not valid Unicode: a lone surrogate U\+DCFF at character 0 "
                                        r"\(sample 'a1', file '.*a1.json'\)") as err:
        load_dataset(root).load("a1")
    assert err.value.sample_id == "a1"
    raw = json.loads((root / "meta.json").read_text())
    raw["description"] = "made \ud800 by hand"
    (root / "meta.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"field 'description': not valid Unicode: a lone surrogate U\+D800 "
                                        r"at character 5 \(file '.*meta.json'\)"):
        load_dataset(root)
