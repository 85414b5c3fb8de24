"""The published layout, on a fabricated copy: ``datasets/{attr_type}_{obj}/{attr}_{obj}.jpg`` with
raw values (``3d_car.jpg``), captions in ``datasets/{task_type}.csv`` (columns ``image``,
``caption``), as ``helper.py`` (``find_image``, ``find_caption``) of UW-Madison-Lee-Lab/CoBSAT reads
them. A missing image is a data failure naming its task and prompt; that prompt is not run."""

import csv

import cv2
import numpy as np
import pytest

from icl.benchmarks.check import check_benchmark
from icl.benchmarks.cobsat.benchmark import CoBSAT
from icl.benchmarks.cobsat.data import ReleaseImages
from icl.benchmarks.cobsat.vocab import THEMES, VOCAB


def fabricate(root, themes=("style_object",), skip=()):
    """A release folder with one 16 x 16 JPEG per (attribute, object) of ``themes``; the image of
    (attribute, object) is a flat colour derived from its indices."""
    for name in themes:
        t = THEMES[name]
        rows = []
        for i, a in enumerate(VOCAB[t.attribute]):
            for j, o in enumerate(VOCAB[t.object]):
                if (a, o) in skip:
                    continue
                folder = root / "datasets" / f"{t.attribute}_{o}"
                folder.mkdir(parents=True, exist_ok=True)
                bgr = np.zeros((16, 16, 3), np.uint8)
                bgr[:] = (20 * j, 0, 20 * i)  # red channel = 20 * attribute index, blue = 20 * object index
                assert cv2.imwrite(str(folder / f"{a}_{o}.jpg"), bgr)
                rows.append({"image": f"{a}_{o}.jpg", "caption": f"caption of {a} {o}"})
        with open(root / "datasets" / f"{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, ["image", "caption"])
            w.writeheader()
            w.writerows(rows)
    return root


def test_release_images_read_as_rgb(tmp_path):
    rel = ReleaseImages(fabricate(tmp_path / "cobsat"))
    t = THEMES["style_object"]
    img = rel.image(t, "3d", "car")  # raw value in the file name: 3d_car.jpg, not wireframe_car.jpg
    assert img.shape == (16, 16, 3) and img.dtype == np.uint8
    assert abs(int(img[8, 8, 0]) - 20 * VOCAB["style"].index("3d")) <= 3  # red first
    assert abs(int(img[8, 8, 2]) - 20 * VOCAB["object"].index("car")) <= 3
    assert rel.caption(t, "3d", "car") == "caption of 3d car"
    assert rel.has_theme(t) and not rel.has_theme(THEMES["color_object"])
    # the parent of cobsat/ works too
    assert ReleaseImages(tmp_path).root == tmp_path / "cobsat"
    with pytest.raises(ValueError, match="no datasets/ folder"):
        ReleaseImages(tmp_path / "elsewhere")


def test_plan_on_the_release_layout(tmp_path):
    root = fabricate(tmp_path, skip={("futuristic", "car")})
    bench = CoBSAT({"data_root": str(root), "tasks": "Style-I,Style-II,Color-I", "shots": "0,2", "prompts": 3,
                    "legacy_prompts": True})
    items = bench.items()
    assert {i.group["task"] for i in items} == {"Style-I", "Style-II"}  # no color images: not planned
    # legacy prompt 0 of Style-I at 2 shots shows 3d_car and futuristic_car: it is not run, and named
    keys = {i.key for i in items}
    assert "release/image/default/emu2/legacy/Style-I/2/0" not in keys
    assert "release/image/default/emu2/legacy/Style-I/0/0" in keys
    fails = bench.data_failures()
    assert any(w == "task Style-I, prompt 0, 2 shots" and m == "missing image datasets/style_car/futuristic_car.jpg"
               and p.endswith("futuristic_car.jpg") for w, m, p in fails)
    assert bench.data_origin()["cobsat"].startswith("release ")
    req = bench.request(next(i for i in items if i.key.endswith("Style-II/2/1")))
    assert [x for x in req.prompt if isinstance(x, str)][0].endswith(": ") and len(req.images) == 2
    # release answers are judged with a release prefix: cobsat-judge refuses them
    jr = bench.judge_requests(items[0], np.zeros((8, 8, 3), np.uint8))
    assert [r.id.split("/")[0] for r in jr] == ["cobsat", "cobsat"]


def test_check_benchmark_on_release_and_lite(tmp_path):
    root = fabricate(tmp_path)
    check_benchmark(CoBSAT, {"data_root": str(root), "tasks": "Style-I,Style-II", "shots": "0,2,8", "prompts": 2})
    check_benchmark(CoBSAT, {"fast": True, "prompts": 2})
    check_benchmark(CoBSAT, {"fast": True, "prompts": 1, "gen_mode": "description", "variant": "cot"})
    check_benchmark(CoBSAT, {"data_root": str(root), "tasks": "Style-I", "shots": "2", "prompts": 2,
                             "variant": "caption", "gen_mode": "description", "family": "qwen"})


def test_configuration_errors(tmp_path):
    with pytest.raises(ValueError, match="needs --gen-mode description"):
        CoBSAT({"fast": True, "variant": "cot"})
    with pytest.raises(ValueError, match="family 'qwen'"):
        CoBSAT({"fast": True, "family": "qwen"})
    with pytest.raises(ValueError, match="unknown task"):
        CoBSAT({"fast": True, "tasks": "Colour-I"})
    with pytest.raises(ValueError, match="shots"):
        CoBSAT({"fast": True, "shots": "2,0"})
    with pytest.raises(ValueError, match="prompts"):
        CoBSAT({"fast": True, "legacy_prompts": True, "prompts": 1001})
    with pytest.raises(ValueError, match="no datasets/ folder"):
        CoBSAT({"data_root": str(tmp_path)}).items()
