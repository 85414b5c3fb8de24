"""What every converter shares: the writer of one dataset (built in a temporary sibling folder,
renamed into place with a completion manifest only when complete) and its filter report; the raw
readers of :mod:`icl.data.convert._raw` are re-exported here for the converters.

A converter walks the raw release one sample at a time (bounded memory; :meth:`Conversion.map`
reads samples on a small thread pool), hands each kept sample to :meth:`Conversion.add`, each
filtered one to :meth:`Conversion.drop` with the reason, and each unreadable or inconsistent raw
file to :meth:`Conversion.bad`; then :meth:`Conversion.finish` writes ``convert-report.json``
(kept against the paper's count, what the filters removed and why, which raw files were
skipped) and ``manifest.json`` (the completion marker: counts and the SHA-256 of every raw file
read and every file written) and renames the folder into place. Until then the dataset under
its final name is the previous good one (or absent): a failed or killed conversion changes
nothing there.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

import numpy as np

# the raw readers, re-exported: converters import everything they share from here
from icl._parse import env_number
from icl.data.convert._raw import (ConvertError, RawError, UnsafeOutput, check_declared, confined,  # noqa: F401
                                   describe, max_array_bytes, need, raw_bytes, raw_join, raw_root_set, read_grey,
                                   read_image, read_json, read_label_png, read_text, same_size, sample_id,
                                   sha256_file)
from icl.data.dataset import DatasetMeta
from icl.data.images import display_path
from icl.data.writer import DatasetWriter

CONVERTER_VERSION = "convert-2"  # 2: temp-folder build, completion manifest, JPEG sources kept as JPEG
REPORT = "convert-report.json"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "icl-convert-manifest/1"
SHORTFALL_WARN = 0.01  # kept more than 1% below the paper's count: a warning
_JPEG_SUFFIXES = (".jpg", ".jpeg")

T = TypeVar("T")
R = TypeVar("R")


# -- the report -----------------------------------------------------------------------------------
@dataclass
class Report:
    """What one conversion did; written as ``convert-report.json``."""

    dataset: str
    kept: int = 0
    paper: int | None = None  # the paper's count (appendix A.3)
    dropped: dict[str, str] = field(default_factory=dict)  # sample id -> filter reason
    bad: dict[str, str] = field(default_factory=dict)  # raw file -> what is wrong with it
    adjusted: dict[str, str] = field(default_factory=dict)  # raw file -> how it was fitted (kept)

    def shortfall(self) -> str | None:
        """A warning when fewer than 99% of the paper's samples were kept."""
        if self.paper and self.kept < (1.0 - SHORTFALL_WARN) * self.paper:
            return (f"warning: {self.dataset} kept {self.kept} of the paper's {self.paper} samples "
                    f"({self.paper - self.kept} short): is the release complete? see {REPORT}")
        return None

    def summary(self) -> str:
        reasons = Counter(self.dropped.values())
        kept = f"{self.kept}" + (f"/{self.paper} (paper)" if self.paper else "")
        parts = [f"{self.dataset}: {kept} samples kept"]
        parts += [f"{n} dropped: {reason}" for reason, n in sorted(reasons.items())]
        if self.adjusted:
            parts.append(f"{len(self.adjusted)} resized to fit (see {REPORT})")
        if self.bad:
            parts.append(f"{len(self.bad)} bad raw files skipped (see {REPORT})")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "kept": self.kept, "paper": self.paper,
                "dropped_by_reason": dict(Counter(self.dropped.values())),
                "dropped": dict(sorted(self.dropped.items())), "bad_files": dict(sorted(self.bad.items())),
                "adjusted_files": dict(sorted(self.adjusted.items()))}


# -- swapping a finished folder into place --------------------------------------------------------
def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_builds(out_root: Path, name: str) -> None:
    """Clear what a killed conversion of ``name`` left (its process is gone; a live one's are left
    alone): ``.<name>.tmp-<pid>-*`` folders are deleted; a ``.<name>.old-<pid>-*`` folder (the
    previous dataset, moved aside where no atomic exchange exists) is put back when nothing took
    its place, else deleted."""
    if not out_root.is_dir():
        return
    pattern = re.compile(rf"^\.{re.escape(name)}\.(tmp|old)-(\d+)-[0-9a-f]+$")
    for p in sorted(out_root.iterdir()):
        m = pattern.match(p.name)
        if not m or p.is_symlink() or not p.is_dir() or _pid_alive(int(m.group(2))):
            continue
        final = out_root / name
        if m.group(1) == "old" and not final.exists() and not final.is_symlink():
            os.rename(p, final)
        else:
            shutil.rmtree(p, ignore_errors=True)


def is_converted(path: Path) -> bool:
    """Whether ``path`` is a dataset folder a converter may replace (it has ``meta.json``)."""
    return not path.is_symlink() and path.is_dir() and (path / "meta.json").is_file()


