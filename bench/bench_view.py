"""``icl view`` on a large run: a store of 100,000 items x 2 models (200,000 scores) with image
answers (64 x 64 PNGs, one per item), written through the store's API in a temporary folder
(generation takes a minute or two; a benchmark, not a test), with the run's samples.jsonl.

Timed through a real ``python -m icl.run view`` process over HTTP on 127.0.0.1 (median of 5
unless said):

- the first open of the run page (the viewer's index of the store is then built in the
  background, once per store, in ``$ICL_CACHE/view``: its time is reported), then the run page
  opened again: < 1 s;
- a page of 50 samples: unfiltered, filtered (task + model + score range), text search, sorted by
  disagreement; thumbnails made once (the first request of a page makes them, later ones read
  them): < 200 ms;
- the server's resident memory after all of it (VmRSS, and its peak VmHWM): < 300 MB.

And a live run's poll (:func:`poll_cost`, in this process): ``/api/runs`` of a store of 20,000
scores, after the writer stored 10 more (the viewer reads only what is new): < 10 ms.

The same operations on ``report.html`` (the static page ``icl.report.html.report_html`` writes for
this run): its size, the time to write it and to open it in headless Chromium (when installed); it
holds no per-item rows to page or filter (samples.jsonl counts only), which the output says.

    .venv/bin/python -m pytest -q -s bench/bench_view.py     # or: python bench/bench_view.py [ITEMS]
    .venv/bin/python bench/bench_view.py 0                   # the live poll only
"""

from __future__ import annotations

import csv
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.view._runs import BENCHMARK, write_run  # noqa: E402

ITEMS = 100_000
FLOORS = {"run page (s)": 1.0, "50 samples (s)": 0.2, "RSS (MB)": 300, "poll (ms)": 10.0}


