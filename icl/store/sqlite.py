"""SQLite store of every benchmark's responses, scores, failures and compute records.

One schema for all benchmarks (PROTOCOL §1.4 "Cache keys"):

- ``models``: a model's whole identity (adapter name and version, weight digests, precision,
  device kind, every model argument) under its ``model_id`` (a digest of that identity).
- ``responses``: what a model answered to a request, keyed by (request content hash,
  model_id): text, or the image as PNG bytes; failed calls are kept with their error and are
  asked again on the next run.
- ``links``: which request each (item, model, step) sent, so ``rescore`` finds the responses
  of a run without building any request.
- ``scores``: per (benchmark, protocol, item key, model_id, judge_id, scorer version) the
  metrics (JSON; ``Infinity``/``NaN`` allowed) or the failure; rescoring never calls a model.

Compute per sample (schema version 3): each response keeps the peak memory (``memory_kind``
names the counter), the energy (joules, NVML; NULL where the GPU does not report it) of the
call that made it, per request, and a generator's per-image record (``generation``, JSON:
seed, steps, guidance, size, latency, memory); each score the same summed (energy) or maxed
(memory) over the item's calls. A version-2 store is migrated when opened: the new columns
are added (NULL for the old rows), nothing is dropped.

Writes happen one batch per transaction in WAL mode, so a process killed at any point leaves
only whole batches behind.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

from icl.store.version import SCHEMA_VERSION as SCHEMA_VERSION, StoreError as StoreError

# Columns each version added, per table: opening an older store adds them (never drops any).
_MIGRATIONS: dict[int, dict[str, tuple[str, ...]]] = {
    3: {"responses": ("peak_memory_bytes INTEGER", "memory_kind TEXT", "energy_j REAL", "generation TEXT"),
        "scores": ("peak_memory_bytes INTEGER", "memory_kind TEXT", "energy_j REAL")},
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models (model_id TEXT PRIMARY KEY, label TEXT NOT NULL, identity TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    request_hash TEXT NOT NULL, model_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), reason TEXT,
    kind TEXT NOT NULL CHECK (kind IN ('text', 'png', 'none')), body BLOB, error TEXT,
    seconds REAL NOT NULL, run_id TEXT NOT NULL, created REAL NOT NULL,
    peak_memory_bytes INTEGER, memory_kind TEXT, energy_j REAL, generation TEXT,
    PRIMARY KEY (request_hash, model_id)
);
CREATE TABLE IF NOT EXISTS links (
    item_key TEXT NOT NULL, model_id TEXT NOT NULL, step TEXT NOT NULL, request_hash TEXT NOT NULL,
    PRIMARY KEY (item_key, model_id, step)
);
CREATE TABLE IF NOT EXISTS scores (
    benchmark TEXT NOT NULL, protocol TEXT NOT NULL, item_key TEXT NOT NULL, model_id TEXT NOT NULL,
    judge_id TEXT NOT NULL, scorer_version TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), reason TEXT,
    metrics TEXT NOT NULL, error TEXT, model_s REAL NOT NULL, score_s REAL NOT NULL,
    run_id TEXT NOT NULL, created REAL NOT NULL,
    peak_memory_bytes INTEGER, memory_kind TEXT, energy_j REAL,
    PRIMARY KEY (benchmark, protocol, item_key, model_id, judge_id, scorer_version)
);
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, stage TEXT NOT NULL,
    model TEXT, item TEXT, path TEXT, message TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS compute (
    run_id TEXT NOT NULL, model TEXT NOT NULL, stage TEXT NOT NULL, device TEXT NOT NULL,
    samples INTEGER NOT NULL, wall_s REAL NOT NULL, peak_memory_bytes INTEGER,
    memory_kind TEXT, PRIMARY KEY (run_id, model, stage)
);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, started REAL NOT NULL, info TEXT NOT NULL);
"""


