"""The viewer's HTTP server (standard library: ``ThreadingHTTPServer``), its routes and security.

- Binds 127.0.0.1 unless told otherwise; any other address requires a random token, printed
  once in the URL. The first visit with it sets an HttpOnly, SameSite=Strict cookie (as Jupyter
  does) and redirects to the same page without it; a request with neither gets 403.
- Every response carries a strict Content-Security-Policy: nothing but the viewer's own
  stylesheet, script and images, no inline script or style, no frames, no forms to elsewhere.
- Runs are looked up by name among those found (:class:`icl.view.runs.Runs`); images by model
  and request hash in the run's store; the only files read from a run folder by name are its
  gallery and sample PNGs (``gallery/<name>.png``, ``samples/<name>.png``, no links), checked
  to lie inside it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import mimetypes
import os
import re
import secrets
import sys
import threading
import traceback
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional, Sequence
from urllib.parse import parse_qs, urlencode, urlsplit

from icl.store.atomic import write_bytes
from icl.store.sqlite import Store, StoreError
from icl.view import pages
from icl.view.index import RunIndex, cache_folder
from icl.view.requests import Helper
from icl.view.runs import Run, Runs

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
STATIC = Path(__file__).with_name("static")
COOKIE = "icl_view_token"
#: the long side of a thumbnail in pixels
THUMB = 160
#: a stored image larger than this is not decoded for a thumbnail (a page line says so)
MAX_IMAGE_BYTES = 64 << 20
_RUN_FILE = re.compile(r"(gallery|samples)/[A-Za-z0-9_.-]+\.png")


class Viewer:
    """What the handler serves: the runs under ``roots``; ``token`` None on the loopback address."""

    def __init__(self, roots: Sequence[Path], token: Optional[str] = None):
        self.runs = Runs(roots)
        self.token = token
        self.thumbs = cache_folder() / "thumbs"
        self.seen = cache_folder() / "seen"  # the images of rebuilt requests (icl.view.requests)
        self._helpers: dict[str, Helper] = {}
        self._lock = threading.Lock()

    def helper(self, run: Run) -> Helper:
        with self._lock:
            if run.key not in self._helpers:
                self._helpers[run.key] = Helper(run.folder, self.seen)
            return self._helpers[run.key]

    def close(self) -> None:
        """Stop the helper processes."""
        with self._lock:
            for helper in self._helpers.values():
                helper.stop()
            self._helpers.clear()


def make_server(viewer: Viewer, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"viewer": viewer})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def new_token() -> str:
    return secrets.token_urlsafe(32)


class _Handler(BaseHTTPRequestHandler):
    viewer: Viewer
    server_version = "icl-view"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal shows the URL only
        pass

    # -- plumbing ---------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str, extra: Optional[dict] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, text: str, status: int = 200) -> None:
        self._send(status, text.encode("utf-8", "replace"), "text/html; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._html(pages.error_page(status, message), status)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        self._error(405, "the viewer only reads: GET requests only")

    def do_GET(self) -> None:
        try:
            parts = urlsplit(self.path)
            params = {k: v for k, v in parse_qs(parts.query, keep_blank_values=False).items()}
            if not self._authorised(parts.path, params):
                return
            self._route(parts.path, params)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # one page says what failed; the server goes on
            traceback.print_exc(file=sys.stderr)
            try:
                self._error(500, f"this page could not be shown: {type(exc).__name__}: {exc}")
            except OSError:
                pass

    def _authorised(self, path: str, params: dict[str, list[str]]) -> bool:
        token = self.viewer.token
        if token is None:
            # on the loopback address: only requests naming it (another name pointing at
            # 127.0.0.1 is a web page rebinding its DNS to read the runs)
            host = self.headers.get("Host", "")
            name = host[1:host.index("]")] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
            if loopback(name):
                return True
            self._error(403, f"this viewer answers requests to 127.0.0.1 or localhost only, not {host!r}")
            return False
        given = params.get("token", [""])[0]
        if given and hmac.compare_digest(given, token):
            rest = {k: v for k, v in params.items() if k != "token"}
            target = path + ("?" + urlencode(rest, doseq=True) if rest else "")
            self._send(303, b"", "text/plain", {"Location": target, "Set-Cookie":
                                                 f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"})
            return False
        cookie = SimpleCookie()
        try:
            cookie.load(self.headers.get("Cookie", ""))
        except Exception:
            pass
        have = cookie.get(COOKIE)
        if have is not None and hmac.compare_digest(have.value, token):
            return True
        self._error(403, "this viewer needs its token: open the URL it printed when it started")
        return False

    # -- routes -----------------------------------------------------------------------------
    def _route(self, path: str, params: dict[str, list[str]]) -> None:
        one = {k: v[0] for k, v in params.items()}
        runs = self.viewer.runs
        if path == "/":
            return self._html(pages.runs_page(runs.all()))
        if path == "/api/runs":
            body = json.dumps([pages.progress(r) for r in runs.all()]).encode()
            return self._send(200, body, "application/json")
        if path.startswith("/static/"):
            return self._static(path[len("/static/"):])
        if path == "/leaderboard":
            return self._html(pages.leaderboard_page(runs.all(), one))
        if path == "/seen":
            name = one.get("name", "")
            if not re.fullmatch(r"[0-9a-f]{32}\.png", name) or not (self.viewer.seen / name).is_file():
                return self._error(404, "no such image")
            return self._send(200, (self.viewer.seen / name).read_bytes(), "image/png")
        if path in ("/run", "/samples", "/item", "/compare", "/failures", "/img", "/file"):
            run = runs.get(one.get("run", ""))
            if run is None:
                return self._error(404, f"no run {one.get('run', '')!r} under the folders this viewer was given")
            return getattr(self, "_" + path[1:])(run, one, params)
        return self._error(404, f"no page {path!r}")

    def _static(self, name: str) -> None:
        files = {p.name: p for p in STATIC.iterdir()}
        if name not in files:
            return self._error(404, f"no file {name!r}")
        ctype = {"css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8"}[name.rsplit(".", 1)[1]]
        self._send(200, files[name].read_bytes(), ctype)

    def _run(self, run: Run, one: dict, params: dict) -> None:
        self._html(pages.run_page(run))

    def _index(self, run: Run) -> Optional[RunIndex]:
        """The run's index, up to date (None, and a 404 page sent, for a run without a store)."""
        if run.index is None:
            self._error(404, f"run {run.key!r}: {run.problem or 'no store.sqlite to read samples from'}")
            return None
        run.index.refresh()  # waits for a first reading going on in the background
        return run.index

    def _samples(self, run: Run, one: dict, params: dict) -> None:
        ix = self._index(run)
        if ix is None:
            return
        filters: dict[str, Any] = {k: one.get(k) for k in ("task", "dataset", "outcome", "q")}
        try:
            filters["shots"] = int(one["shots"]) if one.get("shots") else None
            filters["lo"] = float(one["lo"]) if one.get("lo") else None
            filters["hi"] = float(one["hi"]) if one.get("hi") else None
            page_no = int(one.get("page") or 0)
        except ValueError as exc:
            return self._error(400, f"bad filter value: {exc}")
        if one.get("model"):
            filters["model"] = run.model_id(one["model"])
        sort = one.get("sort", "")
        metric = one.get("metric") or None
        if sort not in ("score", "-score", "spread", "key", ""):
            metric, sort = sort, "-score"  # a diagnostic's name: highest first
        rows, total = ix.sample_page(filters, sort, page_no, metric)
        self._html(pages.samples_page(run, one, rows, total, page_no))

    def _item(self, run: Run, one: dict, params: dict) -> None:
        ix = self._index(run)
        if ix is None:
            return
        key = one.get("key", "")
        rows = ix.item_rows(key)
        if not rows:
            return self._error(404, f"run {run.key!r} has no scores of item {key!r}")
        answers, verdicts = {}, {}
        try:
            with Store(run.folder / "store.sqlite", timeout=5, readonly=True) as store:
                for model in {r["model_id"] for r in rows}:
                    answers.update({model: a for a in store.final_answers([key], model).values()})
                for r in rows:
                    if r["judge_id"]:
                        verdicts[(r["model_id"], r["judge_id"])] = store.judge_answers(
                            [key], r["model_id"], r["judge_id"]).get(key, [])
        except StoreError:
            pass
        seen = self.viewer.helper(run).ask(key) if run.results else {"error": "the run has no results.json yet"}
        self._html(pages.item_page(run, key, rows, answers, verdicts, _gallery_entry(run, key), seen))

    def _compare(self, run: Run, one: dict, params: dict) -> None:
        ix = self._index(run)
        if ix is None:
            return
        sides: list[tuple[Run, str]] = []
        for spec in params.get("m", []):
            other: Optional[Run] = run
            label = spec
            if "|" in spec:
                other_key, label = spec.split("|", 1)
                other = self.viewer.runs.get(other_key)
                if other is None:
                    return self._error(404, f"compare: no run {other_key!r}")
                if self._index(other) is None:  # its 404 is sent
                    return
            assert other is not None
            sides.append((other, other.model_id(label)))
        metric = one.get("metric") or ix.headline
        rows = [r for r in run.results_rows() if r.get("metric") == metric]
        lower = bool(rows) and rows[0].get("direction") == "lower"
        summary, wins, losses = None, [], []
        if len(sides) >= 2:  # each index reads its model's values (SQL); pair_up pairs them, one run or several
            def pairing() -> tuple:
                return pages.pair_up([s.index.values(m, metric) for s, m in sides], lower)  # type: ignore[union-attr]

            if all(s is run for s, _ in sides):  # one run: kept until its index changes
                summary, wins, losses = ix.remembered(("pairs", tuple(m for _, m in sides), metric, lower), pairing)
            else:
                summary, wins, losses = pairing()
        labels = [run.label(m) for m in ix.choices()["model"]]
        others = [f"{r.key}|{r.label(m)}" for r in self.viewer.runs.all() if r is not run and r.index is not None
                  and r.benchmark == run.benchmark for m in r.index.choices()["model"]]
        choices = {"m": labels + others, "metric": ix.choices()["metric"]}
        self._html(pages.compare_page(run, sides, params.get("m", []), metric, lower, summary, wins, losses, choices))

    def _failures(self, run: Run, one: dict, params: dict) -> None:
        ix = self._index(run)
        if ix is None:
            return
        events = []
        try:
            with Store(run.folder / "store.sqlite", timeout=5, readonly=True) as store:
                events = store.failures()
        except StoreError:
            pass
        self._html(pages.failures_page(run, ix.failures(), events))

    def _img(self, run: Run, one: dict, params: dict) -> None:
        model, rhash = one.get("model", ""), one.get("hash", "")
        if not re.fullmatch(r"[0-9a-f]{8,128}", rhash) or not re.fullmatch(r"[0-9A-Za-z_-]{1,128}", model):
            return self._error(400, "an image is named by a model id and a request hash")
        try:
            with Store(run.folder / "store.sqlite", timeout=5, readonly=True) as store:
                found = store.responses([rhash], model).get(rhash)
        except StoreError as exc:
            return self._error(404, str(exc))
        if found is None or found.kind != "png" or not isinstance(found.body, (bytes, bytearray)):
            return self._error(404, "no stored image answer of that model and request")
        png = bytes(found.body)
        if one.get("full"):
            return self._send(200, png, "image/png")
        return self._send(200, self._thumbnail(png), "image/png")

    def _thumbnail(self, png: bytes) -> bytes:
        """The thumbnail of ``png``, made once and kept in ``$ICL_CACHE/view/thumbs``."""
        digest = hashlib.sha256(png).hexdigest()
        path = self.viewer.thumbs / f"{digest}-{THUMB}.png"
        try:
            return path.read_bytes()
        except OSError:
            pass
        if len(png) > MAX_IMAGE_BYTES:
            return png
        import cv2
        import numpy as np

        from icl.report.gallery import thumbnail

        image = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            return png
        small = thumbnail(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), THUMB)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(path, small, durable=False)  # whole or absent: a unique temporary name, then a rename
        return small

    def _file(self, run: Run, one: dict, params: dict) -> None:
        rel = one.get("path", "")
        if not _RUN_FILE.fullmatch(rel) or ".." in rel:
            return self._error(400, "only a run's gallery/ and samples/ PNGs are served")
        path = run.folder / rel
        real = os.path.realpath(path)
        if os.path.islink(path) or not real.startswith(os.path.realpath(run.folder) + os.sep) or not path.is_file():
            return self._error(404, f"no file {rel!r} in run {run.key!r}")
        self._send(200, path.read_bytes(), mimetypes.guess_type(rel)[0] or "application/octet-stream")


def _gallery_entry(run: Run, key: str) -> Optional[dict]:
    try:
        with open(run.folder / "gallery" / "gallery.json", encoding="utf-8", errors="replace") as f:
            gallery = json.load(f)
    except (OSError, ValueError):
        return None
    for task in gallery.get("tasks", []) if isinstance(gallery, dict) else []:
        for item in task.get("items", []) if isinstance(task, dict) else []:
            if isinstance(item, dict) and item.get("item") == key:
                return item
    return None