def _get(port: int, path: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200, (path, body[:300])
    return time.perf_counter() - t, body


def _median(port: int, path: str, n: int = 5) -> float:
    return statistics.median(_get(port, path)[0] for _ in range(n))


def _memory(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024
    return rss, hwm


def _chromium_load_s(url: str) -> float | None:
    chromium, driver = shutil.which("chromium") or "/usr/bin/chromium", shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.path.exists(chromium) and os.path.exists(driver)):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    d = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        times = []
        for _ in range(3):
            d.get(url)
            times.append(d.execute_script("const t = performance.timing; return t.loadEventEnd - t.navigationStart;"))
        return statistics.median(times) / 1000
    finally:
        d.quit()


def measure(items: int = ITEMS) -> dict[str, float | str]:
    out: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory(prefix="icl-bench-view-") as tmp:
        runs, cache = Path(tmp) / "runs", Path(tmp) / "cache"
        t = time.perf_counter()
        write_run(runs / "big", n=items, hostile=False, image_size=64, judged=False, batch=20_000)
        out["generate (s)"] = time.perf_counter() - t
        out["store (MB)"] = (runs / "big" / "store.sqlite").stat().st_size / 2**20
        proc = subprocess.Popen([sys.executable, "-m", "icl.run", "view", str(runs), "--port", "0"], cwd=ROOT,
                                stdout=subprocess.PIPE, text=True, env={**os.environ, "ICL_CACHE": str(cache)})
        try:
            port = int(re.search(r":(\d+)/", proc.stdout.readline()).group(1))
            t = time.perf_counter()
            out["run page, first open (index building in the background) (s)"] = _get(port, "/run?run=big")[0]
            _get(port, "/samples?run=big")  # waits for the index
            out["index build, once per store (s)"] = time.perf_counter() - t
            out["run page (s)"] = _median(port, "/run?run=big")
            out["runs page (s)"] = _median(port, "/")
            page = f"/samples?run=big&page={items // 50 + 7}"  # mid-table, past the failed item
            out["50 samples, first request (s)"] = _get(port, page)[0]
            images = re.findall(r'src="(/img\?[^"]+)"', _get(port, page)[1].decode())
            assert len(images) == 50, len(images)
            t = time.perf_counter()
            for src in images:
                _get(port, src.replace("&amp;", "&"))
            out["its 50 thumbnails, made (s)"] = time.perf_counter() - t
            t = time.perf_counter()
            for src in images:
                _get(port, src.replace("&amp;", "&"))
            out["its 50 thumbnails, again (s)"] = time.perf_counter() - t
            out["50 samples (s)"] = _median(port, page)
            filtered = "/samples?run=big&task=t2&model=beta&lo=0.25&hi=0.75&sort=-score&page=20"
            out["50 samples, task+model+score range, sorted (s)"] = _median(port, filtered)
            out["50 samples, text search (s)"] = _median(port, "/samples?run=big&q=item%2099999%3A")
            out["50 samples, sorted by disagreement (s)"] = _median(port, "/samples?run=big&sort=spread&page=100")
            by_metric = "/samples?run=big&sort=copy_ssim&page=3"
            out["50 samples, another metric sorted, first: its index made (s)"] = _get(port, by_metric)[0]
            out["50 samples, another metric sorted (s)"] = _median(port, by_metric)
            out["compare 2 models, first: 100,000 pairs joined (s)"] = _get(port, "/compare?run=big&m=alpha&m=beta")[0]
            out["compare 2 models, again (s)"] = _median(port, "/compare?run=big&m=alpha&m=beta", 3)
            out["failures page (s)"] = _median(port, "/failures?run=big")
            out["leaderboard (s)"] = _median(port, "/leaderboard")
            out["RSS (MB)"], out["peak RSS (MB)"] = _memory(proc.pid)
            load = _chromium_load_s(f"http://127.0.0.1:{port}{page}")
            if load is not None:
                out["50 samples page in Chromium, load event (s)"] = load
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        from icl.report.html import report_html

        results = json.loads((runs / "big" / "results.json").read_text())
        with open(runs / "big" / "results.csv", newline="") as f:
            table = list(csv.DictReader(f))
        t = time.perf_counter()
        text = report_html(BENCHMARK, {"results": table}, results, [], [], runs / "big")
        report = Path(tmp) / "report.html"
        report.write_text(text, encoding="utf-8")
        out["report.html: write (s)"] = time.perf_counter() - t
        out["report.html: size (KB)"] = report.stat().st_size / 1024
        load = _chromium_load_s(report.as_uri())
        if load is not None:
            out["report.html: open in Chromium, load event (s)"] = load
        out["report.html: a page of 50 samples, filters"] = "not possible: it holds no per-item rows"
    return out


def poll_cost(items: int = 10_000, polls: int = 40, batch: int = 10) -> dict[str, float | str]:
    """What one poll of ``/api/runs`` (the runs page asks every second) costs on a live run's store
    of ``2 * items`` scores: the median over ``polls`` polls, each after the writer stored ``batch``
    more scores (the store changed: the viewer reads it), and over polls of a store that did not
    change. Written through the store's API; the first scores with the store's clock an hour back
    (a run that has been going for a while: the last minute holds only the live writes)."""
    import icl.store.sqlite as store_module
    from icl.store.sqlite import Score, ScoreKey, Store
    from icl.view.server import Viewer, make_server
    from tests.view._runs import PROTOCOL, SCORER
    import threading

    out: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory(prefix="icl-bench-poll-") as tmp:
        runs = Path(tmp) / "runs"
        clock = store_module.time.time
        store_module.time.time = lambda: clock() - 3600  # type: ignore[assignment]
        try:
            ids = write_run(runs / "live", n=items, hostile=False, judged=False, samples=False)
        finally:
            store_module.time.time = clock  # type: ignore[assignment]
        viewer = Viewer([runs])
        server = make_server(viewer, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        try:
            body = json.loads(_get(port, "/api/runs")[1])
            while viewer.runs.get("live").index.building:  # the first reading of the store, once
                time.sleep(0.05)
            _get(port, "/api/runs")
            out["scores in the store"] = float(body[0]["done"])  # ok and failed
            out["poll, store unchanged (ms)"] = 1000 * statistics.median(_get(port, "/api/runs")[0] for _ in range(polls))
            live, model = [], ids[next(iter(ids))]
            with Store(runs / "live" / "store.sqlite") as store:
                for p in range(polls):
                    store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, f"live/{p}/{j}", model, "", SCORER),
                                                    "ok", {"acc": 0.5}) for j in range(batch)])
                    live.append(_get(port, "/api/runs")[0])
            out[f"poll, {batch} scores stored since the last (ms)"] = 1000 * statistics.median(live)
            done = json.loads(_get(port, "/api/runs")[1])[0]["done"]
            assert done == body[0]["done"] + polls * batch, (done, body[0]["done"])
        finally:
            server.shutdown()
            server.server_close()
    return out


@pytest.mark.slow
def test_polling_a_live_run_is_cheap() -> None:
    figures = poll_cost()
    for name, value in figures.items():
        print(f"{name:<55} {value if isinstance(value, str) else f'{value:.3f}'}")
    assert figures["poll, 10 scores stored since the last (ms)"] < FLOORS["poll (ms)"]


@pytest.mark.slow
def test_view_on_100k_items() -> None:
    figures = measure()
    for name, value in figures.items():
        print(f"{name:<55} {value if isinstance(value, str) else f'{value:.3f}'}")
    assert figures["run page (s)"] < FLOORS["run page (s)"]
    assert figures["run page, first open (index building in the background) (s)"] < FLOORS["run page (s)"]
    for name, value in figures.items():
        if name.startswith("50 samples") and "Chromium" not in name and "first" not in name:
            assert value < FLOORS["50 samples (s)"], name
    assert figures["RSS (MB)"] < FLOORS["RSS (MB)"]


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else ITEMS
    figures = poll_cost() if n == 0 else measure(n)  # 0: the live poll only
    for name, value in figures.items():
        print(f"{name:<55} {value if isinstance(value, str) else f'{value:.3f}'}")
