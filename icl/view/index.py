"""The viewer's own index of one run's store: a SQLite database in ``$ICL_CACHE/view`` that
pages, filters and sorts in SQL with indexes, never touching the run's store except to read it.

One row per stored score (item, model, judge, scorer version) with what the pages filter and
sort on: the item's group (task, dataset, shots: from the run's ``samples.jsonl`` when it has
one), the outcome (ok, failed, overflow), the headline metric's value, the answer (its request
hash for images, the first :data:`TEXT_CHARS` characters of a text answer) and the prompt text
(``requests.jsonl``), plus one row per item and judge with the spread of the headline metric
over the models (the "disagreement" sort). It is brought up to date each time the store's files
change (a live run), reading only the score rows above the highest ``scores`` rowid it has read:
SQLite gives every inserted row (a new score, a score written again, a row a merge copies in
with its shard's older ``created``) a rowid above every row in the table, and the store never
deletes a score; a store whose rowids went back (replaced, or vacuumed) is read again whole.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from icl.data.registry import cache_root
from icl.store.sqlite import Store, StoreError

#: characters of a text answer or prompt kept for display and text search (the item page reads
#: the whole answer from the store, shortened there with a line saying so)
TEXT_CHARS = 2000
#: index layout; a cache of another version is rebuilt
INDEX_VERSION = "9"
PAGE_SIZE = 50
OUTCOMES = ("ok", "failed", "overflow", "not applicable")

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a refresh's rows are those above the last id
    item_key TEXT NOT NULL, model_id TEXT NOT NULL, judge_id TEXT NOT NULL, scorer_version TEXT NOT NULL,
    status TEXT NOT NULL, reason TEXT, error TEXT, outcome TEXT NOT NULL, metrics TEXT NOT NULL,
    score REAL, created REAL NOT NULL, task TEXT, dataset TEXT, shots INTEGER,
    answer_kind TEXT, answer_hash TEXT, answer_text TEXT, prompt TEXT,
    UNIQUE (item_key, model_id, judge_id, scorer_version)
);
CREATE TABLE IF NOT EXISTS items (
    item_key TEXT NOT NULL, judge_id TEXT NOT NULL, spread REAL, PRIMARY KEY (item_key, judge_id)
);
CREATE TABLE IF NOT EXISTS groups (item_key TEXT PRIMARY KEY, task TEXT, dataset TEXT, shots INTEGER, text_hash TEXT);
CREATE TABLE IF NOT EXISTS prompts (text_hash TEXT PRIMARY KEY, text TEXT);
CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(content, tokenize='trigram');
"""
# made after the first bulk load (faster than keeping them up to date row by row)
_INDEXES = """
CREATE INDEX IF NOT EXISTS samples_score ON samples (score);
CREATE INDEX IF NOT EXISTS samples_task ON samples (task, score);
CREATE INDEX IF NOT EXISTS samples_model ON samples (model_id, score);
CREATE INDEX IF NOT EXISTS samples_task_model ON samples (task, model_id, score);
CREATE INDEX IF NOT EXISTS samples_outcome ON samples (outcome, score);
CREATE INDEX IF NOT EXISTS samples_values ON samples (model_id, outcome, item_key, judge_id, score);
CREATE INDEX IF NOT EXISTS items_spread ON items (spread, item_key, judge_id);
"""
#: what text search looks in: the answer, the prompt, the item key
_TEXT = "coalesce(answer_text, '') || ' ' || coalesce(prompt, '') || ' ' || item_key"

# The final answer of a score: the item's highest ``answer:N`` link of that model.
_NEW_SCORES = """
SELECT s.rowid, s.item_key, s.model_id, s.judge_id, s.scorer_version, s.status, s.reason, s.error, s.metrics,
       s.created,
       r.kind, r.request_hash, CASE WHEN r.kind = 'text' THEN substr(CAST(r.body AS BLOB), 1, ?) END
FROM scores s
LEFT JOIN responses r ON r.model_id = s.model_id AND r.request_hash = (
    SELECT l.request_hash FROM links l WHERE l.item_key = s.item_key AND l.model_id = s.model_id
    AND l.step LIKE 'answer:%' ORDER BY CAST(substr(l.step, 8) AS INTEGER) DESC LIMIT 1)
WHERE s.rowid > ? AND +s.benchmark = ? AND (? = '' OR +s.protocol = ?)  -- "+": the rowid range only
"""


