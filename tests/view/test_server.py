"""The viewer's HTTP server on 127.0.0.1: every page, its security headers, paths confined to the
run folders, the token off loopback, hostile answers shown as text, run folders left untouched."""

from __future__ import annotations

import csv
import http.client
import json
import math
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, unquote, urlencode

import pytest

from icl.store.sqlite import Score, ScoreKey, Store
from icl.view.server import CSP, Viewer, make_server
from tests.view._runs import BENCHMARK, HOSTILE, PROTOCOL, key_of, snapshot, write_run


@contextmanager
def serving(roots, token=None):
    viewer = Viewer([Path(r) for r in roots], token)
    server = make_server(viewer, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        viewer.close()


def get(port, path, headers=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), body


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    ids = write_run(root / "a", n=30)
    write_run(root / "nested" / "b", n=30, models=("alpha", "gamma"))
    write_run(root / "c", n=10, fingerprint="fp2", hostile=False)
    return root, ids


def test_every_page_is_served_with_a_strict_policy_and_leaves_the_runs_alone(runs):
    root, ids = runs
    before = snapshot(root)
    key = key_of(4, "t1", 1)
    with serving([root]) as port:
        for path in ["/", "/api/runs", "/leaderboard", "/run?run=a", "/samples?run=a", "/samples?run=nested/b&sort=spread",
                     "/samples?run=a&task=t1&shots=1&model=alpha&outcome=ok&lo=0.1&hi=0.9&q=prompt&sort=-score",
                     "/samples?run=a&sort=copy_ssim", f"/item?run=a&{urlencode({'key': key})}",
                     "/compare?run=a&m=alpha&m=beta", "/compare?run=a&m=alpha&m=nested/b|alpha", "/failures?run=a",
                     "/static/view.css", "/static/live.js"]:
            status, headers, body = get(port, path)
            assert status == 200, (path, body[:300])
            assert headers["Content-Security-Policy"] == CSP and "'unsafe-inline'" not in CSP
            assert headers["X-Content-Type-Options"] == "nosniff"
            if headers["Content-Type"].startswith("text/html"):
                assert b"<script>" not in body and b"onerror=" not in body.replace(b"onerror=&quot;", b"")
        runs_json = json.loads(get(port, "/api/runs")[2])
        assert {r["key"] for r in runs_json} == {"a", "nested/b", "c"}
        assert all(r["status"] == "finished with failures" for r in runs_json)
        # an image answer: the PNG itself, and a thumbnail made once in the viewer's cache
        page = get(port, "/samples?run=a&task=t1")[2].decode()
        img = re.search(r'src="(/img\?[^"]+)"', page).group(1).replace("&amp;", "&")
        status, headers, thumb = get(port, img)
        assert status == 200 and headers["Content-Type"] == "image/png" and thumb.startswith(b"\x89PNG")
        status, _, full = get(port, img + "&full=1")
        assert status == 200 and full.startswith(b"\x89PNG")
        assert get(port, "/", method="POST")[0] == 405
    assert snapshot(root) == before  # nothing written, no -wal/-shm left beside the stores


def test_paths_stay_inside_the_run_folders(runs, tmp_path):
    root, ids = runs
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG secret")
    (root / "a" / "gallery").mkdir(exist_ok=True)
    link = root / "a" / "gallery" / "evil.png"
    if not link.exists():
        link.symlink_to(secret)
    with serving([root]) as port:
        for path, want in [("/file?run=a&path=../../etc/passwd", 400), ("/file?run=a&path=gallery/../../x.png", 400),
                           ("/file?run=a&path=%2e%2e/%2e%2e/etc/passwd", 400), ("/file?run=a&path=/etc/passwd", 400),
                           ("/file?run=a&path=gallery/evil.png", 404), ("/file?run=a&path=gallery/none.png", 404),
                           ("/run?run=../..", 404), ("/run?run=/etc", 404), ("/samples?run=..%2F..", 404),
                           ("/static/../server.py", 404), ("/static/%2e%2e/server.py", 404),
                           ("/img?run=a&model=../x&hash=abcdef12", 400), ("/img?run=a&model=x&hash=../../etc", 400),
                           ("/../../etc/passwd", 404), ("/samples?run=a&lo=abc", 400),
                           ("/seen?name=../../../etc/passwd", 404), ("/seen?name=" + "0" * 32 + ".png", 404)]:
            status, _, body = get(port, path)
            assert status == want, (path, status, body[:200])
            assert b"secret" not in body and b"root:" not in body


def test_hostile_answers_are_text_and_a_50_mb_answer_is_shortened(tmp_path):
    write_run(tmp_path / "r", n=4, huge=True)
    with serving([tmp_path]) as port:
        page = get(port, "/samples?run=r&task=t3")[2].decode()
        for text in HOSTILE:
            assert text not in page
        assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
        assert "bad \ufffd bytes" in page
        huge = key_of(4 + len(HOSTILE) + 1, "t3", 1)
        t = time.perf_counter()
        status, _, body = get(port, f"/item?run=r&{urlencode({'key': huge})}")
        assert status == 200 and time.perf_counter() - t < 30
        assert len(body) < 200_000 and b"shortened: 52,428,800 characters" in body
        # the samples list keeps only the first characters too
        status, _, body = get(port, "/samples?run=r&task=t3&q=xxxx")
        assert status == 200 and len(body) < 200_000


def test_on_loopback_a_request_naming_another_host_is_refused(runs):
    root, _ = runs
    with serving([root]) as port:
        assert get(port, "/", {"Host": f"localhost:{port}"})[0] == 200
        assert get(port, "/", {"Host": f"[::1]:{port}"})[0] == 200
        status, _, body = get(port, "/samples?run=a", {"Host": f"rebound.example.com:{port}"})
        assert status == 403 and b"127.0.0.1 or localhost only" in body


def test_off_loopback_a_token_then_a_cookie_is_needed(runs):
    root, _ = runs
    with serving([root], token="s3cret-token") as port:
        status, _, body = get(port, "/samples?run=a")
        assert status == 403 and b"token" in body
        assert get(port, "/img?run=a&model=x&hash=abcdef12")[0] == 403
        assert get(port, "/?token=wrong")[0] == 403
        status, headers, _ = get(port, "/samples?run=a&token=s3cret-token")
        assert status == 303 and headers["Location"] == "/samples?run=a"
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert get(port, "/samples?run=a", {"Cookie": cookie.split(";")[0]})[0] == 200
        assert get(port, "/samples?run=a", {"Cookie": "icl_view_token=nope"})[0] == 403


def test_leaderboard_puts_only_comparable_runs_together(runs):
    root, _ = runs
    with serving([root]) as port:
        page = get(port, "/leaderboard?benchmark=toy&protocol=toy-1")[2].decode()
    table, rest = page.split('id="not-comparable"' if 'id="not-comparable"' in page else "id=not-comparable", 1)
    assert "runs in this table: " in table and ">a<" in table and ">nested/b<" in table
    assert "gamma" in table and "rank" in table
    assert "alpha (a)" in table and "alpha (nested/b)" in table and ">beta<" in table  # alpha is in both runs
    assert ">c<" in rest and "data fingerprint dataset:d1: fp2 (the table&#x27;s: fp1)" in rest


def test_compare_pairs_items_and_counts_wins_and_losses(runs):
    root, _ = runs
    with serving([root]) as port:
        page = get(port, "/compare?run=a&m=alpha&m=beta")[2].decode()
        three = get(port, "/compare?run=a&m=alpha&m=beta&m=alpha")[2].decode()
    summary = re.search(r"<p id=summary>.*?</p>", page).group(0)
    assert summary == re.search(r"<p id=summary>.*?</p>", three).group(0)
    wins = losses = 0
    for i in range(30 + len(HOSTILE) + 1):  # the items, then the text answers of task t3
        if i in (1, 2):  # alpha failed / overflowed: not paired
            continue
        d = ((i * 7919) % 1000) / 1000.0 - ((i * 7919 + 104729) % 1000) / 1000.0
        wins, losses = wins + (d > 0), losses + (d < 0)
    assert f"{wins + losses:,} items scored by all" in page
    assert f"alpha wins {wins:,}, loses {losses:,}" in page
    assert re.search(r"<h2 id=wins>Where alpha wins \((\d+)\)", page).group(1) == str(wins)


def test_compare_pairs_each_item_once_with_its_latest_score(tmp_path):
    """A rescore under a new scorer version keeps the old rows beside the new ones: compare pairs
    each item once, on its latest score, whether two models of one run are compared or more, and
    a metric stored as Infinity (a PSNR of identical images) pairs nothing rather than failing."""
    ids = write_run(tmp_path / "a", n=12, hostile=False, judged=False)
    alpha, beta = ids["alpha"], ids["beta"]
    keys = [key_of(i, "t1" if i % 2 == 0 else "t2", 2 if i % 3 == 0 else 1) for i in range(12)]
    rescored = [k for i, k in enumerate(keys) if i not in (1, 2)]  # alpha's failed and overflowed left out
    with Store(tmp_path / "a" / "store.sqlite") as store:  # version 2: alpha 0.9 everywhere, beta 0.1; one infinity
        store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, k, mid, "", "2"), "ok",
                                        {"acc": v, "copy_ssim": math.inf if k == rescored[0] and mid == alpha else v})
                                  for k in rescored for mid, v in ((alpha, 0.9), (beta, 0.1))])
    with serving([tmp_path]) as port:
        two = get(port, "/compare?run=a&m=alpha&m=beta")[2].decode()
        three = get(port, "/compare?run=a&m=alpha&m=beta&m=alpha")[2].decode()
        status, _, by_ssim = get(port, "/compare?run=a&m=alpha&m=beta&metric=copy_ssim")
        with Store(tmp_path / "a" / "store.sqlite") as store:  # version 3: beta ahead; the kept pairing is dropped
            store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, k, mid, "", "3"), "ok", {"acc": v})
                                      for k in rescored for mid, v in ((alpha, 0.2), (beta, 0.7))])
        later = get(port, "/compare?run=a&m=alpha&m=beta")[2].decode()
    summary = re.search(r"<p id=summary>.*?</p>", two).group(0)
    assert summary == re.search(r"<p id=summary>.*?</p>", three).group(0)
    n = len(rescored)
    assert f"{n:,} items scored by all" in summary and f"alpha wins {n:,}, loses 0, ties 0" in summary
    assert "mean paired difference alpha − beta: 0.8 " in summary
    assert status == 200
    assert f"{n - 1:,} items scored by all" in by_ssim.decode() and "alpha wins 9, loses 0" in by_ssim.decode()
    assert f"{n:,} items scored by all" in later and f"alpha wins 0, loses {n:,}, ties 0" in later