# -- one dataset being written --------------------------------------------------------------------
_OPEN: list["Conversion"] = []  # unfinished conversions of this process, aborted on failure
_WORKERS = max(1, min(8, (os.cpu_count() or 1)))


def workers() -> int:
    """Threads that read and write samples (``ICL_CONVERT_WORKERS``, default: the CPU count, at most 8)."""
    count: int = env_number("ICL_CONVERT_WORKERS", _WORKERS)
    return count


class Progress:
    """A one-line progress report on stderr (redrawn in place on a terminal, a line per 10% else)."""

    def __init__(self, name: str, total: int | None):
        self.name, self.total, self.done = name, total, 0
        self.tty = sys.stderr.isatty()
        self._last = 0.0
        self._decile = 0
        self.start = time.monotonic()

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.tty and now - self._last >= 0.2:
            self._last = now
            sys.stderr.write(f"\r{self._line(now)}")
            sys.stderr.flush()
        elif not self.tty and self.total:
            decile = 10 * self.done // self.total
            if decile > self._decile:
                self._decile = decile
                sys.stderr.write(self._line(now) + "\n")

    def close(self) -> None:
        if self.tty and self.done:
            sys.stderr.write(f"\r{self._line(time.monotonic())}\n")

    def _line(self, now: float) -> str:
        rate = self.done / max(now - self.start, 1e-9)
        of = f"/{self.total}" if self.total else ""
        return f"{self.name}: {self.done}{of} samples ({rate:.1f}/s)"


