"""An exclusive lock on a run's output folder, so two runs never share one.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``<folder>/.icl.lock``; the holder writes its pid,
command line, host and start time into that file. The kernel releases an flock when the
holder's file descriptor closes, including when the process is killed with SIGKILL, so a
crashed run never leaves a stale lock (the file itself stays; its content is only a hint of
who held it last). flock locks are per open file description: a second :class:`FolderLock`
on the same folder in the same process conflicts too. On network filesystems without flock
support the acquisition fails with :class:`LockError` rather than proceeding unlocked.

The lock file is opened with ``O_NOFOLLOW`` and must be a regular file with one link: a
symbolic link, hard link, FIFO or device planted under the lock's name is refused (exit 2)
and whatever it points to is left untouched (the holder record would otherwise truncate it).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

LOCK_NAME = ".icl.lock"
EXIT_CODE = 2


class LockError(RuntimeError):
    """The output folder cannot be locked. ``holder`` is what the holder recorded (pid,
    command, host, started) or None when unknown; ``exit_code`` is the CLI's exit status (2)."""

    exit_code = EXIT_CODE

    def __init__(self, folder: Path, message: str, holder: Optional[dict[str, Any]] = None) -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(message)


def _read_holder(path: Path) -> Optional[dict[str, Any]]:
    # the holder writes its record right after locking: retry briefly if it is still empty
    for _ in range(20):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        if text.strip():
            try:
                info = json.loads(text)
            except ValueError:
                return None
            return info if isinstance(info, dict) else None
        time.sleep(0.01)
    return None


class FolderLock:
    """Exclusive lock on ``folder`` (created if needed). Use as a context manager, or call
    :meth:`acquire` / :meth:`release`. ``command``: what to record (default ``sys.argv``)."""

    def __init__(self, folder: str | Path, command: Optional[Sequence[str]] = None) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.command = list(sys.argv if command is None else command)
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "FolderLock":
        """Take the lock or raise :class:`LockError` naming the holder's pid."""
        if self._fd is not None:
            return self
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # O_NONBLOCK: a FIFO under the lock's name must not block the open (refused below)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise self._open_error(exc, " (the link's target was not touched)") from None
        refused = self._not_a_plain_file(fd, " (nothing was changed)")
        if refused is not None:
            os.close(fd)
            raise refused
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise self._flock_error(exc) from None
        record = json.dumps({"pid": os.getpid(), "command": self.command, "host": socket.gethostname(),
                             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n"
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, record.encode("utf-8", "backslashreplace"), 0)
        except OSError:
            pass  # the record is a hint for others' messages; the lock itself is held
        self._fd = fd
        return self

    # the refusals acquire() raises and probe() returns (acquire adds what it left untouched)
    def _open_error(self, exc: OSError, untouched: str = "") -> LockError:
        if exc.errno == errno.ELOOP:
            return LockError(self.folder, f"cannot lock output folder {self.folder}: its lock file {self.path} is a "
                                          f"symbolic link; icl never writes through links{untouched}: remove the link "
                                          f"or choose another output folder")
        return LockError(self.folder, f"cannot lock output folder {self.folder}: {exc.strerror or exc} "
                                      f"({self.path}); check the path and its permissions")

    def _not_a_plain_file(self, fd: int, untouched: str = "") -> Optional[LockError]:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            return None
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else f"a file with {st.st_nlink} hard links"
        return LockError(self.folder, f"cannot lock output folder {self.folder}: its lock file {self.path} is "
                                      f"{what}; icl never writes through links{untouched}: remove it or choose "
                                      f"another output folder")

    def _flock_error(self, exc: OSError) -> LockError:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return self._in_use()
        return LockError(self.folder, f"cannot lock output folder {self.folder}: {exc.strerror or exc}; "
                                      f"the filesystem may not support locks (use a local folder)")

    def _in_use(self) -> LockError:
        """The error of a folder another process holds, naming it (its record in the lock file)."""
        holder = _read_holder(self.path)
        who = (f"process {holder.get('pid')} ({' '.join(map(str, holder.get('command', [])))[:200]}, "
               f"on {holder.get('host')}, since {holder.get('started')})" if holder else "another process")
        return LockError(self.folder, f"output folder {self.folder} is in use by {who}; wait for that run "
                                      f"to finish, or choose another output folder", holder)

    def probe(self) -> Optional[LockError]:
        """Whether the folder could be locked now, without locking it or writing anything (``--check``):
        None when no process holds the lock (or there is no lock file yet), else the
        :class:`LockError` :meth:`acquire` would raise, naming the holder."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return self._open_error(exc)
        try:
            refused = self._not_a_plain_file(fd)
            if refused is not None:
                return refused
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                return self._flock_error(exc)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def release(self) -> None:
        """Release the lock (closing the descriptor drops the flock)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