def test_failures_are_grouped_by_message_with_links(runs):
    root, _ = runs
    with serving([root]) as port:
        page = get(port, "/failures?run=a")[2].decode()
    assert "1 × CUDA out of memory (toy)" in page and "1 × overflow" in page
    assert f'href="/item?run=a&amp;key={quote(key_of(1, "t2", 1), safe="")}"' in page


def test_the_same_model_in_two_runs_is_paired_item_by_item(runs):
    root, _ = runs
    with serving([root]) as port:
        page = get(port, f"/compare?run=a&m=alpha&{urlencode({'m': 'nested/b|alpha'})}")[2].decode()
    # both runs hold alpha's same answers: every item scored ok in both is a tie
    summary = re.search(r"<p id=summary>(.*?)</p>", page).group(1)
    paired = 30 + len(HOSTILE) + 1 - 2  # the items, the text answers; not the failed and overflowed ones
    assert summary.startswith(f"{paired:,} items scored by all") and f"wins 0, loses 0, ties {paired:,}" in summary
    assert "nested/b|alpha" in page


def test_a_folder_whose_store_is_not_a_store_is_one_line_not_a_crash(tmp_path):
    write_run(tmp_path / "ok", n=3, hostile=False)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "store.sqlite").write_bytes(b"not a database" * 100)
    (tmp_path / "bad" / "results.json").write_text('{"benchmark": "toy"')  # cut short
    with serving([tmp_path]) as port:
        runs = {r["key"]: r for r in json.loads(get(port, "/api/runs")[2])}
        assert runs["bad"]["status"] == "unreadable" and runs["ok"]["status"] == "finished with failures"
        for path in ("/", "/leaderboard", "/run?run=bad"):
            assert get(port, path)[0] == 200
        status, _, body = get(port, "/samples?run=bad")
        assert status == 404 and b"store.sqlite cannot be read" in body


