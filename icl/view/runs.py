"""Finding run folders under the folders named, and what each one is: benchmark, protocol,
models, data origin, status (running with progress, finished, interrupted, failures), provenance.

A run folder is one holding ``store.sqlite`` or ``results.json``; its sub-folders are not searched
further. A run is addressed in URLs by its path relative to the folder named (prefixed by that
folder's position when several are named), and looked up in :meth:`Runs.get`: no URL ever becomes
a path by itself, so nothing outside the folders named can be reached.
"""

from __future__ import annotations

import csv
import json
import math
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from icl.store.sqlite import Store, StoreError
from icl.view.index import RunIndex, file_identity, store_signature

#: folders a run writes inside itself, never runs of their own
_SKIP = {"samples", "plots", "gallery", "qualitative", "__pycache__"}
#: seconds between two searches of the folders for new runs
RESCAN_S = 1.0


@dataclass
class ScoreTally:
    """A store's score counts per status (of one benchmark) and the scores of the last minute,
    kept up to date from the rows above the highest ``scores`` rowid counted: a live run's poll
    reads its new rows only. SQLite gives every inserted row a rowid above all others; when the
    table lost a row counted (a score written again replaces its row) or the file is another,
    everything is counted again."""

    identity: str = ""
    top: int = -1  # the highest rowid counted
    rows: int = 0  # rows of the table (every benchmark) then
    counts: dict[str, int] = field(default_factory=dict)
    floor: int = 0  # no row below this rowid was created after ``cutoff``
    cutoff: float = -math.inf

    def update(self, store: Store, benchmark: str, identity: str) -> None:
        # one statement: one snapshot of the table, however the writer goes on
        top, rows, new, added = store.read(
            "SELECT (SELECT COALESCE(MAX(rowid), 0) FROM scores), (SELECT COUNT(*) FROM scores), "
            "(SELECT COUNT(*) FROM scores WHERE rowid > ?1), (SELECT json_group_object(status, n) FROM "
            "(SELECT status, COUNT(*) AS n FROM scores WHERE rowid > ?1 AND +benchmark = ?2 GROUP BY status))",
            (max(self.top, 0), benchmark)).fetchone()
        if identity == self.identity and self.top >= 0 and top >= self.top and rows == self.rows + new:
            for status, n in json.loads(added).items():
                self.counts[status] = self.counts.get(status, 0) + n
        else:
            top, rows, found = store.read(
                "SELECT (SELECT COALESCE(MAX(rowid), 0) FROM scores), (SELECT COUNT(*) FROM scores), "
                "(SELECT json_group_object(status, n) FROM (SELECT status, COUNT(*) AS n FROM scores "
                "WHERE benchmark = ? GROUP BY status))", (benchmark,)).fetchone()
            self.counts = json.loads(found)
            self.floor, self.cutoff = 0, -math.inf
        self.identity, self.top, self.rows = identity, top, rows

    def recent(self, store: Store, cutoff: float) -> int:
        """Scores created after ``cutoff`` (wall-clock seconds; never earlier than the last
        call's but for a clock set back): a range of the newest rowids."""
        if cutoff < self.cutoff:
            self.floor = 0
        first, n = store.read("SELECT MIN(rowid), COUNT(*) FROM scores WHERE rowid >= ? AND created > ?",
                              (self.floor, cutoff)).fetchone()
        self.floor, self.cutoff = (first if first is not None else self.top + 1), cutoff
        return n


