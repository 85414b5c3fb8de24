"""The viewer's own index of one run's store: a SQLite database in ``$ICL_CACHE/view`` that
pages, filters and sorts in SQL with indexes, never touching the run's store except to read it.

One row per stored score (item, model, judge, scorer version) with what the pages filter and
sort on: the item's group (task, dataset, shots: from the run's ``samples.jsonl`` when it has
one), the outcome (ok, failed, overflow), the headline metric's value, the answer (its request
hash for images, the first :data:`TEXT_CHARS` characters of a text answer) and the prompt text
(``requests.jsonl``), plus one row per item and judge with the spread of the headline metric
over the models (the "disagreement" sort). It is brought up to date from the store's
``scores.created`` each time the store's files change (a live run), so only new rows are read.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from icl.data.registry import cache_root
from icl.store.sqlite import Store, StoreError

#: characters of a text answer or prompt kept for display and text search (the item page reads
#: the whole answer from the store, shortened there with a line saying so)
TEXT_CHARS = 2000
#: index layout; a cache of another version is rebuilt
INDEX_VERSION = "3"
PAGE_SIZE = 50
OUTCOMES = ("ok", "failed", "overflow", "not applicable")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    item_key TEXT NOT NULL, model_id TEXT NOT NULL, judge_id TEXT NOT NULL, scorer_version TEXT NOT NULL,
    status TEXT NOT NULL, reason TEXT, error TEXT, outcome TEXT NOT NULL, metrics TEXT NOT NULL,
    score REAL, created REAL NOT NULL, task TEXT, dataset TEXT, shots INTEGER,
    answer_kind TEXT, answer_hash TEXT, answer_text TEXT, prompt TEXT,
    PRIMARY KEY (item_key, model_id, judge_id, scorer_version)
);
CREATE INDEX IF NOT EXISTS samples_score ON samples (score);
CREATE INDEX IF NOT EXISTS samples_task ON samples (task, score);
CREATE INDEX IF NOT EXISTS samples_model ON samples (model_id, score);
CREATE INDEX IF NOT EXISTS samples_outcome ON samples (outcome, score);
CREATE TABLE IF NOT EXISTS items (
    item_key TEXT NOT NULL, judge_id TEXT NOT NULL, spread REAL, PRIMARY KEY (item_key, judge_id)
);
CREATE INDEX IF NOT EXISTS items_spread ON items (spread);
"""

