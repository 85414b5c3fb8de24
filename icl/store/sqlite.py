"""SQLite store of per-sample scores, failures and compute records.

One row per sample, keyed by (protocol, dataset, task, query id, context hash, model, model
version, shots, seed). Writes happen one batch per transaction in WAL mode, so a process
killed at any point leaves only whole batches behind; a rerun skips the samples whose status
is ``ok`` and retries failed ones. Metrics are stored as JSON (``Infinity``/``NaN`` allowed:
PSNR of identical images is +inf, a missing metric is NaN).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

SCHEMA_VERSION = 1

_KEY_COLUMNS = ("protocol", "dataset", "task", "query_id", "context_hash", "model", "model_version", "shots", "seed",
                "dataset_version", "task_version")
_ROW_COLUMNS = (*_KEY_COLUMNS, "status", "metrics", "error", "model_s", "score_s", "run_id", "created")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    protocol TEXT NOT NULL, dataset TEXT NOT NULL, task TEXT NOT NULL, query_id TEXT NOT NULL,
    context_hash TEXT NOT NULL, model TEXT NOT NULL, model_version TEXT NOT NULL,
    shots INTEGER NOT NULL, seed INTEGER NOT NULL, dataset_version TEXT NOT NULL, task_version TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    metrics TEXT NOT NULL, error TEXT, model_s REAL NOT NULL, score_s REAL NOT NULL,
    run_id TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY ({", ".join(_KEY_COLUMNS)})
);
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, stage TEXT NOT NULL,
    model TEXT, dataset TEXT, task TEXT, query_id TEXT, shots INTEGER, path TEXT,
    message TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS compute (
    run_id TEXT NOT NULL, model TEXT NOT NULL, stage TEXT NOT NULL, device TEXT NOT NULL,
    samples INTEGER NOT NULL, wall_s REAL NOT NULL, peak_memory_bytes INTEGER,
    memory_kind TEXT, PRIMARY KEY (run_id, model, stage)
);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, started REAL NOT NULL, info TEXT NOT NULL);
"""


@dataclass(frozen=True, order=True)
class SampleKey:
    """Identity of one scored sample; equal keys are never computed twice. The dataset and
    task versions make results of changed data or decoding never count as done."""

    protocol: str
    dataset: str
    task: str
    query_id: str
    context_hash: str
    model: str
    model_version: str
    shots: int
    seed: int
    dataset_version: str = ""
    task_version: str = ""


@dataclass
class SampleResult:
    """The stored outcome of one sample; per-sample timings are the batch's share."""

    key: SampleKey
    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    error: Optional[str] = None
    model_s: float = 0.0
    score_s: float = 0.0
    run_id: str = ""


@dataclass
class Failure:
    """One failure event: a sample (or a data file) that could not be loaded, predicted or scored."""

    stage: str
    message: str
    model: Optional[str] = None
    dataset: Optional[str] = None
    task: Optional[str] = None
    query_id: Optional[str] = None
    shots: Optional[int] = None
    path: Optional[str] = None
    run_id: str = ""


@dataclass
class ComputeRecord:
    """Wall time and peak memory of one (model, stage) in one run; ``stage`` is data|model|score."""

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


class Store:
    """A results database at ``path`` (created with its parent folder if absent)."""

    def __init__(self, path: Union[str, os.PathLike], timeout: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are opened explicitly, one per batch.
        self._conn = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL survives a killed process (not a power cut) and keeps commits cheap.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        with self._transaction():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._conn.execute(stmt)
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        found = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        if int(found) != SCHEMA_VERSION:
            raise RuntimeError(f"{self.path}: store schema version {found}, this icl writes version {SCHEMA_VERSION}")

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
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- runs ------------------------------------------------------------------------------
    def start_run(self, info: dict) -> str:
        """Record a run's settings; returns its id (time-ordered, unique per process)."""
        now = time.time()
        run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now * 1e6) % 1_000_000:06d}-{os.getpid()}"
        with self._transaction() as c:
            c.execute("INSERT INTO runs VALUES (?, ?, ?)", (run_id, now, json.dumps(info, sort_keys=True)))
        return run_id

    # -- samples ---------------------------------------------------------------------------
    def statuses(self, group: SampleKey) -> dict[tuple[str, str], str]:
        """``{(query_id, context_hash): status}`` of the stored rows that share every key field
        of ``group`` but its query id and context hash."""
        rows = self._conn.execute(
            "SELECT query_id, context_hash, status FROM samples WHERE protocol=? AND dataset=? AND task=?"
            " AND model=? AND model_version=? AND shots=? AND seed=? AND dataset_version=? AND task_version=?",
            (group.protocol, group.dataset, group.task, group.model, group.model_version, group.shots, group.seed,
             group.dataset_version, group.task_version),
        ).fetchall()
        return {(q, h): s for q, h, s in rows}

    def write_batch(self, results: Iterable[SampleResult], failures: Iterable[Failure] = ()) -> None:
        """Write a batch of results (replacing earlier rows of the same keys) and failures atomically."""
        now = time.time()
        rows = [
            (*(getattr(r.key, k) for k in _KEY_COLUMNS), r.status, json.dumps(r.metrics, sort_keys=True),
             r.error, float(r.model_s), float(r.score_s), r.run_id, now)
            for r in results
        ]
        for r in rows:
            if r[len(_KEY_COLUMNS)] not in ("ok", "failed"):
                raise ValueError(f"sample status must be 'ok' or 'failed', got {r[len(_KEY_COLUMNS)]!r}")
        fails = [_failure_row(f, now) for f in failures]
        with self._transaction() as c:
            c.executemany(f"INSERT OR REPLACE INTO samples ({', '.join(_ROW_COLUMNS)}) "
                          f"VALUES ({', '.join('?' * len(_ROW_COLUMNS))})", rows)
            c.executemany("INSERT INTO failures (run_id, stage, model, dataset, task, query_id, shots, path, message,"
                          " created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", fails)

    def results(self, keys: Optional[Iterable[SampleKey]] = None) -> list[SampleResult]:
        """Stored results, sorted by key; only those of ``keys`` when given (missing ones skipped)."""
        cur = self._conn.execute(f"SELECT {', '.join(_ROW_COLUMNS[:-1])} FROM samples")
        wanted = None if keys is None else set(keys)
        n = len(_KEY_COLUMNS)
        out = []
        for row in cur:
            key = SampleKey(*row[:n])
            if wanted is not None and key not in wanted:
                continue
            status, metrics, error, model_s, score_s, run_id = row[n:]
            out.append(SampleResult(key, status, json.loads(metrics), error, model_s, score_s, run_id))
        out.sort(key=lambda r: r.key)
        return out

    def count(self, status: Optional[str] = None) -> int:
        if status is None:
            return self._conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
        return self._conn.execute("SELECT COUNT(*) FROM samples WHERE status=?", (status,)).fetchone()[0]

    # -- failures and compute ---------------------------------------------------------------
    def add_failures(self, failures: Iterable[Failure]) -> None:
        self.write_batch((), failures)

    def failures(self, run_id: Optional[str] = None) -> list[Failure]:
        sql = "SELECT stage, message, model, dataset, task, query_id, shots, path, run_id FROM failures"
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

    def run_ids(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT run_id FROM runs ORDER BY started")]



def _failure_row(f: Failure, now: float) -> tuple:
    return (f.run_id, f.stage, f.model, f.dataset, f.task, f.query_id, f.shots, f.path, f.message, now)