@dataclass
class Run:
    key: str
    folder: Path
    results: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)  # the store's latest run record (config, protocol)
    status: str = "unknown"
    done: int = 0
    failed: int = 0
    planned: Optional[int] = None
    rate: Optional[float] = None  # scores per second over the last minute of a live run
    models: dict[str, str] = field(default_factory=dict)  # model_id -> label
    index: Optional[RunIndex] = None
    signature: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)  # one refresh at a time
    tally: ScoreTally = field(default_factory=ScoreTally)
    problem: str = ""  # why its store cannot be read, if it cannot

    @property
    def benchmark(self) -> str:
        return str(self.results.get("benchmark") or self.info.get("config", {}).get("benchmark") or "?")

    @property
    def protocol(self) -> str:
        return str(self.results.get("protocol") or self.info.get("protocol") or "?")

    @property
    def synthetic(self) -> bool:
        from icl.report.reproduction import synthetic_origin  # the reports' one test of it

        data = self.results.get("data") or {}
        if data:
            return any(synthetic_origin(v) for v in data.values())
        return bool(self.info.get("config", {}).get("fast"))  # a live run, no results.json yet: --fast's own data

    @property
    def eta_s(self) -> Optional[float]:
        if self.status != "running" or not self.rate or self.planned is None:
            return None
        return max(0.0, self.planned - self.done - self.failed) / self.rate

    def label(self, model_id: str) -> str:
        return self.models.get(model_id, model_id)

    def model_id(self, label_or_id: str) -> str:
        for mid, label in self.models.items():
            if label == label_or_id:
                return mid
        return label_or_id

    def results_rows(self) -> list[dict]:
        """results.csv's rows (the long table: benchmark, protocol, task, subset, shots, model, metric,
        value, ci_low, ci_high, n, ...)."""
        return _csv_rows(self.folder / "results.csv")

    def reproduction_rows(self) -> list[dict]:
        """reproduction.csv's rows: per cell the paper's value beside the run's
        (:data:`icl.report.reproduction.COLUMNS`); none for synthetic data or unmatched models."""
        return _csv_rows(self.folder / "reproduction.csv")

    def rank_intervals(self, metric: str) -> dict[tuple[str, str, str], tuple[float, float]]:
        """The run's own 95% bootstrap rank intervals of ``metric`` from its ranks.csv (the long
        form of :func:`icl.report.tables.rank_rows`: shots, model, task, metric, rank_low,
        rank_high): ``{(shots, task, model): (low, high)}``, finite ones only; empty for a run
        without one or with another layout (VL-ICL's ranks its summary metrics, not results.csv's)."""
        out = {}
        for row in _csv_rows(self.folder / "ranks.csv"):
            if row.get("metric") != metric or row.get("task") in (None, "*"):
                continue
            try:
                lo, hi = float(row["rank_low"]), float(row["rank_high"])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(lo) and math.isfinite(hi):
                out[(shots_text(row.get("shots")), str(row["task"]), str(row.get("model")))] = (lo, hi)
        return out


def shots_text(value: Any) -> str:
    """A shot count as results.csv and ranks.csv both write it ("1", "1.0" alike)."""
    try:
        return str(int(float(value)))
    except (TypeError, ValueError):
        return str(value or "")


def _csv_rows(path: Path) -> list[dict]:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            return list(csv.DictReader(f))
    except (OSError, csv.Error):
        return []


class Runs:
    """The runs under ``roots``, found again at most every :data:`RESCAN_S` seconds."""

    def __init__(self, roots: Sequence[Path]):
        self.roots = [Path(r) for r in roots]
        self._runs: dict[str, Run] = {}
        self._scanned = 0.0
        self._lock = threading.Lock()

    def all(self) -> list[Run]:
        with self._lock:
            if time.monotonic() - self._scanned > RESCAN_S:
                self._scan()
                self._scanned = time.monotonic()
            runs = list(self._runs.values())
        for run in runs:
            refresh(run)
        return sorted(runs, key=lambda r: r.key)

    def get(self, key: str) -> Optional[Run]:
        """The run called ``key`` (refreshed), or None: never a path built from ``key``."""
        with self._lock:
            run = self._runs.get(key)
            if run is None and time.monotonic() - self._scanned > 0.2:
                self._scan()
                self._scanned = time.monotonic()
                run = self._runs.get(key)
        if run is not None:
            refresh(run)
        return run

    def _scan(self) -> None:
        found: dict[str, Path] = {}
        for n, root in enumerate(self.roots):
            prefix = f"{n}/" if len(self.roots) > 1 else ""
            for folder in _run_folders(root):
                rel = folder.relative_to(root).as_posix()
                found[prefix + ("." if rel == "." else rel)] = folder
        for key in list(self._runs):
            if key not in found:
                run = self._runs.pop(key)
                if run.index is not None:
                    run.index.close()
        for key, folder in found.items():
            if key not in self._runs:
                self._runs[key] = Run(key, folder)


def _run_folders(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if "store.sqlite" in filenames or "results.json" in filenames:
            out.append(Path(dirpath))
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP)
    return out


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def lock_holder(folder: Path) -> Optional[dict]:
    """What the process holding the run's folder lock recorded in ``.icl.lock`` (pid, command,
    host), or None when none holds it. The lock is never taken: on Linux ``/proc/locks`` lists the
    flock held on the file's inode; elsewhere the recorded pid being alive stands for it."""
    path = folder / ".icl.lock"
    try:
        st = path.stat()
    except OSError:
        return None
    info = _read_json(path)
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            table = f.read()
    except OSError:
        table = None
    if table is not None:
        device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        held = any(len(p) > 5 and p[1] == "FLOCK" and p[5] == device for p in (line.split() for line in
                                                                              table.splitlines()))
        return (info or {"pid": None}) if held else None
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    if info.get("host") not in (None, socket.gethostname()):
        return info  # another machine's process: cannot be checked from here, taken as live
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return info