def cache_folder() -> Path:
    return cache_root() / "view"


def index_path(store: Path) -> Path:
    """The index of ``store``: named by a digest of its real path (two runs never share one)."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(store))).hexdigest()[:32]
    return cache_folder() / "index" / f"{digest}.sqlite"


def store_signature(store: Path) -> str:
    """Changes whenever a writer commits: the sizes and modification times of the store and its
    write-ahead log."""
    parts = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{store}{suffix}")
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return "|".join(parts)


def text_of(raw: Any, limit: int = TEXT_CHARS) -> str:
    """Text of a stored value for display: bytes decoded as UTF-8 with invalid bytes replaced,
    cut to ``limit`` characters."""
    if raw is None:
        return ""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw).decode("utf-8", "replace")
    text = str(raw)
    return text.encode("utf-8", "replace").decode("utf-8") if len(text) <= limit else \
        text[:limit].encode("utf-8", "replace").decode("utf-8")


def quotable(metric: str) -> bool:
    """Whether ``metric`` can stand in a quoted JSON path (``$."name"``) of SQLite's json_extract."""
    return '"' not in metric and "\x00" not in metric


def outcome_of(status: str, reason: Optional[str], metrics: dict) -> str:
    if reason == "refused":  # the engine stores a refusal as an ok row without metrics: not applicable
        return "not applicable"
    if reason == "overflow" or metrics.get("overflow") == 1:
        return "overflow"
    if status != "ok" or metrics.get("failed") == 1:
        return "failed"
    return "ok"


def headline_of(metrics: dict, preferred: Optional[str]) -> str:
    """The metric the index sorts by: ``preferred`` (results.csv's first) when a score row has it
    (results.csv may name aggregates: ``accuracy`` over VL-ICL's per-item ``correct``), else a
    verdict metric (:data:`icl.report.gallery.VERDICT_METRICS`), else the first by name."""
    from icl.report.gallery import VERDICT_METRICS

    if preferred in metrics:
        return str(preferred)
    return next((m for m in VERDICT_METRICS if m in metrics), sorted(metrics)[0])


