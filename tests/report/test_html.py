"""report.html: a ``--fast`` run's page opened in headless Chromium (Debian's ``chromium``; ``.ci/run``
installs it) — a screenshot that is not blank, no console message (the page has no script, and its
Content-Security-Policy turns any external load into a console error), and every table and figure
the run wrote present in the DOM; plus escaping of user input and the ``--fast`` index.

The browser is driven through its documented headless switches (``--screenshot``, ``--dump-dom``,
``--enable-logging=stderr``: console messages are logged as ``CONSOLE`` lines), so the test needs
nothing beyond the standard library and the ``chromium`` binary."""

from __future__ import annotations

import base64
import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import cv2
import numpy as np
import pytest

from _browser import CHROMIUM, browse

from icl.report.aggregate import Aggregate, TaskSpec
from icl.report.html import GENERATOR, html_table, index_html, inline_svg, report_html, write_index
from icl.report.plots import task_plot
from icl.run.planning.config import ModelSpec, RunConfig
from icl.run.runner import run
from icl.store import Failure

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "report_fast.png"


class _Dom(HTMLParser):
    """What the dumped DOM holds: ids, and the tags inside each ``<figure>``."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.counts: dict[str, int] = {}
        self.figure_content: dict[str, set[str]] = {}
        self.images: list[str] = []
        self._figure: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "figure":
            self._figure = a.get("id")
            self.figure_content[self._figure] = set()
        elif self._figure is not None:
            self.figure_content[self._figure].add(tag)
        if tag == "img":
            self.images.append(a.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium; "
                                             ".ci/run installs it when run as root)")
def test_fast_report_opens_in_chromium(builtin_root, tmp_path):
    out = tmp_path / "vibe-fast"
    config = RunConfig("vibe", dict(tasks=("edges", "flip"), shots=(1, 3), limit=2, qualitative=1),
                       [ModelSpec("identity"), ModelSpec("copy-target")], fast=True, data_root=builtin_root, out=out,
                       progress=False)
    t_run = time.perf_counter()
    assert run(config).exit_code == 0
    page = out / "report.html"
    t0 = time.perf_counter()
    dom, console, image = browse(page, tmp_path)
    browse_s = time.perf_counter() - t0

    assert console == [], console  # no script, no blocked load, no error of any kind
    assert image.shape[0] > 100 and float(image.std()) > 10, "blank screenshot"
    assert (image < 128).mean() > 0.002  # some dark ink (text, bars) on the page

    meta = json.loads((out / "results.json").read_text())
    parsed = _Dom()
    parsed.feed(dom)
    assert "built-in synthetic data" in dom.split("</h1>")[0]  # the origin stated at the top
    for name in meta["tables"]:
        assert f"table-{name}" in parsed.ids, name
    assert parsed.counts.get("table", 0) >= len(meta["tables"])
    figures = sorted({p.stem for p in (out / "plots").iterdir()})
    assert any(f.startswith("shots") for f in figures) and any(f.startswith("task_") for f in figures)
    for stem in figures:
        content = parsed.figure_content.get(f"fig-{stem}")
        assert content is not None, stem
        svg = (out / "plots" / f"{stem}.svg").is_file()
        assert ("svg" in content) if svg else ("img" in content), stem
    assert parsed.images and all(src.startswith("data:image/png;base64,") for src in parsed.images)
    for src in parsed.images:  # every embedded grid decodes
        assert cv2.imdecode(np.frombuffer(base64.b64decode(src.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR) is not None
    assert not re.search(r'(src|href)="(https?:)?//', dom)  # nothing to fetch
    print(f"run {t0 - t_run:.1f} s, chromium {browse_s:.1f} s, page {page.stat().st_size} bytes")
    assert browse_s < 60


def test_report_escapes_user_input(tmp_path):
    """Model labels, item keys, cells and messages are the user's: escaped everywhere, also in a
    figure's inline SVG (matplotlib writes label text escaped; ids get a per-figure prefix)."""
    evil = '<script>alert("x")</script>&'
    task = TaskSpec("flip", ("psnr",), ("psnr",), frozenset())
    aggs = [Aggregate(evil, "1", d, "flip", 1, "psnr", 20.0 + i, 1.0, 4, 0, 0) for i, d in enumerate(("a", "b"))]
    plots = task_plot(task, aggs, 1, tmp_path / "task_flip_k1.png")
    tables = {"results": [{"model": evil, "metric": "psnr", "value": 1.5, "ci_low": 1.0, "ci_high": 2.0,
                           "direction": "higher", "unit": "dB"}]}
    meta = {"config": {"name": evil}, "data": {evil: "built-in synthetic"}, "models": {evil: {"model_id": evil}},
            "tables": {"results": "results.csv"}}
    page = report_html("vibe", tables, meta, [Failure("answer", evil, evil, evil)], plots, tmp_path)
    assert "<script" not in page and "alert(&quot;x&quot;)" in page
    assert "psnr (dB) \u2191" in page and "1.5 [1, 2]" in page  # unit, direction, interval
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))


def test_inline_svg_prefixes_every_id():
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg width="10pt" height="5pt" viewBox="0 0 10 5">'
           '<defs><clipPath id="p1"><rect/></clipPath></defs><g clip-path="url(#p1)"><use xlink:href="#m2"/></g>'
           '<path id="m2"/></svg>')
    got = inline_svg(svg, "f3-")
    assert got.startswith('<svg class="fig"') and 'style="width:10pt"' in got
    assert 'id="f3-p1"' in got and "url(#f3-p1)" in got and 'href="#f3-m2"' in got and 'id="f3-m2"' in got
    assert "<?xml" not in got and "DOCTYPE" not in got


def test_table_intervals_and_units():
    rows = [{"model": "a", "task": "t", "accuracy": 50.0, "std": 2.0, "ci_low": 45.0, "ci_high": 55.0},
            {"model": "b", "task": "t", "accuracy": float("nan"), "std": 0.0, "ci_low": None, "ci_high": None}]
    got = html_table(rows)
    assert "accuracy (%) \u2191 [95% CI]" in got and "50 [45, 55]" in got and "missing" in got
    assert "ci_low" not in got
    vif = html_table([{"model": "a", "average": 5.0, "average_lo": 4.0, "average_hi": 6.0, "lpips": 0.2}])
    assert "5 [4, 6]" in vif and "lpips (0-1) \u2193" in vif and "average_lo" not in vif


def test_index_links_runs_and_never_overwrites_a_users_file(tmp_path):
    for name in ("a-fast", "b-fast"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(
            {"config": {"name": name}, "data": {"d": "built-in synthetic"}, "counts": {"planned": 3}}))
    runs = [("a", tmp_path / "a-fast", 0), ("b", tmp_path / "b-fast", 1)]
    path = write_index(runs)
    text = path.read_text()
    assert path == tmp_path / "report.html" and GENERATOR in text
    assert 'href="a-fast/report.html"' in text and "FAILED (exit 1)" in text and "built-in synthetic data" in text
    assert write_index(runs) == path  # its own page is rewritten
    path.write_text("my notes")
    assert write_index(runs) is None and path.read_text() == "my notes"
    assert "<script" not in index_html([("<script>", tmp_path / "a-fast", 0)], tmp_path)
