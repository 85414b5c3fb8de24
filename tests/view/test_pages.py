"""The pages' pure pieces: escaping, links, rank intervals, shortened text."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from icl.view.pages import esc, rank_intervals, shorten, url


def test_esc_makes_markup_and_surrogates_text():
    assert esc("<img src=x onerror=\"alert(1)\">") == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    assert esc("a\ud800b") == "a?b"
    assert esc("=cmd|' /C calc'!A0") == "=cmd|&#x27; /C calc&#x27;!A0"


def test_url_round_trips_every_filter():
    href = url("/samples", run="a/b", q="x&y=<z>", shots=2, lo=None, m=["p|q", "r"])
    assert parse_qs(urlsplit(href).query) == {"run": ["a/b"], "q": ["x&y=<z>"], "shots": ["2"], "m": ["p|q", "r"]}


def test_rank_intervals_from_confidence_intervals():
    # a lies wholly above c and d, b overlaps a and c, d lies below everyone
    entries = [("a", 0.93, 0.9, 0.95), ("b", 0.8, 0.7, 0.9), ("c", 0.75, 0.6, 0.88), ("d", 0.2, 0.1, 0.3)]
    want = {"a": (1, 2), "b": (1, 3), "c": (2, 3), "d": (4, 4)}
    assert rank_intervals(entries, lower_better=False) == want
    assert rank_intervals([(n, -v, -h, -lo) for n, v, lo, h in entries], lower_better=True) == want


def test_long_text_is_cut_with_one_line_saying_so():
    out = shorten("<b>" * 1000, limit=10)
    assert out.count("&lt;b&gt;") == 3 and "shortened: 3,000 characters, the first 10 shown" in out
    assert "shortened" not in shorten("short")
