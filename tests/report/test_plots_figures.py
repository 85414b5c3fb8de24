"""Plots are drawn on ``Figure`` objects: no pyplot state and no global backend switch, so a
notebook's matplotlib session is left as it was (``icl.evaluate``; issue 19, issue 29)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def test_plots_leave_pyplot_and_the_backend_alone(tmp_path):
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        import matplotlib
        matplotlib.use("svg")  # the caller's choice, which plotting must keep
        from icl.report.aggregate import Aggregate, RankTable, TaskSpec
        from icl.report.plots import rank_heatmap, task_plot

        task = TaskSpec("flip", ("psnr", "lpips"), ("psnr", "lpips"), frozenset({{"lpips"}}))
        aggs = [Aggregate(m, "1", d, "flip", 1, k, v, 0.0, 4, 0, 0)
                for m in ("a", "b") for d in ("x", "y", "z") for k, v in (("psnr", 20.0), ("lpips", 0.3))]
        out = Path({str(tmp_path)!r})
        radar = task_plot(task, aggs, 1, out / "radar.png")[0]
        table = RankTable(1, ["a", "b"], ["flip"], task_ranks={{"flip": {{"a": 1.0, "b": 2.0}}}},
                          overall={{"a": 1.0, "b": 2.0}})
        heat = rank_heatmap(table, out / "ranks.png")[0]
        print(json.dumps({{"backend": matplotlib.get_backend(), "pyplot": "matplotlib.pyplot" in sys.modules,
                          "files": [radar.stat().st_size > 1000, heat.stat().st_size > 1000]}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"backend": "svg", "pyplot": False, "files": [True, True]}


def _svg_text(path):
    return path.read_text(encoding="utf-8")


def test_every_figure_is_a_200_dpi_png_and_a_stable_svg(tmp_path):
    from PIL import Image

    from icl.report.aggregate import Aggregate, TaskSpec
    from icl.report.plots import task_plot

    task = TaskSpec("flip", ("psnr", "lpips"), ("psnr", "lpips"), frozenset({"lpips"}))
    aggs = [Aggregate("a", "1", d, "flip", 1, k, v, 0.5, 9, 0, 0) for d in ("x", "y") for k, v in (("psnr", 20.0),
                                                                                                    ("lpips", 0.3))]
    png, svg = task_plot(task, aggs, 1, tmp_path / "one.png")
    with Image.open(png) as im:
        assert im.info["dpi"] == pytest.approx((200, 200), abs=0.01) and im.size[0] >= 1000
    text = _svg_text(svg)
    # units and directions on the axes, text kept as text; whiskers labelled as the fallback they are
    assert "psnr (dB) \u2191" in text and "lpips (0-1) \u2193" in text
    assert "1.96 standard errors (normal approximation" in text
    again = task_plot(task, aggs, 1, tmp_path / "two.png")[1]
    assert _svg_text(again) == text  # byte-stable: no date, fixed ids


def test_bars_below_five_datasets_radar_from_five_and_ci_whiskers(tmp_path):
    from dataclasses import dataclass

    from icl.report.aggregate import Aggregate, TaskSpec
    from icl.report.plots import interval, task_plot

    @dataclass(frozen=True)
    class WithCI(Aggregate):  # the fields the statistics add to Aggregate
        ci_low: float = float("nan")
        ci_high: float = float("nan")

    task = TaskSpec("seg", ("miou",), ("miou",), frozenset())
    four = [WithCI("a", "1", f"d{i}", "seg", 1, "miou", 0.5, 0.1, 5, 0, 0, 0.4, 0.6) for i in range(4)]
    bars = _svg_text(task_plot(task, four, 1, tmp_path / "bars.png")[1])
    assert "miou (0-1) \u2191" in bars and "95% bootstrap confidence interval" in bars
    five = [Aggregate("a", "1", f"d{i}", "seg", 1, "miou", 0.5, 0.1, 5, 0, 0) for i in range(5)]
    radar = _svg_text(task_plot(task, five, 1, tmp_path / "radar.png")[1])
    assert "standard errors" not in radar and all(f">d{i}<" in radar for i in range(5))  # axis labels, no whiskers

    assert interval(four[0]) == (0.4, 0.6, True)
    lo, hi, ci = interval(five[0])  # population std 0.1 over 5 -> s.e. 0.1 / sqrt(4)
    assert not ci and (lo, hi) == pytest.approx((0.5 - 1.96 * 0.05, 0.5 + 1.96 * 0.05))
    assert all(v != v for v in interval({"mean": 1.0, "std": 0.0, "n": 1})[:2])  # one sample: no whisker


def test_vibe_shot_rows_combine_dataset_intervals():
    from icl.benchmarks.vibe.figures import rank_intervals, shot_rows
    from icl.report.aggregate import Aggregate

    aggs = [Aggregate("m", "1", d, "t", k, "f1", v, 0.3, 10, 0, 0) for k in (1, 3) for d, v in (("x", 0.2), ("y", 0.4))]
    rows = shot_rows(aggs)["m"]
    assert [r["shots"] for r in rows] == [1, 3] and rows[0]["mean"] == pytest.approx(0.3)
    half = 1.96 * 0.3 / 3  # each dataset's half-width; two in quadrature over two datasets
    assert rows[0]["ci_high"] - rows[0]["mean"] == pytest.approx((2 * half ** 2) ** 0.5 / 2)
    assert rows[0]["interval"] == "normal"
    ranks = [dict(shots=1, model="m", task="*", metric="*", rank=1.5, ci_low=1.0, ci_high=2.0),
             dict(shots=1, model="m", task="t", metric="*", rank=1.0),
             dict(shots=1, model="m", task="t", metric="f1", rank=1.0, ci_low=1.0, ci_high=1.0)]
    assert rank_intervals(ranks) == {1: {("m", "overall"): (1.0, 2.0)}}


def test_figure_pngs_are_lossless_and_written_with_one_row_filter(tmp_path):
    """``png_params``: the figure's pixels exactly (PIL decodes the file, independent of OpenCV);
    with OpenCV 4.11 on, the "up" filter on every row (the PNG's filter-type bytes, read back from
    the zlib stream) and a file at most 10% larger than libpng's per-row choice."""
    import zlib

    import cv2
    import numpy as np
    from PIL import Image

    from icl.report.plots import png_params, write_rgb

    rng = np.random.default_rng(0)
    image = np.full((120, 160, 3), 255, np.uint8)
    image[20:100, 30:130] = rng.integers(0, 256, 3, dtype=np.uint8)  # flat areas and edges, as a figure has
    image[50:60, :] = rng.integers(0, 256, (10, 160, 3), dtype=np.uint8)
    write_rgb(tmp_path / "f.png", image, level=1)
    with Image.open(tmp_path / "f.png") as im:
        assert np.array_equal(np.asarray(im.convert("RGB")), image)
    if not hasattr(cv2, "IMWRITE_PNG_FILTER"):
        pytest.skip("this OpenCV cannot choose the row filter")
    data = (tmp_path / "f.png").read_bytes()
    chunks, at = [], 8
    while at < len(data):
        n = int.from_bytes(data[at:at + 4], "big")
        chunks.append((data[at + 4:at + 8], data[at + 8:at + 8 + n]))
        at += 12 + n
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = 1 + 160 * 3
    assert {raw[r * stride] for r in range(1, 120)} == {2}  # 2: "up" (the first row may say 0: no row above)
    adaptive = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 1])[1]
    assert len(data) <= 1.1 * len(adaptive)
    assert png_params(1)[:2] == [cv2.IMWRITE_PNG_COMPRESSION, 1]