def checked_plan(folder: Path, command: Any) -> Optional[int]:
    """The scores planned by ``command`` as its ``--check`` counted them in ``folder/check.json``
    (None without one, or when it checked another command)."""
    check = _read_json(folder / "check.json")
    plan = check.get("plan")
    if not isinstance(command, list) or not isinstance(plan, dict) or not isinstance(plan.get("planned"), int):
        return None
    checked, i = [], 0
    given = check.get("command") or []
    while i < len(given):  # the checked command less the check's own flags
        arg = str(given[i])
        if arg == "--calibrate":
            i += 2
            continue
        if arg != "--check" and not arg.startswith("--calibrate="):
            checked.append(arg)
        i += 1
    return plan["planned"] if checked == [str(a) for a in command] else None


def refresh(run: Run) -> None:
    """Bring ``run`` up to date: its files and store are read again only when they changed."""
    with run.lock:
        _refresh(run)


def _refresh(run: Run) -> None:
    store = run.folder / "store.sqlite"
    results_path = run.folder / "results.json"
    holder = lock_holder(run.folder)
    signature = store_signature(store) + "|" + _stat(results_path) + "|" + str(bool(holder))
    if signature == run.signature:
        return
    run.signature = signature
    run.results = _read_json(results_path)
    last_run_id = None
    if store.is_file():
        try:
            with Store(store, timeout=5, readonly=True) as s:
                row = s.read("SELECT run_id, info, started FROM runs ORDER BY started DESC LIMIT 1").fetchone()
                started = float(row[2]) if row else None
                if row:
                    last_run_id = row[0]
                    try:
                        run.info = json.loads(row[1])
                    except ValueError:
                        run.info = {}
                run.models = {m: label for m, label, _ in s.read("SELECT model_id, label, identity FROM models")}
                run.tally.update(s, run.benchmark, file_identity(store))
                run.done, run.failed = int(run.tally.counts.get("ok", 0)), int(run.tally.counts.get("failed", 0))
                # the rate over the last minute up to now (or since the run started, when later)
                now = time.time()
                window = min(60.0, now - started) if started else 60.0
                recent = run.tally.recent(s, now - window)
                run.rate = recent / window if recent and window >= 1 else None
            run.problem = ""
        except (StoreError, OSError, sqlite3.Error) as exc:  # a store being created, or not a store
            run.problem = f"store.sqlite cannot be read: {exc}"
    planned = (run.results.get("counts") or {}).get("planned")
    run.planned = planned if isinstance(planned, int) else None
    finished_id = run.results.get("run_id")
    if holder is not None:
        run.status = "running"
        if finished_id != last_run_id and run.results.get("config", {}) != run.info.get("config"):
            # the plan of the run going on: what it recorded when it started (icl.run.runner), else
            # its --check's, when it checked this very command first (a store of an older icl)
            started_plan = run.info.get("planned")
            run.planned = started_plan if isinstance(started_plan, int) and not isinstance(started_plan, bool) \
                else checked_plan(run.folder, holder.get("command"))
    elif (run.folder / "INCOMPLETE").exists() or (last_run_id is not None and finished_id != last_run_id):
        run.status = "interrupted"
    elif run.problem and not run.results:
        run.status = "unreadable"
    elif run.results:
        run.status = "finished with failures" if run.failed or (run.results.get("failures") or {}).get("count") \
            else "finished"
    else:
        run.status = "unknown"
    for label, entry in (run.results.get("models") or {}).items():
        if isinstance(entry, dict) and entry.get("model_id"):
            run.models.setdefault(entry["model_id"], label)
    for entry in run.results.get("judges") or []:
        if isinstance(entry, dict) and entry.get("judge_id"):
            run.models.setdefault(entry["judge_id"], str(entry.get("label")))
    if store.is_file() and run.benchmark != "?":
        protocol = run.protocol if run.protocol != "?" else None
        if run.index is None or run.index.protocol != (protocol or ""):  # a new run of another protocol
            run.index = RunIndex(run.folder, run.benchmark, headline_metric(run), protocol)
        if run.index.built:
            run.index.refresh()  # what a live run added since: quick
        else:
            run.index.build_in_background()


def headline_metric(run: Run) -> Optional[str]:
    rows = run.results_rows()
    return rows[0].get("metric") if rows else None


def _stat(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def comparable_key(run: Run) -> tuple[str, str, str]:
    """Runs with equal keys go in one leaderboard table: benchmark, protocol and data fingerprints."""
    fp = run.results.get("fingerprints") or {}
    return run.benchmark, run.protocol, json.dumps(fp, sort_keys=True)


def fingerprint_difference(a: Run, b: Run) -> str:
    """Why run ``b`` is not comparable with ``a`` (one line)."""
    if a.protocol != b.protocol:
        return f"protocol {b.protocol} (the table's: {a.protocol})"
    fa, fb = a.results.get("fingerprints") or {}, b.results.get("fingerprints") or {}
    for name in sorted(set(fa) | set(fb)):
        if fa.get(name) != fb.get(name):
            return f"data fingerprint {name}: {fb.get(name, 'absent')} (the table's: {fa.get(name, 'absent')})"
    return "no results.json yet"
