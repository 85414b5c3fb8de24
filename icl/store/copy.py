"""Copy every row of other stores into one (``python -m icl.run merge`` of shards' stores).

Generic by design, so that tables and columns added to the schema later travel without a
change here: the tables and their columns are read from each source file; a table the target
lacks is created from the source's own ``CREATE TABLE``, a column it lacks is added (NULL in
its older rows).

A row whose key is already in the target is skipped when its content is equal, and refused
(:class:`CopyConflict`, nothing written) when it differs: the key is the table's primary key;
tables keyed by an automatic integer id (failure events) are keyed by all their other columns.
"Content" leaves out bookkeeping that differs between processes computing the same thing:
``run_id``, ``created``, ``started``, timings (``seconds``, names ending in ``_s``) and the other
per-call measurements (peak memory and its counter, energy, a generator's record with its
latency); the first row copied keeps its values. Sources are opened read-only and never changed.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from icl.store.version import SCHEMA_VERSION, StoreError

BOOKKEEPING = ("run_id", "created", "started", "seconds", "peak_memory_bytes", "memory_kind", "energy_j", "generation")
_CHUNK = 500


class CopyConflict(StoreError):
    """Two stores hold different content under the same key."""


def is_bookkeeping(column: str) -> bool:
    """A column that is not part of a row's content: who wrote it, when, and how long it took."""
    return column in BOOKKEEPING or column.endswith("_s")


@dataclass
class Copied:
    """Rows of one source: per table, how many were added and how many were there already."""

    source: Path
    added: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)


@contextmanager
def open_read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A store read without writing anything beside it: opened ``immutable`` when its
    write-ahead log is empty or absent (every commit is in the file), else read from a private
    copy of the file and its log (a read-only SQLite connection would still create or update
    the ``-shm`` index, and writing the log back is the writer's business)."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no store there")
    wal = path.with_name(path.name + "-wal")
    with tempfile.TemporaryDirectory(prefix="icl-store-") as private:
        if wal.is_file() and wal.stat().st_size > 0:
            shutil.copyfile(path, Path(private) / path.name)
            shutil.copyfile(wal, Path(private) / wal.name)
            target = (Path(private) / path.name).as_uri()  # private: SQLite may recover the log into it
        else:
            target = f"{path.absolute().as_uri()}?immutable=1"
        try:
            conn = sqlite3.connect(target, uri=True, timeout=60)
            found = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: not a readable icl store ({exc})") from None
        try:
            if found is None or int(found[0]) != SCHEMA_VERSION:
                raise StoreError(f"{path}: store schema version {None if found is None else found[0]}, this icl "
                                 f"writes version {SCHEMA_VERSION}; merge with the icl version that wrote it")
            yield conn
        finally:
            conn.close()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, int]]:
    """(name, declared type, primary-key position) of each column."""
    return [(r[1], r[2], r[5]) for r in conn.execute(f"PRAGMA table_info({_quote(table)})")]


def _rows(conn: sqlite3.Connection, table: str, columns: Sequence[str]) -> Iterator[tuple]:
    cur = conn.execute(f"SELECT {', '.join(map(_quote, columns))} FROM {_quote(table)}")
    while chunk := cur.fetchmany(_CHUNK):
        yield from chunk


def copy_rows(target: sqlite3.Connection, source_path: Path) -> Copied:
    """Copy every table of the store at ``source_path`` into ``target`` (call it inside one
    of the target's transactions, so that a :class:`CopyConflict` leaves it unchanged)."""
    copied = Copied(Path(source_path))
    with open_read_only(source_path) as source:
        tables = source.execute("SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                                "AND name != 'meta' ORDER BY name").fetchall()
        for table, sql in tables:
            _copy_table(source, target, table, sql, copied)
    return copied


def _copy_table(source: sqlite3.Connection, target: sqlite3.Connection, table: str, sql: str,
                copied: Copied) -> None:
    src_cols = _columns(source, table)
    have = {c[0] for c in _columns(target, table)}
    if not have:
        target.execute(sql)
    else:
        for name, kind, _ in src_cols:
            if name not in have:  # a column newer than this target: carried, NULL in older rows
                target.execute(f"ALTER TABLE {_quote(table)} ADD COLUMN {_quote(name)} {kind}")
    pk = [c for c in sorted(src_cols, key=lambda c: c[2]) if c[2] > 0]
    row_id = len(pk) == 1 and pk[0][1].upper() == "INTEGER"  # an automatic id: rows are events
    columns = [c[0] for c in src_cols if not (row_id and c[2] > 0)]
    key = [c[0] for c in pk] if pk and not row_id else columns
    content = [c for c in columns if c not in key and not is_bookkeeping(c)]
    insert = (f"INSERT INTO {_quote(table)} ({', '.join(map(_quote, columns))}) "
              f"VALUES ({', '.join('?' * len(columns))})")
    at = {c: i for i, c in enumerate(columns)}
    events: set[tuple] = set()
    if key is columns:  # keyed by the whole row: compared in memory (event tables are small)
        events = set(_rows(target, table, columns))
    lookup = (f"SELECT {', '.join(map(_quote, content)) or '1'} FROM {_quote(table)} WHERE "
              + " AND ".join(f"{_quote(k)} IS ?" for k in key) + " LIMIT 1")
    added = present = 0
    for row in _rows(source, table, columns):
        if key is columns:
            found: Any = row if row in events else None
            events.add(row)
        else:
            found = target.execute(lookup, [row[at[k]] for k in key]).fetchone()
        if found is None:
            target.execute(insert, row)
            added += 1
            continue
        present += 1
        if key is not columns:
            differ = [c for c, v in zip(content, found) if v != row[at[c]]]
            if differ:
                shown = ", ".join(f"{k}={row[at[k]]!r}" for k in key)
                raise CopyConflict(f"{copied.source}: table {table}: the row {shown} differs in {', '.join(differ)} "
                                   f"from the one already in the merged store")
    copied.added[table], copied.present[table] = added, present
