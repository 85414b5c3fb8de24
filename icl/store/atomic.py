"""Files written whole or not at all: a unique temporary name in the same folder, then ``os.replace``.

Every file the runner and the shared report code write goes through here (tables,
results.json, report.md, plots, images); files a benchmark writes with a writer of its own are
written into a private staging folder and moved into place with ``os.replace``
(:func:`icl.run.outputs.files.staged`). So no output follows a link. A kill at any moment leaves either the previous file or
the new one, never a truncated one, and two writers never share a temporary name
(``tempfile.mkstemp``: created with ``O_EXCL``, never through a link planted under its name).
``os.replace`` swaps the directory entry, so a symbolic link planted under an output's name is
replaced by the file and its target is never written. Temporary files are named
``.<name>.icl-<8 random hex digits>.tmp``; one left by a killed writer is removed by
:func:`remove_stale_temporaries` when the next run takes the folder's lock. The data is fsynced
before the rename (``durable=False`` skips that for scratch files). A write that fails for a
reason the user must fix (read-only filesystem, no permission, disk full, quota, file size
limit) raises :class:`OutputWriteError`, one clear line naming the path and what to do; the
temporary file is removed and the previous file is left as it was. (A file size limit
delivers SIGXFSZ, which kills the process unless it is ignored; a runner that wants the clear
error ignores that signal.)
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

EXIT_CODE = 2
_TMP_MARK = ".icl-"
#: prefix of the staging folders of :func:`icl.run.outputs.files.staged` (``tempfile.mkdtemp`` names)
STAGING_PREFIX = ".icl-staging-"
# this writer's temporaries, and the fixed ``<name>.tmp.png`` names of earlier versions
_STALE = re.compile(r"^\..+\.icl-[a-z0-9_]{8}\.tmp$|^.+\.tmp\.png$")
_STALE_FOLDER = re.compile(r"^\.icl-staging-[a-z0-9_]{8}$")
_ADVICE = {
    errno.EROFS: ("the filesystem is read-only", "choose an output folder on a writable filesystem"),
    errno.EACCES: ("permission denied", "fix the folder's permissions or choose another output folder"),
    errno.EPERM: ("operation not permitted", "fix the folder's permissions or choose another output folder"),
    errno.ENOSPC: ("no space left on the device", "free some space or choose another output folder, then rerun "
                                                  "(finished results are kept)"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or choose another output folder, then rerun "
                                          "(finished results are kept)"),
    errno.EFBIG: ("file too large (file size limit)", "raise the file size limit (ulimit -f) or write less, "
                                                      "then rerun (finished results are kept)"),
    errno.EIO: ("disk I/O error", "check the disk (free space, the file size limit ulimit -f, the device), then "
                                  "rerun (finished results are kept)"),
}


class OutputWriteError(OSError):
    """An output file cannot be written; ``str()`` is one line naming the path and the fix.
    ``exit_code`` is the CLI's exit status (2)."""

    exit_code = EXIT_CODE

    def __init__(self, path: Path, err: OSError) -> None:
        reason, advice = _ADVICE.get(err.errno or 0, (err.strerror or str(err), "check the output folder"))
        super().__init__(err.errno, f"cannot write {path}: {reason}; {advice}")
        self.path = path

    def __str__(self) -> str:
        return str(self.args[1])

    def __reduce__(self) -> tuple:  # a helper process's failed write comes back as this same line
        return (_rebuild_output_write_error, (self.errno, str(self), self.path))


def _rebuild_output_write_error(code: int, text: str, path: Path) -> OutputWriteError:
    err = OutputWriteError.__new__(OutputWriteError, code, text)
    OSError.__init__(err, code, text)
    err.path = path
    return err


def is_user_fixable(err: OSError) -> bool:
    """True for the errors :class:`OutputWriteError` explains (read-only, permissions, space, limits)."""
    return err.errno in _ADVICE


@contextmanager
def _translated(path: Path) -> Iterator[None]:
    try:
        yield
    except OutputWriteError:
        raise
    except OSError as exc:
        if is_user_fixable(exc):
            raise OutputWriteError(path, exc) from None
        raise


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", *, encoding: str = "utf-8", newline: Optional[str] = None,
                durable: bool = True) -> Iterator[Any]:
    """Open a temporary file beside ``path`` (``mode`` "w" text or "wb" bytes); on a clean exit
    of the block it replaces ``path``, on an exception it is removed and ``path`` is untouched.
    The new file gets the permissions a plain ``open`` would give (0666 less the umask)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    with _translated(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}{_TMP_MARK}", suffix=".tmp")
    try:
        with _translated(path):
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
            f: Any = (os.fdopen(fd, "wb") if mode == "wb"
                      else os.fdopen(fd, "w", encoding=encoding, newline=newline))
        try:
            with _translated(path):
                yield f
                f.flush()
                if durable:
                    os.fsync(f.fileno())
                f.close()
        except BaseException:
            # closing flushes what is still buffered; on a full disk that fails again, and its
            # bare OSError (no file name) must not hide the error that named the file
            try:
                f.close()
            except OSError:
                pass
            raise
        with _translated(path):
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename itself is atomic
    finally:
        os.close(fd)


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Remove the temporary files a killed writer left anywhere under ``folder`` (regular files
    named as :func:`atomic_open` names them, and staging folders; links are not followed);
    returns them. Call it only while holding the folder's lock, so no writer of it is running."""
    removed = []
    for root, dirs, names in os.walk(folder):  # os.walk does not descend into linked folders
        for name in [d for d in dirs if _STALE_FOLDER.match(d)]:
            p = Path(root) / name
            dirs.remove(name)
            if not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        for name in names:
            if not _STALE.match(name):
                continue
            p = Path(root) / name
            try:
                if stat.S_ISREG(os.lstat(p).st_mode):
                    p.unlink()
                    removed.append(p)
            except FileNotFoundError:
                pass
    return removed


def write_bytes(path: str | Path, data: bytes, *, durable: bool = True) -> Path:
    """Atomically write ``data`` to ``path``."""
    with atomic_open(path, "wb", durable=durable) as f:
        f.write(data)
    return Path(path)


def write_text(path: str | Path, text: str, *, encoding: str = "utf-8", durable: bool = True) -> Path:
    """Atomically write ``text`` to ``path``."""
    with atomic_open(path, "w", encoding=encoding, durable=durable) as f:
        f.write(text)
    return Path(path)


def write_json(path: str | Path, obj: Any, *, indent: Optional[int] = 2, durable: bool = True, **kwargs: Any) -> Path:
    """Atomically write ``obj`` as JSON (``json.dumps`` keywords pass through), with a final newline.
    The text is built first, so a value JSON cannot encode leaves ``path`` untouched."""
    text = json.dumps(obj, indent=indent, **kwargs) + "\n"
    return write_text(path, text, durable=durable)


def write_csv(path: str | Path, rows: Iterable[Sequence[Any]] | Iterable[dict], header: Optional[Sequence[str]] = None,
              *, durable: bool = True) -> Path:
    """Atomically write a CSV through the one table writer (:func:`icl._csv.csv_text`:
    formula-like text guarded, numpy scalars as numbers): ``rows`` are sequences (``header``
    optional) or dicts (``header`` is then the field order and required)."""
    from icl._csv import csv_text

    table: list[Any] = list(rows)
    if table and isinstance(table[0], dict) and header is None:
        raise ValueError("write_csv: dict rows need header (the field order)")
    return write_text(path, csv_text(table, header), durable=durable)
