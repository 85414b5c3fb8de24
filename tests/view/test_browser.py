"""``icl view`` in a real headless Chromium (Debian's chromium and chromedriver, driven by
Selenium): clicking through runs, samples, filters, sorting, an item, compare, failures and the
leaderboard on a real ``--fast`` run; deep links; a live run written by ``python -m icl.run`` in
another process; hostile answers staying text. Skipped, saying why, without chromium,
chromedriver or selenium (.ci/run installs them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from icl.view.server import Viewer, make_server
from tests.view._runs import HOSTILE, snapshot, write_run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parents[2]

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (requirements/lock.txt)")
if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
                allow_module_level=True)

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def serve(root: Path):
    server = make_server(Viewer([root]), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A real ``--fast`` vibe run (the viewer's realistic input) beside a toy run with failures
    and hostile answers, served on 127.0.0.1."""
    root = tmp_path_factory.mktemp("runs")
    done = subprocess.run([sys.executable, "-m", "icl.run", "vibe", "--fast", "--out", str(root / "vibe-fast"),
                           "--no-plots", "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    write_run(root / "toy", n=30)
    before = snapshot(root)
    server, base = serve(root)
    yield root, base
    server.shutdown()
    server.server_close()
    assert snapshot(root) == before  # the viewer wrote nothing into the run folders


def go(driver, element):
    """Click ``element`` and wait for the page it opens (a click returns before the navigation)."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 60).until(expected_conditions.staleness_of(page))


def click(driver, text):
    go(driver, driver.find_element(By.LINK_TEXT, text))


def rows(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#samples tbody tr")


def col(driver, n):
    return [r.find_elements(By.TAG_NAME, "td")[n].text for r in rows(driver)]


def value(text):
    return float(text) if text not in ("–", "NaN") else None


def test_thumbnails_loading_late_never_move_the_page(browser, site):
    """Lazy thumbnails had no size until loaded: scrolling to the pager loaded those above it,
    the rows grew, and a click aimed at "next" landed on an item link (CI under load). Every
    thumbnail now holds its box before its image arrives: the pager stays where it was drawn."""
    root, base = site
    browser.get(base + "/samples?run=vibe-fast&sort=spread")
    pager = browser.find_element(By.CSS_SELECTOR, "p.pager")
    thumbs = browser.find_elements(By.CSS_SELECTOR, "img.thumb")
    assert len(thumbs) > 10
    before = browser.execute_script("return arguments[0].getBoundingClientRect().top + window.scrollY", pager)
    sizes = {tuple(browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height]",
                                          t)) for t in thumbs}
    assert sizes == {(96, 96)}, sizes  # loaded or not
    for t in thumbs:  # every lazy image brought into view, so that each loads
        browser.execute_script("arguments[0].scrollIntoView()", t)
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('img.thumb')].every(i => i.complete && i.naturalWidth > 0)"))
    after = browser.execute_script("return arguments[0].getBoundingClientRect().top + window.scrollY", pager)
    assert after == before


def test_click_through_runs_samples_filters_sorting_and_deep_links(browser, site, tmp_path):
    root, base = site
    browser.get(base + "/")
    assert "vibe-fast" in browser.find_element(By.ID, "runs").text and "synthetic" in browser.page_source
    click(browser, "vibe-fast")
    assert "Run vibe-fast" in browser.title and "vibe-1" in browser.page_source
    click(browser, "samples")
    assert "627 rows match" in browser.find_element(By.ID, "count").text
    Select(browser.find_element(By.ID, "f-task")).select_by_visible_text("colorization")
    Select(browser.find_element(By.ID, "f-model")).select_by_visible_text("identity")
    Select(browser.find_element(By.ID, "f-outcome")).select_by_visible_text("ok")
    browser.find_element(By.ID, "f-lo").send_keys("5")
    browser.find_element(By.ID, "f-hi").send_keys("40")
    go(browser, browser.find_element(By.ID, "apply"))
    query = parse_qs(urlsplit(browser.current_url).query)
    assert query["task"] == ["colorization"] and query["model"] == ["identity"] and query["lo"] == ["5"]
    assert rows(browser) and set(col(browser, 1)) == {"colorization"} and set(col(browser, 4)) == {"identity"}
    assert all(5 <= value(v) <= 40 for v in col(browser, 7))
    click(browser, "highest score")
    scores = [value(v) for v in col(browser, 7)]
    assert scores == sorted(scores, reverse=True) and set(col(browser, 1)) == {"colorization"}
    deep = browser.current_url
    shown = col(browser, 0)
    browser.get(base + "/")  # a pasted link reproduces the view
    browser.get(deep)
    assert col(browser, 0) == shown
    # text search and the disagreement sort, then the pager
    browser.get(base + "/samples?run=vibe-fast")
    browser.find_element(By.ID, "f-q").send_keys("rocket-0")
    go(browser, browser.find_element(By.ID, "apply"))
    assert rows(browser) and all("rocket-0" in k for k in col(browser, 0))
    browser.get(base + "/samples?run=vibe-fast")
    click(browser, "models disagree most")
    spreads = [value(v) for v in col(browser, 8)]
    assert spreads == sorted(spreads, reverse=True) and spreads[0] > 0
    click(browser, "next")
    assert "page 2 of" in browser.find_element(By.ID, "count").text
    # an item: the answers as images, full resolution on click
    go(browser, browser.find_elements(By.CSS_SELECTOR, "a.item")[0])
    assert browser.title.startswith("Item ")
    images = browser.find_elements(By.CSS_SELECTOR, "img.answer")
    assert len(images) == 3 and all(browser.execute_script("return arguments[0].naturalWidth", i) > 0 for i in images)
    # what the model saw, rebuilt from the benchmark: one context pair and the query, then the target
    seen = [f.text for f in browser.find_elements(By.CSS_SELECTOR, "#seen figure")]
    assert seen == ["context 1: input", "context 1: output", "query"]
    shown = browser.find_elements(By.CSS_SELECTOR, "#seen img, #target img")
    assert len(shown) == 4 and all(browser.execute_script("return arguments[0].naturalWidth", i) > 0 for i in shown)
    browser.save_screenshot(str(tmp_path / "item.png"))
    go(browser, images[0])
    assert "full=1" in browser.current_url


def test_compare_failures_and_leaderboard(browser, site):
    root, base = site
    browser.get(base + "/run?run=vibe-fast")
    click(browser, "compare models")
    Select(browser.find_element(By.ID, "f-m0")).select_by_visible_text("copy-target")
    Select(browser.find_element(By.ID, "f-m1")).select_by_visible_text("identity")
    go(browser, browser.find_element(By.ID, "apply"))
    summary = browser.find_element(By.ID, "summary").text
    assert "items scored by all" in summary and "copy-target wins" in summary
    assert browser.find_element(By.ID, "wins").text.startswith("Where copy-target wins")
    assert browser.find_element(By.ID, "losses").text.startswith("Where copy-target loses")
    go(browser, browser.find_elements(By.CSS_SELECTOR, "a.item")[0])
    assert browser.title.startswith("Item ")
    browser.get(base + "/run?run=toy")
    click(browser, "failures")
    assert "1 × CUDA out of memory (toy)" in browser.page_source
    go(browser, browser.find_element(By.XPATH, "//section[contains(., 'CUDA out of memory')]//a[@class='item']"))
    assert "CUDA out of memory (toy)" in browser.page_source
    click(browser, "leaderboard")
    click(browser, "vibe (vibe-1)")
    table = browser.find_element(By.ID, "leaderboard").text
    assert "copy-target" in table and "identity" in table and "rank" in table
    # one run: its own rank intervals (ranks.csv ranks copy-target; identity and oracle are references)
    assert "rank: the run's ranks.csv" in table and "not ranked by the run" in table
    assert "overlap of the 95% intervals" not in table
    click(browser, "ssim")
    assert parse_qs(urlsplit(browser.current_url).query)["metric"] == ["ssim"]


def test_hostile_answers_stay_text(browser, site):
    root, base = site
    browser.get(base + "/samples?run=toy&task=t3")
    assert browser.title.startswith("Samples") and "pwned" not in browser.title
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text
    text = browser.find_element(By.ID, "samples").text
    for hostile in HOSTILE:
        assert hostile in text  # shown, as text
    assert not browser.find_elements(By.CSS_SELECTOR, "#samples script, #samples img[src=x]")
    go(browser, browser.find_elements(By.CSS_SELECTOR, "a.item")[0])
    assert "pwned" not in browser.title and "<script>" in browser.find_element(By.TAG_NAME, "main").text


def _sleepy_site(tmp_path: Path) -> Path:
    """An installed distribution whose entry point registers the test model ``sleepy``."""
    site = tmp_path / "site"
    dist = site / "icl_view_test-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-view-test\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nsleepy = tests.reliability._runner_models:Sleepy\n")
    return site


def test_a_live_run_appears_and_advances_without_a_reload(browser, tmp_path, builtin_root):
    root = tmp_path / "runs"
    root.mkdir()
    server, base = serve(root)
    try:
        browser.get(base + "/")
        browser.execute_script("window.notReloaded = true")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(_sleepy_site(tmp_path))]),
               "ICL_TEST_SLEEP": "1.0"}  # a second an item: several polls see it move
        command = [sys.executable, "-m", "icl.run", "vibe", "--fast", "--tasks", "flip", "--datasets", "scenes-a",
                   "--limit", "10", "--models", "sleepy", "--out", str(root / "live"), "--data-root", str(builtin_root),
                   "--no-plots", "--no-progress"]
        # checked first, as docs/runs.md advises: the viewer takes the plan from check.json
        checked = subprocess.run([*command, "--check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert checked.returncode == 0, checked.stderr[-2000:]
        planned = json.loads((root / "live" / "check.json").read_text())["plan"]["planned"]
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        try:
            row = 'tr[data-run="live"]'
            wait = WebDriverWait(browser, 120, poll_frequency=0.1)
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, row + " .status")
                       and d.find_element(By.CSS_SELECTOR, row + " .status").text == "running")
            seen, texts = set(), []

            def advanced(d):
                text = d.find_element(By.CSS_SELECTOR, row + " .ptext").text
                texts.append(text)
                if not text.startswith(("0/", "0 ")):
                    seen.add(text.split(" ")[0])
                return len(seen) >= 2

            wait.until(advanced)  # two different counts of scores while it runs
            cells = [c.text for c in browser.find_elements(By.CSS_SELECTOR, row + " td")]
            assert cells[1:3] == ["vibe", "vibe-1"] and cells[4] == "synthetic (built-in)"  # the row added live
            assert browser.find_element(By.CSS_SELECTOR, row + " .status").text == "running"
            assert all(t.split(" ")[0].endswith(f"/{planned}") for t in texts if t), texts  # done/planned
            assert any(re.fullmatch(rf"\d+/{planned} · [\d.]+/s · ETA \d+m\d\ds", t) for t in texts), texts
            assert proc.wait(timeout=180) == 0, proc.stderr.read()[-2000:]
            wait.until(lambda d: d.find_element(By.CSS_SELECTOR, row + " .status").text == "finished")
            assert json.loads((root / "live" / "results.json").read_text())["counts"]["planned"] == planned
            assert browser.find_element(By.CSS_SELECTOR, row + " .ptext").text.startswith(f"{planned}/{planned}")
            assert browser.execute_script("return window.notReloaded") is True
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        server.shutdown()
        server.server_close()