class Conversion:
    """One dataset written into ``out_root/.<name>.tmp-<pid>-<random>`` and renamed to
    ``out_root/<name>`` by :meth:`finish` (see the module docstring). ``paper``: the paper's
    sample count, compared with the kept count in the report and by ``vibe --list``."""

    def __init__(self, out_root: Path, meta: DatasetMeta, raw_root: Path, converter: str,
                 settings: dict | None = None, paper: int | None = None):
        out_root = Path(out_root)
        self.final = out_root / meta.name
        if self.final.is_symlink() or (self.final.exists() and not is_converted(self.final)):
            raise ConvertError(f"{display_path(self.final)} exists and is not a dataset folder (no meta.json, or a "
                               "symbolic link): move it away first; nothing was changed")
        remove_stale_builds(out_root, meta.name)
        self.root = out_root / f".{meta.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.meta = meta
        self.raw_root = Path(raw_root)
        self.converter = converter
        self.settings = dict(settings or {})
        self.writer = DatasetWriter(self.root, meta)
        if paper is None:
            from icl.data.convert.outputs import PAPER_COUNTS

            paper = PAPER_COUNTS.get(meta.name)
        self.report = Report(meta.name, paper=paper)
        self._raw: dict[str, str] = {}
        self._ids: set[str] = set()
        self._lock = threading.Lock()
        self._pending: deque = deque()
        self._pool = ThreadPoolExecutor(workers(), thread_name_prefix=f"convert-{meta.name}")
        self.progress = Progress(meta.name, None)
        _OPEN.append(self)

    # -- bookkeeping ----------------------------------------------------------------------------
    def use(self, *paths: Path) -> None:
        """Record raw files read for the kept or dropped samples (hashed into the manifest)."""
        for p in paths:
            key = self._rel(p)
            with self._lock:
                if key in self._raw:
                    continue
            digest = sha256_file(confined(p))
            with self._lock:
                self._raw[key] = digest

    def expect(self, total: int) -> None:
        """The number of samples this conversion will see (for the progress line)."""
        self.progress.total = total

    def add(self, sid: str, image: np.ndarray, raw: tuple[Path, ...] = (), source: Path | None = None,
            **annotations: Any) -> None:
        """Write one kept sample (``DatasetWriter.add`` arguments); ``raw``: its source files;
        ``source``: the image file ``image`` was decoded from unchanged, so a JPEG source is kept
        as its own bytes (no re-encoding, same pixels when decoded). Written on the pool."""
        if sid in self._ids:  # the first keeps the id; the other is reported, never silently lost
            where = raw[0] if raw else (source if source is not None else Path(sid))
            self.bad(RawError(where, f"maps to the sample id {sid!r}, which an earlier sample already has"))
            return
        self._ids.add(sid)
        jpeg = None
        if source is not None and Path(source).suffix.lower() in _JPEG_SUFFIXES:
            jpeg = raw_bytes(source, 1 << 31)
        self._submit(self._write, sid, image, jpeg, raw, annotations)
        self.report.kept += 1
        self.progress.step()

    def _write(self, sid: str, image: np.ndarray, jpeg: bytes | None, raw: tuple[Path, ...],
               annotations: dict[str, Any]) -> None:
        self.writer.add(sid, image, image_jpeg=jpeg, **annotations)
        self.use(*raw)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> None:
        # bounded: at most 2 x workers samples in memory waiting to be written
        while len(self._pending) >= 2 * workers():
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(fn, *args))

    def drop(self, sid: str, reason: str, raw: tuple[Path, ...] = ()) -> None:
        """A sample the paper's filters remove, with the reason."""
        self.report.dropped[sid] = reason
        self.use(*raw)
        self.progress.step()

    def bad(self, err: RawError | BaseException, path: Path | None = None) -> None:
        """A raw file that cannot be used: reported by file, the sample skipped. Any other
        exception met while reading one sample counts the same (``path``: the file being read)."""
        if not isinstance(err, RawError):
            err = RawError(path if path is not None else "?", f"cannot read ({describe(err)})")
        self.report.bad[self._rel(err.path)] = err.message

    def adjusted(self, path: Path, how: str) -> None:
        """A raw file kept after fitting it (e.g. a mask resized to its image), with how."""
        self.report.adjusted[self._rel(path)] = how

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[tuple[T, R | BaseException]]:
        """``(item, fn(item))`` in the order of ``items``, computed on the pool with a bounded
        look-ahead; an exception raised by ``fn`` is returned in place of its result."""
        def safe(item: T) -> R | BaseException:
            try:
                return fn(item)
            except Exception as exc:  # contained: one sample's failure is that sample's
                return exc

        window: deque = deque()
        reader = ThreadPoolExecutor(workers(), thread_name_prefix=f"read-{self.meta.name}")
        try:
            for item in items:
                window.append((item, reader.submit(safe, item)))
                if len(window) >= 2 * workers():
                    item0, fut = window.popleft()
                    yield item0, fut.result()
            while window:
                item0, fut = window.popleft()
                yield item0, fut.result()
        finally:
            reader.shutdown(wait=True, cancel_futures=True)

    def ids(self) -> list[str]:
        """Kept sample ids, sorted."""
        return sorted(self._ids)

    def flush(self) -> None:
        """Wait until every kept sample is on disk (raises a write failure)."""
        while self._pending:
            self._pending.popleft().result()

    def set_meta(self, **changes: Any) -> None:
        """Change ``meta.json`` fields known only after the samples (e.g. a data-derived depth range)."""
        self.meta = replace(self.meta, **changes)
        self.writer.write_meta(self.meta)

    # -- completion -----------------------------------------------------------------------------
    def finish(self) -> Report:
        """Write the report and the completion manifest, then rename the folder into place
        (replacing the previous conversion atomically where the system can); returns the report."""
        self.flush()
        self._pool.shutdown(wait=True)
        self.progress.close()
        if self.report.kept == 0:
            self.abort()
            raise ConvertError(f"{self.meta.name}: no sample survived conversion ({self.report.summary()})")
        (self.root / REPORT).write_text(json.dumps(self.report.to_json(), indent=1, sort_keys=True) + "\n")
        outputs = {p.relative_to(self.root).as_posix(): sha256_file(p)
                   for p in sorted(self.root.rglob("*")) if p.is_file() and p.name != MANIFEST}
        manifest = {"format": MANIFEST_FORMAT, "complete": True, "converter": self.converter,
                    "converter_version": CONVERTER_VERSION, "dataset": self.meta.name, "version": self.meta.version,
                    "settings": self.settings, "raw_root": display_path(self.raw_root.resolve()),
                    "kept": self.report.kept, "paper": self.report.paper, "dropped": len(self.report.dropped),
                    "bad": len(self.report.bad), "raw_files": dict(sorted(self._raw.items())), "files": outputs}
        tmp_manifest = self.root / f"{MANIFEST}.tmp"
        with open(tmp_manifest, "w", encoding="utf-8") as f:
            f.write(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_manifest, self.root / MANIFEST)
        self._swap()
        from icl.data.digest import write_digest_cache

        write_digest_cache(self.final, outputs)
        if self in _OPEN:
            _OPEN.remove(self)
        return self.report

    def _swap(self) -> None:
        final, built = self.final, self.root
        if not final.exists():
            os.rename(built, final)
        elif not is_converted(final):
            self.abort()
            raise ConvertError(f"{display_path(final)} appeared and is not a dataset folder; nothing was changed")
        elif _exchange(built, final):
            shutil.rmtree(built, ignore_errors=True)  # now the previous conversion
        else:
            old = final.with_name(f".{self.meta.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            os.rename(final, old)
            os.rename(built, final)
            shutil.rmtree(old, ignore_errors=True)
        self.root = final

    def abort(self) -> None:
        """Discard the folder being built; the dataset under its final name is untouched."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.root != self.final and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        if self in _OPEN:
            _OPEN.remove(self)

    def _rel(self, path: Path | str) -> str:
        raw_real = Path(os.path.realpath(self.raw_root))
        p = Path(path)
        try:
            return display_path(Path(os.path.abspath(p)).relative_to(os.path.abspath(self.raw_root)).as_posix())
        except ValueError:
            pass
        try:
            return display_path(Path(os.path.realpath(p)).relative_to(raw_real).as_posix())
        except ValueError:
            return display_path(path)


def abort_open() -> None:
    """Discard every unfinished conversion of this process (after a failure)."""
    for conv in list(_OPEN):
        conv.abort()