def test_an_item_whose_request_cannot_be_rebuilt_says_why_in_one_line(runs):
    root, _ = runs
    with serving([root]) as port:
        status, _, body = get(port, f"/item?run=a&{urlencode({'key': key_of(4, 't1', 1)})}")
    assert status == 200
    lines = re.findall(r"<p class=note id=seen-error>([^<]*)</p>", body.decode())
    assert len(lines) == 1 and "unknown benchmark &#x27;toy&#x27;" in lines[0]


def _leaderboard_cells(page):
    """``{(model, column): rank text}`` and ``{column: rank source}`` of the leaderboard table."""
    table = re.search(r"<table id=leaderboard>(.*?)</table>", page).group(1)
    heads = re.findall(r"<th>([^<]*)<br><span class=rank-source>rank: ([^<]*)</span></th>", table)
    cols = [c for c, _ in heads]
    cells = {}
    for model, tds in re.findall(r"<tr><th>([^<]*)</th>(.*?)</tr>", table):
        for col, td in zip(cols, re.findall(r"<td>(.*?)</td>", tds)):
            cells[(model, col)] = re.search(r"<span class=rank>([^<]*)</span>", td).group(1)
    return cells, dict(heads)


def test_leaderboard_shows_the_runs_own_rank_intervals_else_the_overlap_rule(tmp_path):
    """A run's ranks.csv (its bootstrap rank intervals) gives the ranks of a column holding its
    models only; models of two runs together fall back to the overlap of their 95% intervals,
    and each column says which it shows."""
    from icl.view.pages import rank_intervals

    own = {("t1", "alpha"): (2.0, 2.0), ("t1", "beta"): (1.0, 1.0), ("t2", "alpha"): (1.0, 1.5)}
    write_run(tmp_path / "one" / "a", n=30, ranks=own)
    with serving([tmp_path / "one"]) as port:
        page = get(port, "/leaderboard?benchmark=toy&protocol=toy-1")[2].decode()
    cells, sources = _leaderboard_cells(page)
    assert sources == {"t1/d1 k=1": "the run&#x27;s ranks.csv", "t2/d1 k=1": "the run&#x27;s ranks.csv"}
    assert cells == {("alpha", "t1/d1 k=1"): "rank 2", ("beta", "t1/d1 k=1"): "rank 1",
                     ("alpha", "t2/d1 k=1"): "rank 1–1.5", ("beta", "t2/d1 k=1"): "not ranked by the run"}
    # the overlap rule would have said otherwise: the toy run's 95% intervals of t1 overlap
    results = [r for r in csv.DictReader(open(tmp_path / "one" / "a" / "results.csv")) if r["task"] == "t1"]
    overlap = rank_intervals([(r["model"], float(r["value"]), float(r["ci_low"]), float(r["ci_high"]))
                              for r in results], False)
    assert overlap == {"alpha": (1, 2), "beta": (1, 2)}
    assert "the run's ranks.csv where one run holds every model of the column" in page
    # two comparable runs, each with its own ranks.csv: their models together, ranked by overlap
    write_run(tmp_path / "two" / "a", n=30, ranks=own)
    write_run(tmp_path / "two" / "b", n=30, models=("gamma", "delta"), ranks={("t1", "gamma"): (1.0, 1.0)})
    with serving([tmp_path / "two"]) as port:
        page = get(port, "/leaderboard?benchmark=toy&protocol=toy-1")[2].decode()
    cells, sources = _leaderboard_cells(page)
    assert set(sources.values()) == {"overlap of the 95% intervals"}
    rows = [r for run in ("a", "b") for r in csv.DictReader(open(tmp_path / "two" / run / "results.csv"))
            if r["task"] == "t1"]
    want = rank_intervals([(r["model"], float(r["value"]), float(r["ci_low"]), float(r["ci_high"])) for r in rows],
                          False)
    assert {m: cells[(m, "t1/d1 k=1")] for m in want} == {
        m: f"rank {lo}" if lo == hi else f"rank {lo}–{hi}" for m, (lo, hi) in want.items()}