# The final answer of a score: the item's highest ``answer:N`` link of that model.
_NEW_SCORES = """
SELECT s.item_key, s.model_id, s.judge_id, s.scorer_version, s.status, s.reason, s.error, s.metrics, s.created,
       r.kind, r.request_hash, CASE WHEN r.kind = 'text' THEN substr(CAST(r.body AS BLOB), 1, ?) END
FROM scores s
LEFT JOIN responses r ON r.model_id = s.model_id AND r.request_hash = (
    SELECT l.request_hash FROM links l WHERE l.item_key = s.item_key AND l.model_id = s.model_id
    AND l.step LIKE 'answer:%' ORDER BY CAST(substr(l.step, 8) AS INTEGER) DESC LIMIT 1)
WHERE s.created > ? AND s.benchmark = ?
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


def outcome_of(status: str, reason: Optional[str], metrics: dict) -> str:
    if reason == "overflow" or metrics.get("overflow") == 1:
        return "overflow"
    if status != "ok" or metrics.get("failed") == 1:
        return "failed"
    return "ok"


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


class RunIndex:
    """The index of one run folder's store (``folder/store.sqlite``) for ``benchmark``;
    ``headline``: the metric the ``score`` column holds (None: the first metric seen)."""

    def __init__(self, folder: Path, benchmark: str, headline: Optional[str]):
        self.folder = folder
        self.store_path = folder / "store.sqlite"
        self.benchmark = benchmark
        self.path = index_path(self.store_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()  # one connection, shared by the server's threads
        self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=OFF")  # a cache: rebuilt when lost
        have = self._meta("version")
        if have != INDEX_VERSION or self._meta("benchmark") != benchmark:
            self.conn.executescript("DROP TABLE IF EXISTS samples; DROP TABLE IF EXISTS items; "
                                    "DROP TABLE IF EXISTS meta;")
        self.conn.executescript(_SCHEMA)
        self._set_meta("version", INDEX_VERSION)
        self._set_meta("benchmark", benchmark)
        self.headline = self._meta("headline") or headline

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
            signature = store_signature(self.store_path) + "|" + _file_signature(self.folder / "samples.jsonl")
            if signature == self._meta("signature") or not self.store_path.is_file():
                return
            groups_sig = _file_signature(self.folder / "samples.jsonl")
            regroup = groups_sig != self._meta("groups")
            since = float(self._meta("since") or "-1")
            groups, prompts = (self._groups() if regroup else ({}, {}))
            try:
                store = Store(self.store_path, timeout=5, readonly=True)
            except StoreError:
                return
            try:
                rows = store.read(_NEW_SCORES, (TEXT_CHARS * 4, since, self.benchmark)).fetchall()
            except sqlite3.Error:  # a store of an older schema, or one being created: try again later
                return
            finally:
                store.close()
            self.conn.execute("BEGIN")
            try:
                newest = since
                batch = []
                for (key, model, judge, scorer, status, reason, error, metrics_text, created, kind, rhash,
                     text) in rows:
                    try:
                        metrics = json.loads(metrics_text)
                    except ValueError:
                        metrics = {}
                    if self.headline is None and metrics:
                        self.headline = sorted(metrics)[0]
                        self._set_meta("headline", self.headline)
                    group = groups.get(key) or {}
                    batch.append((key, model, judge, scorer, status, reason, text_of(error), outcome_of(
                        status, reason, metrics), metrics_text, _number(metrics.get(self.headline)), created,
                        _str(group.get("task")), _str(group.get("dataset") or group.get("variant")),
                        _int(group.get("shots")), kind, rhash, text_of(text) if kind == "text" else None,
                        prompts.get(key)))
                    newest = max(newest, created)
                self.conn.executemany("INSERT OR REPLACE INTO samples VALUES "
                                      "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", batch)
                if regroup and groups:
                    self.conn.executemany(
                        "UPDATE samples SET task=?, dataset=?, shots=? WHERE item_key=?",
                        [(_str(g.get("task")), _str(g.get("dataset") or g.get("variant")), _int(g.get("shots")), k)
                         for k, g in groups.items()])
                    self.conn.executemany("UPDATE samples SET prompt=? WHERE item_key=?",
                                          [(p, k) for k, p in prompts.items()])
                changed = sorted({r[0] for r in batch})
                if len(changed) > 5000:
                    self.conn.execute("DELETE FROM items")
                    self._spread("")
                else:
                    for start in range(0, len(changed), 500):
                        chunk = changed[start:start + 500]
                        self._spread(f"WHERE item_key IN ({','.join('?' * len(chunk))})", chunk)
                self._set_meta("since", repr(newest))
                self._set_meta("groups", groups_sig if (groups or not regroup) else "")
                self._set_meta("signature", signature)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def _spread(self, where: str, args: Sequence[str] = ()) -> None:
        self.conn.execute(f"INSERT OR REPLACE INTO items SELECT item_key, judge_id, "
                          f"CASE WHEN COUNT(score) > 1 THEN MAX(score) - MIN(score) END FROM samples {where} "
                          f"GROUP BY item_key, judge_id", tuple(args))

    def _groups(self) -> tuple[dict[str, dict], dict[str, str]]:
        """``{item key: group}`` and ``{item key: prompt text}`` from the run's samples.jsonl and
        requests.jsonl (empty when it wrote none: a run still going, or one of over 100,000
        items x models without --log-samples)."""
        groups: dict[str, dict] = {}
        text_hash: dict[str, str] = {}
        try:
            with open(self.folder / "samples.jsonl", encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict) and isinstance(rec.get("item"), str) and rec["item"] not in groups:
                        groups[rec["item"]] = rec.get("group") if isinstance(rec.get("group"), dict) else {}
                        req = rec.get("request")
                        if isinstance(req, dict) and isinstance(req.get("text_sha256"), str):
                            text_hash[rec["item"]] = req["text_sha256"]
        except OSError:
            return {}, {}
        texts: dict[str, str] = {}
        try:
            with open(self.folder / "requests.jsonl", encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict) and isinstance(rec.get("text_sha256"), str):
                        texts[rec["text_sha256"]] = text_of(rec.get("text"))
        except OSError:
            pass
        return groups, {k: texts[h] for k, h in text_hash.items() if h in texts}

    # -- queries ---------------------------------------------------------------------------
    def choices(self) -> dict[str, list]:
        """The values each filter offers: tasks, datasets, shots, models, judges, metrics."""
        with self._lock:
            return self._choices()

    def _choices(self) -> dict[str, list]:
        q = self.conn.execute
        first = q("SELECT metrics FROM samples WHERE status='ok' LIMIT 1").fetchone()
        return {
            "task": [r[0] for r in q("SELECT DISTINCT task FROM samples WHERE task IS NOT NULL ORDER BY task")],
            "dataset": [r[0] for r in q("SELECT DISTINCT dataset FROM samples WHERE dataset IS NOT NULL "
                                        "ORDER BY dataset")],
            "shots": [r[0] for r in q("SELECT DISTINCT shots FROM samples WHERE shots IS NOT NULL ORDER BY shots")],
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
        value = "s.score" if not metric or metric == self.headline else "json_extract(s.metrics, ?)"
        vargs = [] if value == "s.score" else [f'$."{metric}"']
        for key, op in (("lo", ">="), ("hi", "<=")):
            if filters.get(key) is not None:
                where.append(f"{value} {op} ?")
                args.extend([*vargs, filters[key]])
        if filters.get("q"):
            where.append("(instr(lower(s.answer_text), ?) > 0 OR instr(lower(s.prompt), ?) > 0 "
                         "OR instr(lower(s.item_key), ?) > 0)")
            args.extend([filters["q"].lower()] * 3)
        if filters.get("outcome") == "not applicable":
            return self._not_applicable(filters, page, size)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        join = ""
        if sort == "spread":
            join = "JOIN items i ON i.item_key = s.item_key AND i.judge_id = s.judge_id"
            order = "i.spread IS NULL, i.spread DESC, s.item_key, s.model_id"
        elif sort in ("score", "-score"):
            order = f"{value} IS NULL, {value} {'DESC' if sort == '-score' else 'ASC'}, s.item_key, s.model_id"
        else:
            order = "s.item_key, s.model_id, s.judge_id"
        order_args = vargs * 2 if sort in ("score", "-score") else []
        with self._lock:
            return self._page(clause, args, join, order, order_args, size, page)

    def _not_applicable(self, filters: dict[str, Any], page: int, size: int) -> tuple[list[dict], int]:
        """(item, model) pairs of a model that scored no row of an item some model scored: in a
        finished run, the items that model was not asked (it serves another request type)."""
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
                   f"WHERE NOT EXISTS (SELECT 1 FROM samples s WHERE s.item_key = i.item_key AND s.model_id = m.model_id)"
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

    def _page(self, clause: str, args: list, join: str, order: str, order_args: list, size: int,
              page: int) -> tuple[list[dict], int]:
        total = self.conn.execute(f"SELECT COUNT(*) FROM samples s {clause}", (*args,)).fetchone()[0]
        cols = ("item_key", "model_id", "judge_id", "status", "reason", "error", "outcome", "metrics", "score",
                "task", "dataset", "shots", "answer_kind", "answer_hash", "answer_text")
        sql = (f"SELECT {', '.join('s.' + c for c in cols)}, {'i.spread' if join else 'NULL'} FROM samples s {join} "
               f"{clause} ORDER BY {order} LIMIT ? OFFSET ?")
        rows = self.conn.execute(sql, (*args, *order_args, size, max(0, page) * size)).fetchall()
        return [dict(zip((*cols, "spread"), r)) for r in rows], total

    def item_rows(self, item_key: str) -> list[dict]:
        cols = ("item_key", "model_id", "judge_id", "scorer_version", "status", "reason", "error", "outcome",
                "metrics", "score", "task", "dataset", "shots", "answer_kind", "answer_hash", "prompt")
        with self._lock:
            rows = self.conn.execute(f"SELECT {', '.join(cols)} FROM samples WHERE item_key=? ORDER BY model_id, "
                                     f"judge_id", (item_key,)).fetchall()
        return [dict(zip(cols, r)) for r in rows]

    def values(self, model_id: str, metric: Optional[str]) -> dict[tuple[str, str], Optional[float]]:
        """``{(item key, judge id): value}`` of ``metric`` for ``model_id``'s ok scores."""
        with self._lock:
            if not metric or metric == self.headline:
                rows = self.conn.execute("SELECT item_key, judge_id, score FROM samples WHERE model_id=? "
                                         "AND outcome='ok'", (model_id,)).fetchall()
            else:
                rows = self.conn.execute("SELECT item_key, judge_id, json_extract(metrics, ?) FROM samples "
                                         "WHERE model_id=? AND outcome='ok'", (f'$."{metric}"', model_id)).fetchall()
        return {(k, j): _number(v) for k, j, v in rows}

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
            found = self.conn.execute("SELECT model_id, outcome, COUNT(*) FROM samples GROUP BY model_id, "
                                      "outcome").fetchall()
        for model, outcome, n in found:
            out.setdefault(model, {})[outcome] = n
        return out

    def close(self) -> None:
        self.conn.close()


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