def _bar_figure(path):
    from icl.report.aggregate import Aggregate, TaskSpec
    from icl.report.plots import task_plot

    task = TaskSpec("flip", ("psnr", "lpips"), ("psnr", "lpips"), frozenset({"lpips"}))
    aggs = [Aggregate(m, "1", d, "flip", 1, k, v, 0.0, 4, 0, 0)
            for m in ("a", "b") for d in ("x", "y") for k, v in (("psnr", 20.0), ("lpips", 0.3))]
    return task_plot(task, aggs, 1, path)


def test_a_png_that_fails_while_its_svg_is_written_fails_the_figure_in_the_caller(tmp_path):
    """The PNG is encoded and written in a thread: its failure (here a file size limit between
    the SVG's size and the PNG's) is raised by ``save_figure`` as one line naming the PNG, no
    thread traceback is printed, and neither a truncated PNG nor the SVG is left."""
    (tmp_path / "whole").mkdir()
    png, svg = _bar_figure(tmp_path / "whole" / "f.png")
    limit = (png.stat().st_size + svg.stat().st_size) // 2
    assert svg.stat().st_size < limit < png.stat().st_size
    out = tmp_path / "limited"
    out.mkdir()
    code = textwrap.dedent(f"""
        import resource, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_plots_figures import _bar_figure
        from icl.store.atomic import OutputWriteError

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        try:
            _bar_figure(Path({str(out)!r}) / "f.png")
        except OutputWriteError as exc:
            print("raised:", exc)
        else:
            print("no error")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Exception in thread" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.startswith(f"raised: cannot write {out / 'f.png'}: file too large"), proc.stdout
    assert sorted(p.name for p in out.iterdir()) == [], "a truncated PNG, its SVG or a temporary was left"