@dataclass
class Response:
    """A model's answer to one request: ``kind`` "text" (``body`` str), "png" (``body`` PNG
    bytes) or "none" (a failed call: ``status`` "failed", ``reason`` error|timeout|overflow|
    invalid, ``error`` the message). ``seconds``, ``peak_memory_bytes`` (counter
    ``memory_kind``), ``energy_j``: the call's cost per request; ``generation``: the
    generator's record of this image (seed, steps, size, ...), None for other models."""

    request_hash: str
    model_id: str
    status: str
    kind: str
    body: Union[str, bytes, None] = None
    error: Optional[str] = None
    reason: Optional[str] = None
    seconds: float = 0.0
    run_id: str = ""
    peak_memory_bytes: Optional[int] = None
    memory_kind: Optional[str] = None
    energy_j: Optional[float] = None
    generation: Optional[dict] = None


# the columns of `responses` read as they are into the Response field of the same name
# (`generation`, stored as JSON text, is decoded apart)
_RESPONSE_READ = tuple(f.name for f in fields(Response) if f.name != "generation")


@dataclass(frozen=True, order=True)
class ScoreKey:
    """Identity of one stored score; equal keys are never computed twice."""

    benchmark: str
    protocol: str
    item_key: str
    model_id: str
    judge_id: str
    scorer_version: str


@dataclass
class Score:
    key: ScoreKey
    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    error: Optional[str] = None
    reason: Optional[str] = None
    model_s: float = 0.0
    score_s: float = 0.0
    run_id: str = ""
    peak_memory_bytes: Optional[int] = None  # the highest of the item's model calls
    memory_kind: Optional[str] = None
    energy_j: Optional[float] = None  # the sum over the item's model calls


@dataclass
class Failure:
    """One failure event: an item (or a data file) that could not be built, answered or scored."""

    stage: str
    message: str
    model: Optional[str] = None
    item: Optional[str] = None
    path: Optional[str] = None
    run_id: str = ""


@dataclass
class ComputeRecord:
    """Wall time and peak memory of one (model, stage) in one run; ``stage`` is data|model|score|judge."""

    run_id: str
    model: str
    stage: str
    device: str
    samples: int
    wall_s: float
    peak_memory_bytes: Optional[int] = None
    memory_kind: Optional[str] = None

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.wall_s if self.wall_s > 0 else float("nan")


_SCORE_COLUMNS = ("benchmark", "protocol", "item_key", "model_id", "judge_id", "scorer_version", "status", "reason",
                  "metrics", "error", "model_s", "score_s", "run_id", "created", "peak_memory_bytes", "memory_kind",
                  "energy_j")
_RESPONSE_COLUMNS = ("request_hash", "model_id", "status", "reason", "kind", "body", "error", "seconds", "run_id",
                     "created", "peak_memory_bytes", "memory_kind", "energy_j", "generation")


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back ``conn``'s open transaction, if SQLite has not already: on a full disk (or
    another I/O error) SQLite rolls the whole transaction back itself, and a ROLLBACK then
    fails with "no transaction is active", which would hide the error that mattered. A
    rollback that itself fails is left to the error in flight (the caller re-raises it)."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


