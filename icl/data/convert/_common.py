"""What every converter shares: the confined raw-file opener, raw readers that name the bad
file, the writer of one dataset (built in a temporary sibling folder, renamed into place with a
completion manifest only when complete), its filter report, and sample-id hygiene.

A converter walks the raw release one sample at a time (bounded memory; :meth:`Conversion.map`
reads samples on a small thread pool), hands each kept sample to :meth:`Conversion.add`, each
filtered one to :meth:`Conversion.drop` with the reason, and each unreadable or inconsistent raw
file to :meth:`Conversion.bad`; then :meth:`Conversion.finish` writes ``convert-report.json``
(kept against the paper's count, what the filters removed and why, which raw files were
skipped) and ``manifest.json`` (the completion marker: counts and the SHA-256 of every raw file
read and every file written) and renames the folder into place. Until then the dataset under
its final name is the previous good one (or absent): a failed or killed conversion changes
nothing there.

Raw files are opened through :func:`confined`: a path must stay inside the raw folder once
symbolic links are resolved (no absolute path, no ``..`` from an annotation, no link out), and
must be a regular file (a FIFO or device would hang or never end). Declared sizes are checked
before anything is allocated (:data:`RAW_JSON_MAX_BYTES`, :data:`RAW_ARRAY_MAX_BYTES`, the image
pixel cap of :mod:`icl.data.images`). Messages name the file and what was wrong, never the file's
contents.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import stat
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

from icl.data.dataset import DatasetMeta
from icl.data.images import ImageError, decode_image, display_path
from icl.data.writer import DatasetWriter

CONVERTER_VERSION = "convert-2"  # 2: temp-folder build, completion manifest, JPEG sources kept as JPEG
REPORT = "convert-report.json"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "icl-convert-manifest/1"
RAW_JSON_MAX_BYTES = 1 << 30  # AP-10K's largest annotation file is ~60 MB
# one array read whole (a NIfTI volume, a .mat variable, a depth TIFF): IXI's are ~80 MB as float64,
# Duke's ~200 MB; a 4 MB .mat declaring 4.4 GB is refused. ICL_CONVERT_MAX_ARRAY_BYTES changes it.
RAW_ARRAY_MAX_BYTES = 2 << 30
SHORTFALL_WARN = 0.01  # kept more than 1% below the paper's count: a warning
_BAD_ID = re.compile(r"[^A-Za-z0-9._-]")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|b'[^']*'")
_JPEG_SUFFIXES = (".jpg", ".jpeg")

T = TypeVar("T")
R = TypeVar("R")


class ConvertError(Exception):
    """The raw release does not have the layout the converter reads (names what is missing)."""


class UnsafeOutput(ConvertError):
    """OUT_DIR equals, contains or lies inside RAW_DIR: converting would write into the release."""


class RawError(Exception):
    """One raw file is corrupt, missing or disagrees with its partner; the sample is skipped."""

    def __init__(self, path: str | Path, message: str):
        self.path = display_path(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")


def describe(exc: BaseException) -> str:
    """An unexpected exception as a one-line reason that quotes nothing from the file: quoted
    strings (where parsers put the offending text) are elided."""
    text = _QUOTED.sub("'...'", str(exc)).replace("\n", " ")[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def sample_id(*parts: str) -> str:
    """A valid sample id (``[A-Za-z0-9][A-Za-z0-9._-]*``) from raw name parts joined by ``_``
    (a name part that is not UTF-8 keeps its escaped bytes as ``-``)."""
    sid = _BAD_ID.sub("-", "_".join(display_path(p) for p in parts)).lstrip("._-")
    if not sid:
        raise ValueError(f"no usable characters for a sample id in {parts!r}")
    return sid


# -- the confined opener ------------------------------------------------------------------------
_RAW_ROOT: list[Path] = []  # the raw folder of the conversion in progress (set by convert())


class raw_root_set:
    """``with raw_root_set(raw):`` confines every raw read of the block to ``raw``."""

    def __init__(self, raw: Path):
        self.raw = Path(os.path.realpath(raw))

    def __enter__(self) -> Path:
        _RAW_ROOT.append(self.raw)
        return self.raw

    def __exit__(self, *exc: Any) -> None:
        _RAW_ROOT.pop()


def raw_join(base: Path, rel: str, source: Path) -> Path:
    """``base / rel`` for a path written inside an annotation file (``source``): refused when
    absolute, holding ``..``, or empty."""
    text = str(rel)
    parts = text.replace("\\", "/").split("/")
    if not text or text.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", text) or ".." in parts:
        raise RawError(source, "names a file outside the release (an absolute path or '..'); skipped")
    return base / text


def confined(path: Path) -> Path:
    """``path`` when it is a regular file inside the raw folder of the conversion in progress,
    symbolic links resolved; else :class:`RawError` (missing, outside, or not a regular file)."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    if _RAW_ROOT:
        root = _RAW_ROOT[-1]
        if real != root and root not in real.parents:
            raise RawError(path, "lies outside the raw folder (a symbolic link or path leading out); skipped")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise RawError(path, "missing file") from None
    except OSError as exc:
        raise RawError(path, f"cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise RawError(path, "not a regular file (a folder, FIFO or device); skipped")
    return real


def raw_bytes(path: Path, cap: int) -> bytes:
    """The bytes of a confined raw file, refused above ``cap`` bytes before reading."""
    real = confined(path)
    size = os.stat(real).st_size
    if size > cap:
        raise RawError(path, f"is {size:,} bytes, over the limit of {cap:,} for this kind of file")
    with open(real, "rb") as f:
        return f.read(cap + 1)


def max_array_bytes() -> int:
    """The cap on one raw array: ``ICL_CONVERT_MAX_ARRAY_BYTES`` when set, else :data:`RAW_ARRAY_MAX_BYTES`."""
    raw = os.environ.get("ICL_CONVERT_MAX_ARRAY_BYTES", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else RAW_ARRAY_MAX_BYTES


def check_declared(path: Path | str, shape: Iterable[int], itemsize: int, what: str, cap: int | None = None) -> None:
    """:class:`RawError` when an array's declared shape needs more than ``cap`` bytes
    (default :func:`max_array_bytes`)."""
    cap = max_array_bytes() if cap is None else cap
    dims = [int(d) for d in shape]
    total = itemsize
    for d in dims:
        if d < 0:
            raise RawError(path, f"{what} declares a negative dimension {dims}")
        total *= d
    if total > cap:
        raise RawError(path, f"{what} declares shape {dims} ({total:,} bytes), over the limit of {cap:,} "
                             "(ICL_CONVERT_MAX_ARRAY_BYTES)")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def need(path: Path, what: str) -> Path:
    """``path`` when it exists, else a :class:`ConvertError` naming it and what it should hold."""
    if not path.exists():
        raise ConvertError(f"missing {what}: expected {display_path(path)}")
    return path


def _decode8(path: Path, what: str) -> np.ndarray:
    """OpenCV's array of a confined image file, 16-bit scaled to 8 (by 1/257); decoded in memory
    after the header cap and the completeness check (a truncated JPEG is a bad file, not grey)."""
    real = confined(path)
    try:
        img = decode_image(real)
    except ImageError as exc:
        raise RawError(path, str(exc).removeprefix(exc.path + ": ")) from None
    if img.dtype == np.uint16:
        img = ((img.astype(np.uint32) + 128) // 257).astype(np.uint8)
    if img.dtype != np.uint8:
        raise RawError(path, f"expected an 8- or 16-bit {what}, got {img.dtype}")
    return img


def read_image(path: Path) -> np.ndarray:
    """8-bit (or 16-bit, scaled by 1/257) image file -> uint8 [H, W, 3] RGB; grey replicated."""
    import cv2

    img = _decode8(path, "image")
    if img.ndim == 2:
        return np.ascontiguousarray(np.repeat(img[:, :, None], 3, axis=2))
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise RawError(path, f"expected 1, 3 or 4 channels, got shape {img.shape}")
    return np.ascontiguousarray(cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2RGB))


def read_grey(path: Path) -> np.ndarray:
    """A single-channel image file (a mask) -> uint8 [H, W] (colour converted to grey)."""
    import cv2

    img = _decode8(path, "mask")
    return cv2.cvtColor(img[:, :, :3], cv2.COLOR_BGR2GRAY) if img.ndim == 3 else img


def read_label_png(path: Path) -> np.ndarray:
    """Class-index PNG -> integer [H, W]: the palette indices of a palette ("P") PNG, the values
    of a grey one (PIL, since OpenCV turns palette PNGs into colours). Size-capped and checked
    for truncation from the header first."""
    import io

    from PIL import Image

    from icl.data.images import check_complete, check_size, read_header

    real = confined(path)
    try:
        header = read_header(real)
        check_size(header, real)
        data = raw_bytes(path, 1 << 31)
        check_complete(data, header.format, real)
    except ImageError as exc:
        raise RawError(path, str(exc).removeprefix(exc.path + ": ")) from None
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.mode not in ("P", "L", "I", "I;16"):
                raise RawError(path, f"expected a palette or grey label PNG, got mode {im.mode}")
            return np.asarray(im).astype(np.int64)
    except RawError:
        raise
    except Exception as exc:  # PIL raises many types on a hostile file
        raise RawError(path, f"cannot decode label image ({describe(exc)})") from None


def read_json(path: Path, cap: int = RAW_JSON_MAX_BYTES) -> Any:
    """A JSON file (at most ``cap`` bytes), or :class:`RawError` naming it."""
    data = raw_bytes(path, cap)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise RawError(path, "cannot read JSON (not UTF-8 text)") from None
    except (ValueError, RecursionError) as exc:
        raise RawError(path, f"cannot read JSON ({describe(exc)})") from None


def read_text(path: Path, cap: int = RAW_JSON_MAX_BYTES) -> str:
    """A UTF-8 text file (at most ``cap`` bytes), or :class:`RawError` naming it."""
    try:
        return raw_bytes(path, cap).decode("utf-8")
    except UnicodeDecodeError:
        raise RawError(path, "not UTF-8 text") from None


def same_size(path: Path, got: tuple[int, ...], image: tuple[int, ...], what: str) -> None:
    """:class:`RawError` when an annotation's (h, w) differs from its image's."""
    if tuple(got[:2]) != tuple(image[:2]):
        raise RawError(path, f"{what} is {got[1]}x{got[0]} but its image is {image[1]}x{image[0]}")


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
    """Delete ``.<name>.tmp-<pid>-*`` / ``.<name>.old-<pid>-*`` folders left by a killed
    conversion (their process is gone); a live one's are left alone."""
    if not out_root.is_dir():
        return
    pattern = re.compile(rf"^\.{re.escape(name)}\.(tmp|old)-(\d+)-[0-9a-f]+$")
    for p in out_root.iterdir():
        m = pattern.match(p.name)
        if m and not p.is_symlink() and p.is_dir() and not _pid_alive(int(m.group(2))):
            shutil.rmtree(p, ignore_errors=True)


def is_converted(path: Path) -> bool:
    """Whether ``path`` is a dataset folder a converter may replace (it has ``meta.json``)."""
    return not path.is_symlink() and path.is_dir() and (path / "meta.json").is_file()


# -- one dataset being written --------------------------------------------------------------------
_OPEN: list["Conversion"] = []  # unfinished conversions of this process, aborted on failure
_WORKERS = max(1, min(8, (os.cpu_count() or 1)))


def workers() -> int:
    """Threads that read and write samples (``ICL_CONVERT_WORKERS``, default: the CPU count, at most 8)."""
    raw = os.environ.get("ICL_CONVERT_WORKERS", "").strip()
    return max(1, int(raw)) if raw.isdigit() else _WORKERS


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
            from icl.data.convert import PAPER_COUNTS

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
        from icl.data.digest import write_digest_cache

        write_digest_cache(self.root, outputs)
        tmp_manifest = self.root / f"{MANIFEST}.tmp"
        with open(tmp_manifest, "w", encoding="utf-8") as f:
            f.write(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_manifest, self.root / MANIFEST)
        self._swap()
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
