"""A dataset's content digest: SHA-256 over every file a benchmark reads (path and content), so
that a result computed on one content is never reused for another (an edited image with the
same ``version`` changes it).

Hashing a dataset on every run would cost seconds, so the per-file digests are cached in
``$ICL_CACHE/datasets/<SHA-256 of the folder's real path>.json`` (default ``~/.cache/icl``; never
inside the dataset, which stays as written), keyed by each file's inode, size, mtime and ctime: a
file whose record differs is hashed again (a user cannot set ctime back, so an edited file
always is). A converter writes the cache as it finishes (it has just hashed every output for its
manifest). Where the cache folder is not writable the cache lives only for the process.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import uuid
from pathlib import Path
from typing import Any

# files that describe the dataset rather than being read as its content
_NOT_CONTENT = {"manifest.json", "convert-report.json"}
_memory: dict[str, dict[str, list]] = {}
_lock = threading.Lock()


def _key(st: os.stat_result) -> list:
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _content_files(root: Path) -> list[tuple[str, Path, os.stat_result]]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name in _NOT_CONTENT or name.startswith("."):
                continue
            path = Path(dirpath) / name
            try:
                st = os.stat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):  # a FIFO or device is never opened
                found.append((path.relative_to(root).as_posix(), path, st))
    return sorted(found, key=lambda t: os.fsencode(t[0]))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def cache_path(root: str | Path) -> Path:
    """Where the per-file digests of dataset folder ``root`` are cached."""
    base = os.environ.get("ICL_CACHE")
    key = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:32]
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "icl") / "datasets" / f"{key}.json"


def _load_cache(root: Path) -> dict[str, list]:
    try:
        with open(cache_path(root), "rb") as f:
            data = json.loads(f.read(64 << 20))
        return {k: v for k, v in data.get("files", {}).items() if isinstance(v, list) and len(v) == 5}
    except (OSError, ValueError, AttributeError):
        return {}


def _save_cache(root: Path, files: dict[str, list]) -> None:
    target = cache_path(root)
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": "icl-digests/1", "root": os.fsdecode(os.path.realpath(root)), "files": files}, f,
                      sort_keys=True)
        os.replace(tmp, target)
    except OSError:  # an unwritable cache folder: the cache stays in memory
        try:
            os.unlink(tmp)
        except OSError:
            pass


def write_digest_cache(root: Path, digests: dict[str, str]) -> None:
    """Record the SHA-256 already computed for files of ``root`` (relative path -> hex), at the
    folder's final place (renaming a folder keeps its files' inode and ctime)."""
    root = Path(root)
    files: dict[str, list] = {}
    for rel, sha in digests.items():
        if Path(rel).name in _NOT_CONTENT:
            continue
        try:
            files[rel] = _key(os.stat(root / rel)) + [sha]
        except OSError:
            continue
    _save_cache(root, files)


def content_digest(root: str | Path) -> str:
    """SHA-256 (hex) over the sorted ``(relative path, file SHA-256)`` of every regular content
    file under ``root`` (hidden files and the manifest, report and cache excluded)."""
    root = Path(root)
    real = os.path.realpath(root)
    with _lock:
        cache = dict(_memory.get(real) or _load_cache(root))
    files, changed = {}, False
    h = hashlib.sha256()
    for rel, path, st in _content_files(root):
        hit = cache.get(rel)
        if hit is not None and hit[:4] == _key(st):
            sha = hit[4]
        else:
            sha, changed = _sha256(path), True
        files[rel] = _key(st) + [sha]
        h.update(os.fsencode(rel) + b"\t" + sha.encode() + b"\n")
    if changed or len(files) != len(cache):
        _save_cache(root, files)
    with _lock:
        _memory[real] = files
    return h.hexdigest()


def manifest_summary(root: str | Path) -> dict[str, Any] | None:
    """The completion manifest of a converted dataset (``complete`` true and naming this
    folder's dataset), or None when there is none or it is incomplete or unreadable."""
    path = Path(root) / "manifest.json"
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > (256 << 20):
            return None
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("complete") is not True:
        return None
    if data.get("dataset") != Path(root).name:
        return None
    return data