class Store:
    """A results database at ``path`` (created with its parent folder if absent; with
    ``create=False`` a missing store is a :class:`StoreError` and nothing is created).

    ``readonly=True`` (``--check``) opens an existing store for reading only: nothing is
    created, migrated or written, and no ``-wal``/``-shm`` file is added beside it (a store
    without them is opened ``immutable``; one a live or killed run left them to is read through
    them, ``mode=ro``). Its writing methods then fail (SQLite: "attempt to write a readonly
    database")."""

    def __init__(self, path: Union[str, os.PathLike], timeout: float = 60.0, *, create: bool = True,
                 readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            self._conn = _open_readonly(self.path, timeout)
            found = self._schema_version()
            if found is not None and found > SCHEMA_VERSION:
                self._conn.close()
                raise StoreError(f"{self.path}: store schema version {found}, this icl reads up to version "
                                 f"{SCHEMA_VERSION}")
            return
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.is_file():
            raise StoreError(f"{self.path}: no store there (it is not created here)")
        # Autocommit mode: transactions are opened explicitly, one per batch. mode=rw: SQLite
        # itself refuses to create the file when it is not wanted.
        target = str(self.path) if create else f"{self.path.absolute().as_uri()}?mode=rw"
        self._conn = sqlite3.connect(target, timeout=timeout, isolation_level=None, check_same_thread=False,
                                     uri=not create)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL survives a killed process (not a power cut) and keeps commits cheap.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        found = self._schema_version()
        if found is not None and (found > SCHEMA_VERSION or found < min(_MIGRATIONS) - 1):
            self._conn.close()
            raise StoreError(f"{self.path}: store schema version {found}, this icl writes version {SCHEMA_VERSION}; "
                             f"use another output folder (--out) or --store")
        if found is not None and found < SCHEMA_VERSION:
            self._migrate(found)
        with self._transaction():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._conn.execute(stmt)
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def model_seconds(self, model_id: str) -> tuple[int, float, float]:
        """(measured items, their model seconds, their scoring seconds) over every stored ``ok``
        score of ``model_id`` answered by a model call (``model_s`` > 0; answers reused from the
        store cost nothing): what an item of this model identity cost before."""
        row = self._conn.execute("SELECT COUNT(*), COALESCE(SUM(model_s), 0), COALESCE(SUM(score_s), 0) FROM scores "
                                 "WHERE model_id=? AND status='ok' AND model_s > 0", (model_id,)).fetchone()
        return int(row[0]), float(row[1]), float(row[2])

    def load_seconds(self, model_id: str, label: str) -> Optional[float]:
        """The seconds the latest run that scored ``model_id`` took to load it (its ``load``
        compute record, under the run's ``label`` of the model), or None when none is stored."""
        row = self._conn.execute("SELECT wall_s FROM compute WHERE stage='load' AND model=? AND run_id IN "
                                 "(SELECT DISTINCT run_id FROM scores WHERE model_id=?) ORDER BY run_id DESC LIMIT 1",
                                 (label, model_id)).fetchone()
        return float(row[0]) if row else None

    def judge_seconds(self, judge_id: str, label: str) -> tuple[int, float, Optional[float]]:
        """(items judged, their judging seconds, the latest load seconds or None) of the judge
        ``judge_id`` (run under ``label``) over the runs that stored its scores and their compute
        (a run writes its compute as it ends: one killed before holds no judging time): an item
        judged is a score of it the judge was asked about (``ok``, or failed for the judge's own
        reason; an answer the benchmark asks no question about costs no judging time); the
        seconds are those runs' ``judge`` stage wall time (every model's answers; answers the
        store already held cost their lookup)."""
        runs = ("SELECT DISTINCT run_id FROM scores WHERE judge_id = ? AND run_id IN "
                "(SELECT run_id FROM compute)")
        items = self._conn.execute(f"SELECT COUNT(*) FROM scores WHERE judge_id = ? AND (status = 'ok' OR "
                                   f"reason = 'judge') AND run_id IN ({runs})", (judge_id, judge_id)).fetchone()
        seconds = self._conn.execute(f"SELECT COALESCE(SUM(wall_s), 0) FROM compute WHERE stage = 'judge' AND "
                                     f"model = ? AND run_id IN ({runs})", (label, judge_id)).fetchone()
        load = self._conn.execute(f"SELECT wall_s FROM compute WHERE stage = 'load' AND model = ? AND run_id IN "
                                  f"({runs}) ORDER BY run_id DESC LIMIT 1", (label, judge_id)).fetchone()
        return int(items[0]), float(seconds[0]), (float(load[0]) if load else None)

    def answer_bytes(self, model_id: str) -> tuple[int, int]:
        """(stored ``ok`` answers of ``model_id``, their bytes): the size an answer of it takes."""
        row = self._conn.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM responses "
                                 "WHERE model_id=? AND status='ok'", (model_id,)).fetchone()
        return int(row[0]), int(row[1])

    def _migrate(self, found: int) -> None:
        """Bring a store of version ``found`` to :data:`SCHEMA_VERSION` in one transaction:
        add each later version's columns (old rows read NULL there)."""
        with self._transaction() as c:
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for table, columns in _MIGRATIONS[version].items():
                    have = {row[1] for row in c.execute(f"PRAGMA table_info({table})")}
                    for column in columns:
                        if column.split()[0] not in have:
                            c.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
            c.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def _schema_version(self) -> Optional[int]:
        has_meta = self._conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if not has_meta:
            return None
        row = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            rollback(self._conn)
            raise
        try:
            self._conn.execute("COMMIT")
        except BaseException:
            rollback(self._conn)
            raise

    # -- runs and models -------------------------------------------------------------------
    def start_run(self, info: dict) -> str:
        """Record a run's settings; returns its id (time-ordered, unique per process)."""
        now = time.time()
        run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now * 1e6) % 1_000_000:06d}-{os.getpid()}"
        with self._transaction() as c:
            c.execute("INSERT INTO runs VALUES (?, ?, ?)", (run_id, now, json.dumps(info, sort_keys=True, default=str)))
        return run_id

    def put_model(self, model_id: str, label: str, identity: dict) -> None:
        with self._transaction() as c:
            c.execute("INSERT OR REPLACE INTO models VALUES (?, ?, ?)",
                      (model_id, label, json.dumps(identity, sort_keys=True)))

    def models(self) -> dict[str, tuple[str, dict]]:
        """``{model_id: (label, identity)}`` of every model that answered into this store."""
        return {m: (label, json.loads(i)) for m, label, i in self._conn.execute("SELECT * FROM models")}

    # -- responses -------------------------------------------------------------------------
    def responses(self, hashes: Iterable[str], model_id: str) -> dict[str, Response]:
        """Stored responses of ``model_id`` to the requests ``hashes`` (absent ones left out)."""
        wanted = list(dict.fromkeys(hashes))
        out: dict[str, Response] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            rows = self._conn.execute(
                f"SELECT {', '.join(_RESPONSE_READ)}, generation FROM responses "
                f"WHERE model_id=? AND request_hash IN ({','.join('?' * len(chunk))})", (model_id, *chunk))
            for row in rows:
                out[row[0]] = Response(**dict(zip(_RESPONSE_READ, row)),
                                       generation=None if row[-1] is None else json.loads(row[-1]))
        return out

    def links(self, item_keys: Iterable[str], model_id: str) -> dict[str, dict[str, str]]:
        """``{item_key: {step: request_hash}}`` recorded for ``model_id``."""
        wanted = list(dict.fromkeys(item_keys))
        out: dict[str, dict[str, str]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for key, step, h in self._conn.execute(
                    f"SELECT item_key, step, request_hash FROM links WHERE model_id=? AND item_key IN "
                    f"({','.join('?' * len(chunk))})", (model_id, *chunk)):
                out.setdefault(key, {})[step] = h
        return out

    def final_answers(self, item_keys: Iterable[str], model_id: str) -> dict[str, Response]:
        """``{item_key: response}``: each item's last answer of ``model_id`` (its highest
        ``answer:N`` step, the one scored); items without a stored answer are left out."""
        last = {}
        for key, steps in self.links(item_keys, model_id).items():
            answers = [s for s in steps if s.startswith("answer:")]
            if answers:
                last[key] = steps[max(answers, key=lambda s: int(s.split(":")[1]))]
        found = self.responses(last.values(), model_id)
        return {key: found[h] for key, h in last.items() if h in found}

    def judge_answers(self, item_keys: Iterable[str], model_id: str, judge_id: str
                      ) -> dict[str, list[Optional[Response]]]:
        """``{item_key: [response or None, ...]}``: the answers of judge ``judge_id`` about
        ``model_id``'s answer to each item, in ``judge:N`` order (links ``item_key|model_id``)."""
        keys = {f"{k}|{model_id}": k for k in item_keys}
        links = self.links(keys, judge_id)
        ordered = {k: [steps[s] for s in sorted(steps, key=lambda s: int(s.split(":")[1]))]
                   for k, steps in links.items()}
        found = self.responses([h for hs in ordered.values() for h in hs], judge_id)
        return {keys[k]: [found.get(h) for h in hs] for k, hs in ordered.items()}

    # -- scores ----------------------------------------------------------------------------
    def done(self, benchmark: str, protocol: str, model_id: str, judge_id: str, scorer_version: str) -> set[str]:
        """Item keys with an ``ok`` score for this (benchmark, protocol, model, judge, scorer)."""
        rows = self._conn.execute(
            "SELECT item_key FROM scores WHERE benchmark=? AND protocol=? AND model_id=? AND judge_id=? "
            "AND scorer_version=? AND status='ok'", (benchmark, protocol, model_id, judge_id, scorer_version))
        return {r[0] for r in rows}

    def scores(self, keys: Sequence[ScoreKey]) -> list[Score]:
        """The stored scores of ``keys`` (missing ones left out), in the order of ``keys``."""
        by_group: dict[tuple, list[str]] = {}
        for k in keys:
            by_group.setdefault((k.benchmark, k.protocol, k.model_id, k.judge_id, k.scorer_version), []).append(k.item_key)
        found: dict[ScoreKey, Score] = {}
        for (b, p, m, j, v), items in by_group.items():
            wanted = set(items)
            for row in self._conn.execute(
                    "SELECT item_key, status, metrics, error, reason, model_s, score_s, run_id, peak_memory_bytes, "
                    "memory_kind, energy_j FROM scores "
                    "WHERE benchmark=? AND protocol=? AND model_id=? AND judge_id=? AND scorer_version=?",
                    (b, p, m, j, v)):
                if row[0] in wanted:
                    key = ScoreKey(b, p, row[0], m, j, v)
                    found[key] = Score(key, row[1], json.loads(row[2]), *row[3:])
        return [found[k] for k in keys if k in found]

    # -- writes ----------------------------------------------------------------------------
    def write_batch(self, responses: Iterable[Response] = (), links: Iterable[tuple[str, str, str, str]] = (),
                    scores: Iterable[Score] = (), failures: Iterable[Failure] = ()) -> None:
        """Write responses, links ``(item_key, model_id, step, request_hash)``, scores and
        failures in one transaction (replacing earlier rows of the same keys)."""
        now = time.time()
        resp_rows = []
        for r in responses:
            if r.status not in ("ok", "failed"):
                raise ValueError(f"response status must be 'ok' or 'failed', got {r.status!r}")
            resp_rows.append((r.request_hash, r.model_id, r.status, r.reason, r.kind, r.body, r.error,
                              float(r.seconds), r.run_id, now, r.peak_memory_bytes, r.memory_kind, r.energy_j,
                              None if r.generation is None else json.dumps(r.generation, sort_keys=True)))
        score_rows = []
        for s in scores:
            if s.status not in ("ok", "failed"):
                raise ValueError(f"score status must be 'ok' or 'failed', got {s.status!r}")
            k = s.key
            score_rows.append((k.benchmark, k.protocol, k.item_key, k.model_id, k.judge_id, k.scorer_version, s.status,
                               s.reason, json.dumps(s.metrics, sort_keys=True), s.error, float(s.model_s),
                               float(s.score_s), s.run_id, now, s.peak_memory_bytes, s.memory_kind, s.energy_j))
        fails = [(f.run_id, f.stage, f.model, f.item, f.path, f.message, now) for f in failures]
        with self._transaction() as c:
            c.executemany(f"INSERT OR REPLACE INTO responses ({', '.join(_RESPONSE_COLUMNS)}) "
                          f"VALUES ({', '.join('?' * len(_RESPONSE_COLUMNS))})", resp_rows)
            c.executemany("INSERT OR REPLACE INTO links VALUES (?, ?, ?, ?)", list(links))
            c.executemany(f"INSERT OR REPLACE INTO scores ({', '.join(_SCORE_COLUMNS)}) "
                          f"VALUES ({', '.join('?' * len(_SCORE_COLUMNS))})", score_rows)
            c.executemany("INSERT INTO failures (run_id, stage, model, item, path, message, created) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?)", fails)

    def count(self, table: str = "scores", status: Optional[str] = None) -> int:
        if table not in ("scores", "responses"):
            raise ValueError(f"count: table must be 'scores' or 'responses', got {table!r}")
        if status is None:
            return self._conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        return self._conn.execute(f"SELECT COUNT(*) FROM {table} WHERE status=?", (status,)).fetchone()[0]

    # -- failures and compute ---------------------------------------------------------------
    def add_failures(self, failures: Iterable[Failure]) -> None:
        self.write_batch(failures=failures)

    def failures(self, run_id: Optional[str] = None) -> list[Failure]:
        sql = "SELECT stage, message, model, item, path, run_id FROM failures"
        args: tuple = ()
        if run_id is not None:
            sql, args = sql + " WHERE run_id=?", (run_id,)
        return [Failure(*row) for row in self._conn.execute(sql + " ORDER BY id", args)]

    def add_compute(self, records: Iterable[ComputeRecord]) -> None:
        names = [f.name for f in fields(ComputeRecord)]
        with self._transaction() as c:
            c.executemany(f"INSERT OR REPLACE INTO compute ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                          [tuple(asdict(r)[n] for n in names) for r in records])

    def compute(self, run_ids: Optional[Iterable[str]] = None) -> list[ComputeRecord]:
        names = [f.name for f in fields(ComputeRecord)]
        rows = self._conn.execute(f"SELECT {', '.join(names)} FROM compute ORDER BY run_id, model, stage").fetchall()
        wanted = None if run_ids is None else set(run_ids)
        return [ComputeRecord(*row) for row in rows if wanted is None or row[0] in wanted]

    def copy_from(self, sources: Sequence[Union[str, os.PathLike]]) -> list:
        """Copy every row of the stores at ``sources`` into this one, all in one transaction
        (:func:`icl.store.copy.copy_rows`: a conflicting row leaves this store unchanged);
        returns one :class:`icl.store.copy.Copied` per source."""
        from icl.store.copy import copy_rows

        with self._transaction() as c:
            return [copy_rows(c, Path(s)) for s in sources]

    def read(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Rows of a read-only query (a cursor), for digests of the store's content."""
        return self._conn.execute(sql, tuple(params))

    def run_ids(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT run_id FROM runs ORDER BY started")]


def _open_readonly(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection to the store at ``path`` (:class:`Store`, ``readonly=True``)."""
    if not path.is_file():
        raise StoreError(f"{path}: no store there (it is not created here)")
    live = any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
    # without -wal/-shm (a closed store) mode=ro would leave both behind: immutable reads the file as it is
    query = "mode=ro" if live else "mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?{query}", uri=True, timeout=timeout,
                               isolation_level=None, check_same_thread=False)
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot be read as a store ({exc})") from None
    return conn


def stored_benchmarks(path: Union[str, os.PathLike], out: Union[str, os.PathLike, None] = None) -> set[str]:
    """The benchmarks whose runs wrote into the store at ``path`` (each run's recorded config),
    only those whose output folder was ``out`` when given; read without writing anything, and
    empty when there is no readable store there."""
    p = Path(path)
    if not p.is_file():
        return set()
    try:
        conn = _open_readonly(p, 10)
        try:
            rows = conn.execute("SELECT DISTINCT json_extract(info, '$.config.benchmark'), "
                                "json_extract(info, '$.config.out') FROM runs").fetchall()
        finally:
            conn.close()
    except (sqlite3.Error, StoreError):  # not a store, or an older one without runs: nothing to compare
        return set()
    wanted = None if out is None else os.path.abspath(out)
    return {b for b, o in rows if isinstance(b, str)
            and (wanted is None or (isinstance(o, str) and os.path.abspath(o) == wanted))}