def test_samples_filter_and_sort_by_a_metric_that_holds_infinity(tmp_path):
    """Python stores an infinite metric (the PSNR of identical images) as ``Infinity``, which
    SQLite's JSON functions call malformed: filtering or sorting the samples by any metric other
    than the headline failed the whole page. The index keeps such values as ±1e999 (inf again in
    SQLite and Python): the infinite row sorts first from the highest and passes a lower bound."""
    ids = write_run(tmp_path / "a", n=6, hostile=False, judged=False)
    keys = [key_of(i, "t1" if i % 2 == 0 else "t2", 2 if i % 3 == 0 else 1) for i in range(6)]
    with Store(tmp_path / "a" / "store.sqlite") as store:
        store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, k, ids["alpha"], "", "2"), "ok",
                                        {"acc": 0.5, "psnr": math.inf if i == 3 else 10.0 + i, "ssim": math.nan})
                                  for i, k in enumerate(keys)])
    with serving([tmp_path]) as port:
        status, _, body = get(port, "/samples?run=a&model=alpha&metric=psnr&sort=-score&lo=12")
        nan_status, _, _ = get(port, "/samples?run=a&model=alpha&metric=ssim&sort=score")
    page = body.decode()
    assert status == 200 and nan_status == 200, page[-500:]
    shown = re.findall(r'href="/item\?run=a&amp;key=([^"]+)"', page)
    assert [unquote(k) for k in shown] == [keys[3], keys[5], keys[4], keys[2]]  # inf, 15, 14, 12