def sqlite_json(value: Any) -> str:
    """``value`` (a metrics dict parsed from the store) as JSON that SQLite's JSON functions read:
    Python writes an infinite PSNR as ``Infinity``, which SQLite calls malformed (and fails the
    whole query that filters or sorts by any metric); ``±1e999`` reads back as ±inf in SQLite and
    in Python alike, NaN becomes null."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{sqlite_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(sqlite_json(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "null" if value != value else ("1e999" if value > 0 else "-1e999")
    return json.dumps(value)


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


_path_locks: dict[str, threading.RLock] = {}
_path_locks_lock = threading.Lock()


def _lock_for(path: Path) -> threading.RLock:
    """One lock per index file in this process: two indexes of one store (two viewers' run lists
    in one process) take turns writing it instead of one failing with "database is locked"."""
    with _path_locks_lock:
        return _path_locks.setdefault(str(path), threading.RLock())


class RunIndex:
    """The index of one run folder's store (``folder/store.sqlite``) for ``benchmark``;
    ``headline``: the metric the ``score`` column holds (None: the first metric seen);
    ``protocol``: the run's protocol version, whose rows alone are read (a store may hold a
    benchmark's rows of an earlier protocol too, which a run of this one never reuses; None: all)."""

    def __init__(self, folder: Path, benchmark: str, headline: Optional[str], protocol: Optional[str] = None):
        self.folder = folder
        self.store_path = folder / "store.sqlite"
        self.benchmark = benchmark
        self.protocol = protocol or ""
        self.path = index_path(self.store_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_for(self.path)  # one connection, shared by the server's threads
        self._builder: Optional[threading.Thread] = None
        self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        with self._lock:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=OFF")  # a cache: rebuilt when lost
            have = self._meta("version")
            if have != INDEX_VERSION or self._meta("benchmark") != benchmark or self._meta("protocol") != self.protocol:
                self._drop()
            self.conn.executescript(_TABLES)
            self._memo: dict[Any, Any] = {}  # answers of choices() and counts() until the index changes
            self._seen = self._meta("signature")  # the index's state the memo answers for
            self._set_meta("version", INDEX_VERSION)
            self._set_meta("benchmark", benchmark)
            self._set_meta("protocol", self.protocol)
            self.headline = self._meta("headline") or headline
            self._built = self._meta("since") is not None

    @property
    def built(self) -> bool:
        """Whether the first reading of the store is done (later ones add only new rows); read
        without waiting for a reading going on."""
        return self._built

    def build_in_background(self) -> None:
        """Start the first reading of the store in a thread (a large store takes a while): pages
        that need the index wait for it (:meth:`refresh` takes the same lock), the others do not."""
        if self._builder is None or not self._builder.is_alive():
            self._builder = threading.Thread(target=self.refresh, name=f"index {self.folder.name}", daemon=True)
            self._builder.start()

    @property
    def building(self) -> bool:
        return self._builder is not None and self._builder.is_alive()

    def _drop(self) -> None:
        self.conn.executescript("DROP TABLE IF EXISTS samples; DROP TABLE IF EXISTS items; "
                                "DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS groups; "
                                "DROP TABLE IF EXISTS prompts; DROP TABLE IF EXISTS texts;")

    def _start_over(self) -> None:
        """Forget every row read (the store is not the one read before): the next reading is a
        first one."""
        self._drop()
        self.conn.executescript(_TABLES)
        self._memo.clear()
        self._set_meta("version", INDEX_VERSION)
        self._set_meta("benchmark", self.benchmark)
        self._set_meta("protocol", self.protocol)

    # -- meta ------------------------------------------------------------------------------
    def _meta(self, key: str) -> Optional[str]:
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- bringing it up to date ------------------------------------------------------------
    def refresh(self) -> None:
        """Read what the store gained since the last call (nothing when its files are unchanged)."""
        with self._lock:
            groups_sig = _file_signature(self.folder / "samples.jsonl") + _file_signature(self.folder / "requests.jsonl")
            signature = store_signature(self.store_path) + "|" + groups_sig
            stored = self._meta("signature")
            if stored != self._seen:  # another index of this file (this process) brought it up to date
                self._memo.clear()
                self._seen = stored
            if signature == stored or not self.store_path.is_file():
                return
            try:
                store = Store(self.store_path, timeout=5, readonly=True)
            except StoreError:
                return
            since = int(self._meta("since") or "-1")
            try:
                top = store.read("SELECT COALESCE(MAX(rowid), 0) FROM scores").fetchone()[0]
            except sqlite3.Error:  # a store being created: try again later
                store.close()
                return
            identity = file_identity(self.store_path)
            if since >= 0 and (top < since or identity != self._meta("identity")):
                self._start_over()  # another file now, or its rowids went back: read it whole
                since = -1
            self._memo.clear()
            self.conn.execute("BEGIN")
            try:
                regroup = groups_sig != self._meta("groups")
                if regroup:
                    self._load_groups()
                first = since < 0
                if first:  # a bulk load: the secondary indexes are made after it
                    for name in ("samples_score", "samples_task", "samples_model", "samples_task_model", "samples_outcome",
                                 "samples_values", "items_spread"):
                        self.conn.execute(f"DROP INDEX IF EXISTS {name}")
                before = self.conn.execute("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'samples'), "
                                           "0)").fetchone()[0]
                try:
                    cursor = store.read(_NEW_SCORES, (TEXT_CHARS * 4, since, self.benchmark, self.protocol, self.protocol))
                    newest, changed = since, set[str]()
                    while True:
                        chunk = cursor.fetchmany(5000)
                        if not chunk:
                            break
                        newest = max(newest, self._insert(chunk, changed))
                    newest = max(newest, 0)
                except sqlite3.Error:  # a store of an older schema, or one being created: try again later
                    self.conn.execute("ROLLBACK")
                    return
                finally:
                    store.close()
                # the rows just read take their group and prompt; a new samples.jsonl regroups every row
                where = "" if regroup else f"WHERE samples.rowid > {int(before)}"
                self.conn.execute(f"UPDATE samples SET task = g.task, dataset = g.dataset, shots = g.shots, prompt = "
                                  f"(SELECT p.text FROM prompts p WHERE p.text_hash = g.text_hash) FROM groups g "
                                  f"{where + ' AND' if where else 'WHERE'} g.item_key = samples.item_key")
                if regroup:
                    self.conn.execute("DELETE FROM texts")
                self.conn.execute(f"INSERT INTO texts (rowid, content) SELECT rowid, {_TEXT} FROM samples "
                                  f"{'' if regroup else where}")
                if first or len(changed) > 5000:
                    self.conn.execute("DELETE FROM items")
                    self._spread("")
                else:
                    keys = sorted(changed)
                    for start in range(0, len(keys), 500):
                        part = keys[start:start + 500]
                        self._spread(f"WHERE item_key IN ({','.join('?' * len(part))})", part)
                if first:
                    for statement in filter(str.strip, _INDEXES.split(";")):
                        self.conn.execute(statement)
                self._set_meta("since", str(newest))
                self._set_meta("identity", identity)
                self._set_meta("groups", groups_sig)
                self._set_meta("signature", signature)
                self._seen = signature
                self.conn.execute("COMMIT")
                self._built = True
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    def _insert(self, rows: Sequence[tuple], changed: set[str]) -> int:
        """Insert score rows read from the store (a row scored again replaces its earlier one, whose
        text-search entry goes with it); returns the highest store rowid among them."""
        newest = -1
        batch = []
        for (rowid, key, model, judge, scorer, status, reason, error, metrics_text, created, kind, rhash, text) in rows:
            try:
                metrics = json.loads(metrics_text)
            except ValueError:
                metrics = {}
            if not isinstance(metrics, dict):
                metrics = {}
            if metrics and not self._meta("headline"):  # the first scored row settles the headline metric
                self.headline = headline_of(metrics, self.headline)
                self._set_meta("headline", self.headline)
            batch.append((key, model, judge, scorer, status, reason, text_of(error), outcome_of(status, reason, metrics),
                          sqlite_json(metrics), _number(metrics.get(self.headline)), created, kind, rhash,
                          text_of(text) if kind == "text" else None))
            newest = max(newest, rowid)
            changed.add(key)
        old = self.conn.executemany  # rows scored again: drop them and their text entries first
        replaced = [r[0] for r in (self.conn.execute(
            "SELECT rowid FROM samples WHERE item_key=? AND model_id=? AND judge_id=? AND scorer_version=?", b[:4]
        ).fetchone() for b in batch) if r]
        if replaced:
            old("DELETE FROM texts WHERE rowid = ?", [(r,) for r in replaced])
            old("DELETE FROM samples WHERE rowid = ?", [(r,) for r in replaced])
        old("INSERT INTO samples (item_key, model_id, judge_id, scorer_version, status, reason, error, outcome, "
            "metrics, score, created, answer_kind, answer_hash, answer_text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", batch)
        return newest

    def _spread(self, where: str, args: Sequence[str] = ()) -> None:
        self.conn.execute(f"INSERT OR REPLACE INTO items SELECT item_key, judge_id, "
                          f"CASE WHEN COUNT(score) > 1 THEN MAX(score) - MIN(score) END FROM samples {where} "
                          f"GROUP BY item_key, judge_id", tuple(args))

    def _load_groups(self) -> None:
        """Each item's group (task, dataset, shots) and prompt text, streamed from the run's
        samples.jsonl and requests.jsonl into the index (none: a run still going, or one of over
        100,000 items x models without --log-samples)."""
        self.conn.execute("DELETE FROM groups")
        self.conn.execute("DELETE FROM prompts")
        rows: list[tuple] = []
        for rec in _json_lines(self.folder / "samples.jsonl"):
            key, group, req = rec.get("item"), rec.get("group"), rec.get("request")
            if not isinstance(key, str) or not isinstance(group, dict):
                continue
            text_hash = req.get("text_sha256") if isinstance(req, dict) else None
            rows.append((text_of(key, 10_000), _str(group.get("task")), _str(group.get("dataset") or group.get("variant")),
                         _int(group.get("shots")), text_hash if isinstance(text_hash, str) else None))
            if len(rows) >= 5000:
                self.conn.executemany("INSERT OR IGNORE INTO groups VALUES (?, ?, ?, ?, ?)", rows)
                rows = []
        self.conn.executemany("INSERT OR IGNORE INTO groups VALUES (?, ?, ?, ?, ?)", rows)
        rows = []
        for rec in _json_lines(self.folder / "requests.jsonl"):
            if isinstance(rec.get("text_sha256"), str):
                rows.append((rec["text_sha256"], text_of(rec.get("text"))))
            if len(rows) >= 5000:
                self.conn.executemany("INSERT OR IGNORE INTO prompts VALUES (?, ?)", rows)
                rows = []
        self.conn.executemany("INSERT OR IGNORE INTO prompts VALUES (?, ?)", rows)

    # -- queries ---------------------------------------------------------------------------
    def choices(self) -> dict[str, list]:
        """The values each filter offers: tasks, datasets, shots, models, judges, metrics."""
        with self._lock:
            if "choices" not in self._memo:
                self._memo["choices"] = self._choices()
            return self._memo["choices"]

    def _choices(self) -> dict[str, list]:
        q = self.conn.execute
        first = q("SELECT metrics FROM samples WHERE outcome='ok' AND metrics != '{}' LIMIT 1").fetchone()
        return {
            # from the items' groups (one row per item, narrower than the scores)
            "task": [r[0] for r in q("SELECT DISTINCT task FROM groups WHERE task IS NOT NULL ORDER BY task")],
            "dataset": [r[0] for r in q("SELECT DISTINCT dataset FROM groups WHERE dataset IS NOT NULL "
                                        "ORDER BY dataset")],
            "shots": [r[0] for r in q("SELECT DISTINCT shots FROM groups WHERE shots IS NOT NULL ORDER BY shots")],
            "model": [r[0] for r in q("SELECT DISTINCT model_id FROM samples ORDER BY model_id")],
            "metric": sorted(json.loads(first[0])) if first else [],
        }

    def sample_page(self, filters: dict[str, Any], sort: str, page: int, metric: Optional[str] = None,
                    size: int = PAGE_SIZE) -> tuple[list[dict], int]:
        """One page of score rows matching ``filters`` (task, dataset, shots, model, outcome, lo, hi,
        q) in ``sort`` order (``score``, ``-score``, ``spread``, ``key``, or ``metric`` values),
        and how many rows match."""
        where, args = [], []
        for col in ("task", "dataset"):
            if filters.get(col):
                where.append(f"s.{col} = ?")
                args.append(filters[col])
        if filters.get("shots") is not None:
            where.append("s.shots = ?")
            args.append(filters["shots"])
        if filters.get("model"):
            where.append("s.model_id = ?")
            args.append(filters["model"])
        if filters.get("outcome"):
            where.append("s.outcome = ?")
            args.append(filters["outcome"])
        value = "s.score" if not metric or metric == self.headline else self._metric_column(metric)
        vargs: list = []
        for key, op in (("lo", ">="), ("hi", "<=")):
            if filters.get(key) is not None:
                where.append(f"{value} {op} ?")
                args.extend([*vargs, filters[key]])
        if filters.get("q"):
            q = filters["q"]
            if len(q) >= 3:  # the trigram index finds any substring of 3 characters or more
                where.append("s.rowid IN (SELECT rowid FROM texts WHERE texts MATCH ?)")
                args.append('"' + q.replace('"', '""') + '"')
            else:
                where.append(f"instr(lower({_TEXT.replace('answer_text', 's.answer_text')}), ?) > 0")
                args.append(q.lower())
        if filters.get("outcome") == "not applicable":
            return self._not_applicable(filters, page, size)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        source = "samples s"
        # orders an index can give without reading the rows: ties in the order the scores were
        # stored (s.id); rows without a value come last highest-first and first lowest-first
        if sort == "spread" and not where:
            # walk the items in spread order, looking up each one's rows (SQLite's CROSS JOIN keeps
            # that loop order); with filters the planner's own order (filter, then sort) is faster
            source = "items i CROSS JOIN samples s ON s.item_key = i.item_key AND s.judge_id = i.judge_id"
            order = "i.spread DESC, i.item_key DESC, i.judge_id DESC, s.model_id"
        elif sort == "spread":
            source = "samples s JOIN items i ON i.item_key = s.item_key AND i.judge_id = s.judge_id"
            order = "i.spread DESC, i.item_key DESC, i.judge_id DESC, s.model_id"
        elif sort in ("score", "-score"):
            direction = "DESC" if sort == "-score" else "ASC"
            order = f"{value} {direction}, s.id {direction}"
        else:
            order = "s.item_key, s.model_id, s.judge_id"
        order_args = vargs * 2 if sort in ("score", "-score") else []
        with self._lock:
            return self._page(source, clause, args, order, order_args, size, page)

    def _metric_column(self, metric: str) -> str:
        """The SQL expression of ``metric``'s value, indexed (an expression index made the first
        time a page filters or sorts by it, as thumbnails are: once)."""
        if not quotable(metric):
            return "NULL"
        literal = "'" + f'$."{metric}"'.replace("'", "''") + "'"
        expr = f"json_extract(metrics, {literal})"
        name = "samples_metric_" + hashlib.sha256(metric.encode("utf-8", "replace")).hexdigest()[:16]
        with self._lock:
            if name not in self._memo.setdefault("metric_indexes", set()):
                self.conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON samples ({expr})")
                self._memo["metric_indexes"].add(name)
        return f"json_extract(s.metrics, {literal})"

    def _not_applicable(self, filters: dict[str, Any], page: int, size: int) -> tuple[list[dict], int]:
        """(item, model) pairs of a model that scored no row of an item some model scored, or only a
        refusal: the items that model was not asked (it serves another request type) or refused."""
        where, args = [], []
        for col in ("task", "dataset", "shots"):
            if filters.get(col) is not None and filters.get(col) != "":
                where.append(f"{col} = ?")
                args.append(filters[col])
        if filters.get("q"):
            where.append("(instr(lower(prompt), ?) > 0 OR instr(lower(item_key), ?) > 0)")
            args.extend([filters["q"].lower()] * 2)
        models = [filters["model"]] if filters.get("model") else None
        with self._lock:
            if models is None:
                models = [r[0] for r in self.conn.execute("SELECT DISTINCT model_id FROM samples")]
            inner = (f"SELECT item_key, MIN(task) AS task, MIN(dataset) AS dataset, MIN(shots) AS shots FROM samples "
                     f"GROUP BY item_key")
            sql = (f"FROM ({inner}) i JOIN (SELECT value AS model_id FROM json_each(?)) m "
                   f"WHERE NOT EXISTS (SELECT 1 FROM samples s WHERE s.item_key = i.item_key AND s.model_id = m.model_id "
                   f"AND s.outcome != 'not applicable')"
                   f"{' AND ' + ' AND '.join(where) if where else ''}")
            margs = [json.dumps(models), *args]
            total = self.conn.execute(f"SELECT COUNT(*) {sql}", margs).fetchone()[0]
            rows = self.conn.execute(f"SELECT i.item_key, m.model_id, i.task, i.dataset, i.shots {sql} "
                                     f"ORDER BY i.item_key, m.model_id LIMIT ? OFFSET ?",
                                     (*margs, size, max(0, page) * size)).fetchall()
        out = [dict(item_key=k, model_id=m, judge_id="", status="not applicable", reason=None, error=None,
                    outcome="not applicable", metrics="{}", score=None, task=t, dataset=d, shots=sh,
                    answer_kind=None, answer_hash=None, answer_text=None, spread=None)
               for k, m, t, d, sh in rows]
        return out, total

    def _page(self, source: str, clause: str, args: list, order: str, order_args: list, size: int,
              page: int) -> tuple[list[dict], int]:
        total = self.conn.execute(f"SELECT COUNT(*) FROM samples s {clause}", (*args,)).fetchone()[0]
        cols = ("item_key", "model_id", "judge_id", "status", "reason", "error", "outcome", "metrics", "score",
                "task", "dataset", "shots", "answer_kind", "answer_hash", "answer_text")
        # the page's ids first (from the indexes alone where they cover the filters), then its rows
        ids = [r[0] for r in self.conn.execute(f"SELECT s.id FROM {source} {clause} ORDER BY {order} "
                                               f"LIMIT ? OFFSET ?", (*args, *order_args, size, max(0, page) * size))]
        found = {r[0]: r[1:] for r in self.conn.execute(
            f"SELECT s.id, {', '.join('s.' + c for c in cols)}, i.spread FROM samples s LEFT JOIN items i ON "
            f"i.item_key = s.item_key AND i.judge_id = s.judge_id WHERE s.id IN ({','.join('?' * len(ids))})", ids)}
        return [dict(zip((*cols, "spread"), found[i])) for i in ids if i in found], total

    def item_rows(self, item_key: str) -> list[dict]:
        cols = ("item_key", "model_id", "judge_id", "scorer_version", "status", "reason", "error", "outcome",
                "metrics", "score", "task", "dataset", "shots", "answer_kind", "answer_hash", "prompt")
        with self._lock:
            rows = self.conn.execute(f"SELECT {', '.join(cols)} FROM samples WHERE item_key=? ORDER BY model_id, "
                                     f"judge_id", (item_key,)).fetchall()
        return [dict(zip(cols, r)) for r in rows]

    def values(self, model_id: str, metric: Optional[str]) -> dict[tuple[str, str], Optional[float]]:
        """``{(item key, judge id): value}`` of ``metric`` for ``model_id``'s ok scores: what
        :func:`icl.view.pages.pair_up` pairs. An item scored under several scorer versions counts
        once, with its latest score. A value that is not a finite number is None."""
        if metric and not quotable(metric):  # a name from the query string no JSON path can hold
            return {}
        headline = not metric or metric == self.headline
        with self._lock:
            if headline:  # from the covering index alone
                rows = self.conn.execute("SELECT item_key, judge_id, id, score, NULL FROM samples WHERE model_id=? "
                                         "AND outcome='ok'", (model_id,)).fetchall()
            else:  # metrics SQLite cannot read as JSON (Infinity, NaN) are parsed here instead
                rows = self.conn.execute("SELECT item_key, judge_id, id, CASE WHEN json_valid(metrics) THEN "
                                         "json_extract(metrics, ?) END, CASE WHEN json_valid(metrics) THEN NULL "
                                         "ELSE metrics END FROM samples WHERE model_id=? AND outcome='ok'",
                                         (f'$."{metric}"', model_id)).fetchall()
        out: dict[tuple[str, str], Optional[float]] = {}
        latest: dict[tuple[str, str], int] = {}
        for k, j, rowid, v, text in rows:
            if (k, j) in latest and latest[(k, j)] > rowid:
                continue
            latest[(k, j)] = rowid
            if text is not None:
                v = metric_values([{"metrics": text}], str(metric))[0]
            elif not headline:
                v = _number(v)
            out[(k, j)] = v  # the headline column holds finite numbers or NULL already
        return out

    def remembered(self, key: tuple, make: Callable[[], Any]) -> Any:
        """``make()``, kept until the index changes (a compare page's pairing, asked again)."""
        with self._lock:
            if key not in self._memo:
                self._memo[key] = make()
            return self._memo[key]

    def answer_of(self, item_key: str, model_id: str) -> Optional[tuple[str, str, str]]:
        """(kind, request hash, text) of ``model_id``'s answer to ``item_key``, or None."""
        with self._lock:
            return self.conn.execute("SELECT answer_kind, answer_hash, answer_text FROM samples WHERE item_key=? AND "
                                     "model_id=? LIMIT 1", (item_key, model_id)).fetchone()

    def failures(self) -> list[dict]:
        cols = ("item_key", "model_id", "judge_id", "outcome", "reason", "error")
        with self._lock:
            rows = self.conn.execute(f"SELECT {', '.join(cols)} FROM samples WHERE outcome != 'ok' "
                                     f"ORDER BY error, item_key").fetchall()
        return [dict(zip(cols, r)) for r in rows]

    def counts(self) -> dict[str, dict[str, int]]:
        """``{model id: {outcome: rows}}``."""
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            if "counts" not in self._memo:
                self._memo["counts"] = self.conn.execute("SELECT model_id, outcome, COUNT(*) FROM samples "
                                                         "GROUP BY model_id, outcome").fetchall()
            found = self._memo["counts"]
        for model, outcome, n in found:
            out.setdefault(model, {})[outcome] = n
        return out

    def close(self) -> None:
        self.conn.close()


def _json_lines(path: Path) -> Iterator[dict]:
    """The JSON objects of a JSONL file, one at a time (unreadable lines skipped)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    yield rec
    except OSError:
        return


def file_identity(path: Path) -> str:
    """The file at ``path`` (device and inode): another file put there reads differently."""
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_dev}:{st.st_ino}"


def _file_signature(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def _str(v: Any) -> Optional[str]:
    return None if v is None else text_of(str(v), 500)


def _int(v: Any) -> Optional[int]:
    try:
        return None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError):
        return None


def metric_values(rows: Iterable[dict], metric: str) -> list[Optional[float]]:
    out = []
    for r in rows:
        try:
            out.append(_number(json.loads(r["metrics"]).get(metric)))
        except (ValueError, AttributeError):
            out.append(None)
    return out