def test_the_run_page_sets_the_papers_numbers_beside_the_run(tmp_path):
    """A real vlicl run on a release laid out as published (tests.benchmarks.vlicl.conftest), two
    models matched to VL-ICL Table 19's rows: the run page shows the reports' note, the figure and
    one row per cell (Qwen-VL-Chat's printed 1-shot 17.17 ± 1.43 against the run's 0); a --fast
    run's page says synthetic data is never compared."""
    from icl.run.__main__ import main
    from tests.benchmarks.vlicl.conftest import make_published_release

    release = make_published_release(tmp_path / "release")
    runs = tmp_path / "runs"
    assert main(["vlicl", "--no-progress", "--no-plots", "--data-root", str(release), "--tasks", "textocr",
                 "--prompt-style", "reference", "--out", str(runs / "paper"), "--models",
                 "copy-last:published_as=OpenFlamingo-9B,frequent-answer:published_as=qwen-vl-chat"]) == 0
    assert main(["cobsat", "--fast", "--no-progress", "--no-plots", "--out", str(runs / "smoke")]) == 0
    with serving([runs]) as port:
        status, _, body = get(port, "/run?run=paper")
        smoke = get(port, "/run?run=smoke")[2].decode()
    page = body.decode()
    assert status == 200
    note = re.search(r"<p id=paper-note>(.*?)</p>", page).group(1)
    assert note == "10 cells against the paper: 5 inside your 95% interval, 5 outside, 0 not comparable"
    assert "<figure><svg" in page and page.count("<td class=inside>yes</td>") == 5
    row = re.search(r"<tr><td>textocr</td><td>[^<]*</td><td>1</td><td>frequent-answer\[published_as=qwen-vl-chat\]"
                    r"</td>(.*?)</tr>", page).group(1)
    assert "VL-ICL Table 19, row Qwen-VL-Chat, column 1-Shot" in row and "<td>17.17 ± 1.43</td>" in row
    assert "<td>0 [0, 0]</td><td>-17.17</td><td class=inside>no</td>" in row
    assert re.search(r"<p id=paper-note>Not compared: synthetic data is never compared with the papers.</p>", smoke)
