"""Model weights from the Hugging Face Hub: ``weights=hf:ORG/NAME[@REVISION][/SUBPATH]``.

Grammar (:func:`parse_ref` is the only parser)::

    hf:ORG/NAME[@REVISION][/SUBPATH]

- ``ORG`` and ``NAME``: the repository id, each a Hub name (letters, digits, ``-``, ``_``, ``.``;
  starting and ending with a letter or digit; no ``--`` or ``..``).
- ``REVISION`` (default ``main``): a branch, a tag or a 40-hex commit. It ends at the first
  ``/``; a ``/`` inside a revision (``refs/pr/1``) is written ``%2F``; no empty, ``.`` or
  ``..`` part, no control character (:func:`check_revision`, also ``icl.data fetch --revision``).
- ``SUBPATH``: a folder or a file inside the repository (``llm``, ``unet``,
  ``painter_vit_large.pth``), ``/``-separated, without empty, ``.`` or ``..`` parts.

:func:`resolve` asks the Hub (the ``huggingface_hub`` client's API) which commit the revision
names, refuses anything but 40 lowercase hex digits, lists the files at that commit (refusing a
path that leaves the repository), and downloads by that commit into the user's standard cache
(``HF_HUB_CACHE``, else ``HF_HOME/hub``, the client's layout), only the files the family needs
(``allow_patterns``: by default configurations, tokenizers, processors, chat templates and
``*.safetensors``; pickles only when the family names the file). Every file is hashed against
the listing before it enters the cache (configurations included); a transfer below a minimum
rate, past a total time or broken too often is given up with one line (:class:`DownloadLimits`),
and SIGTERM / Ctrl-C stop it. It honours ``HF_HUB_OFFLINE`` (from the cache only) and
``HF_TOKEN`` (read by the client, never by icl), refuses a repository whose configuration has
``auto_map`` (its own code; icl never sets ``trust_remote_code``), and returns the snapshot
folder with the resolved commit and the file list: the model's identity
(``icl.models.weights.weight_identity``) records the commit, never a branch name, so a moved
branch is another model, and a snapshot is never re-hashed (the commit names its content).
:func:`verify_cached` tells whether a cached file is still the one published (``--prefetch``
for every file, ``--check`` for the small ones: :func:`verify_snapshot`).

A reference is resolved once per run (:func:`forget` starts a run afresh): the commit the
identity records is the commit the model loads, even if the branch moves meanwhile.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import replace as dataclasses_replace
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union
from urllib.parse import unquote

from icl._parse import env_bool, env_number
from icl.models.errors import WeightsError

PREFIX = "hf:"
DEFAULT_REVISION = "main"
# What a transformers or diffusers folder needs to load: never *.bin / *.pt / *.ckpt pickles
# (a family that loads one names the file, which is then added).
DEFAULT_PATTERNS = ("*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken")
# A diffusers pipeline: its components' folders only (the root of SD repositories also holds
# multi-GB single-file checkpoints the pipeline never reads).
DIFFUSERS_PATTERNS = ("model_index.json", "*/*.json", "*/*.safetensors", "*/*.txt", "*/*.model", "*/*.jinja")
# Precision and EMA variants beside the default files: from_pretrained without ``variant`` reads
# neither, so they are never downloaded.
IGNORE_PATTERNS = ("*.fp16.*", "*.bf16.*", "*.non_ema.*", "*.ema.*")
# Files whose ``auto_map`` would point transformers at code inside the repository.
# (model_index.json: a diffusers pipeline whose components name a module of the repository.)
CODE_CONFIGS = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json",
                "image_processor_config.json", "video_preprocessor_config.json", "model_index.json")

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REF = re.compile(rf"hf:(?P<org>{_NAME})/(?P<name>{_NAME})(?:@(?P<rev>[^/]*))?(?:/(?P<sub>.*))?")
_REVISION = re.compile(r"[A-Za-z0-9._+-]+(?:/[A-Za-z0-9._+-]+)*")
COMMIT = re.compile(r"[0-9a-f]{40}")

#: the libraries a diffusers pipeline's components may come from (model_index.json); any other
#: module is a checkpoint's own code, never imported
PIPELINE_LIBRARIES = ("diffusers", "transformers")


class HubError(WeightsError):
    """A ``hf:`` reference that is malformed, cannot be resolved, or is refused (one line)."""


class HubUnreachable(HubError):
    """The Hub did not answer at all (no connection, a timeout): what the cache holds may serve."""


class HubNotCached(HubError):
    """Offline (or the Hub unreachable), the files are not in the Hugging Face cache yet: a
    download (``--prefetch`` where the network is reachable) fetches them. ``missing``: what a
    cached snapshot lacks (None: nothing of the revision is cached)."""

    def __init__(self, message: str, missing: Optional[str] = None) -> None:
        super().__init__(message)
        self.missing = missing


class HubCacheDamaged(HubError):
    """A file in the Hugging Face cache whose content is not the one published (its hash is
    wrong): ``--prefetch`` downloads it again."""


@dataclass(frozen=True)
class HubRef:
    """A parsed ``hf:`` reference (``revision`` None: ``main``; ``subpath`` "": the root)."""

    repo_id: str
    revision: Optional[str]
    subpath: str
    text: str

    @property
    def pinned(self) -> bool:
        return self.revision is not None and COMMIT.fullmatch(self.revision) is not None

    def at(self, commit: str) -> str:
        """The reference pinned to ``commit`` (the canonical text the identity records)."""
        return f"{PREFIX}{self.repo_id}@{commit}" + (f"/{self.subpath}" if self.subpath else "")


@dataclass(frozen=True)
class HubSnapshot:
    """A resolved reference: the cache's snapshot folder, its commit, and the files of the
    repository (``/``-separated, relative to its root) the family's patterns selected."""

    ref: HubRef
    commit: str
    root: Path
    files: tuple[str, ...]

    @property
    def path(self) -> Path:
        """The folder or file ``SUBPATH`` names inside the snapshot (the root without one)."""
        return self.root / self.ref.subpath if self.ref.subpath else self.root

    @property
    def pinned(self) -> str:
        return self.ref.at(self.commit)

    def identity(self) -> dict[str, Any]:
        return dict(repo=self.ref.repo_id, commit=self.commit, subpath=self.ref.subpath, files=list(self.files))


def is_hub_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def parse_ref(text: str) -> HubRef:
    """``hf:ORG/NAME[@REVISION][/SUBPATH]`` -> :class:`HubRef`; :class:`HubError` names what is wrong."""
    grammar = "expected hf:ORG/NAME[@REVISION][/SUBPATH]"
    if not is_hub_ref(text):
        raise HubError(f"{text!r} is not a Hub reference ({grammar})")
    if text == DEFAULT:
        raise HubError(f"{text!r} stands for a family's official weights (expand_default) and is not "
                       f"a repository ({grammar})")
    m = _REF.fullmatch(text)
    if m is None:
        raise HubError(f"{text!r}: {grammar} (ORG and NAME: letters, digits, '-', '_', '.', "
                       f"starting and ending with a letter or digit)")
    org, name, rev, sub = m.group("org", "name", "rev", "sub")
    for part in (org, name):
        if "--" in part or ".." in part:
            raise HubError(f"{text!r}: {part!r} is not a Hub name ('--' and '..' are not allowed)")
    if rev is not None:
        if rev == "":
            raise HubError(f"{text!r}: empty revision after '@' ({grammar})")
        rev = unquote(rev)  # %2F: a '/' inside a revision
        check_revision(repr(text), rev)
    if sub is not None:
        parts = sub.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise HubError(f"{text!r}: subpath {sub!r} has an empty, '.' or '..' part")
    return HubRef(repo_id=f"{org}/{name}", revision=rev, subpath=sub or "", text=text)


# --- where the client looks --------------------------------------------------------------------
# huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE / HF_HOME and HF_HUB_OFFLINE once, when it is
# first imported (transformers imports it early); a variable the user sets later (a notebook, a
# test) is read here at each resolution and handed to the client explicitly. Unset: the client's
# own defaults.

def hf_flag(*names: str) -> Optional[bool]:
    """A boolean variable of Hugging Face's, read now by huggingface_hub's own rule
    (huggingface_hub/constants.py, 2.4: ``_is_true(os.environ.get(A) or os.environ.get(B))``, where
    ``_is_true`` is ``value.upper() in ENV_VARS_TRUE_VALUES`` = 1/ON/YES/TRUE; anything else, an
    unknown word included, is off, never an error), so icl and the client never disagree; None
    when none of ``names`` is set (the caller then takes what the client computed)."""
    from huggingface_hub import constants

    value: Optional[str] = None
    for name in names:
        value = value or os.environ.get(name)
    return None if value is None else value.upper() in constants.ENV_VARS_TRUE_VALUES


def offline() -> bool:
    from huggingface_hub import constants

    if _cache_only:
        return True
    flag = hf_flag("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    return constants.is_offline_mode() if flag is None else flag


_cache_only: list[str] = []  # why references resolve from the cache only, when not HF_HUB_OFFLINE (innermost last)


@contextmanager
def cache_only(reason: str) -> Iterator[None]:
    """References resolve from the cache only, and one that is not cached says ``reason`` as why
    (``--check``: "--check never downloads"), not the user's HF_HUB_OFFLINE."""
    _cache_only.append(reason)
    try:
        yield
    finally:
        _cache_only.pop()


def _offline_reason() -> str:
    """Why a reference resolves from the cache only, as the message of one not cached says it."""
    return f"({_cache_only[-1]})" if _cache_only else "and HF_HUB_OFFLINE is set"


def cache_dir() -> Path:
    from huggingface_hub import constants

    env = os.environ
    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not hub and env.get("HF_HOME"):
        hub = os.path.join(env["HF_HOME"], "hub")
    return Path(os.path.expandvars(os.path.expanduser(hub or constants.HF_HUB_CACHE)))


def endpoint() -> Optional[str]:
    value = os.environ.get("HF_ENDPOINT", "").rstrip("/")
    return value or None


# --- resolution --------------------------------------------------------------------------------
_lock = threading.Lock()
_resolved: dict[tuple[str, tuple[str, ...]], HubSnapshot] = {}  # (reference, patterns) -> snapshot


def forget() -> None:
    """Forget this process's resolutions: the next :func:`resolve` asks the Hub again (a run
    starts with it, so a moved branch is seen by the next run, never in the middle of one)."""
    with _lock:
        _resolved.clear()


def snapshot_of(path: Union[str, os.PathLike]) -> Optional[HubSnapshot]:
    """The resolved snapshot ``path`` is (or lies in), None for a path that came from no ``hf:``."""
    p = Path(path)
    with _lock:
        snaps = list(_resolved.values())
    for snap in reversed(snaps):  # the latest resolution of a folder wins
        if p == snap.path or snap.path in p.parents:
            return snap
    return None


def pinned(text: str) -> Optional[str]:
    """The pinned form (``hf:ORG/NAME@COMMIT[/SUBPATH]``) of a reference this run resolved."""
    with _lock:
        snaps = [s for (t, _), s in _resolved.items() if t == text]
    return snaps[-1].pinned if snaps else None


def resolved(pinned_text: str) -> HubSnapshot:
    """The snapshot this run resolved whose pinned reference is ``pinned_text``."""
    with _lock:
        snaps = [s for s in _resolved.values() if s.pinned == pinned_text]
    if not snaps:
        raise HubError(f"{pinned_text}: not resolved in this run")
    return snaps[-1]


def resolve(ref: Union[str, HubRef], patterns: Optional[Sequence[str]] = None,
            also: Sequence[str] = ()) -> HubSnapshot:
    """Download (or, offline, find in the cache) the files of ``ref`` matching ``patterns``
    (default :data:`DEFAULT_PATTERNS`) plus the names in ``also`` (the file the family loads),
    each relative to ``SUBPATH``. Raises :class:`HubError` (one line) when it cannot."""
    ref = parse_ref(ref) if isinstance(ref, str) else ref
    wanted = tuple(dict.fromkeys(tuple(patterns or DEFAULT_PATTERNS) + tuple(a for a in also if a)))
    key = (ref.text, wanted)
    with _lock:
        if key in _resolved:
            return _resolved[key]
    scope = (lambda p: f"{ref.subpath}/{p}") if ref.subpath else (lambda p: p)
    # SUBPATH may name a file: the bare SUBPATH pattern selects it (and nothing in a folder)
    allow = ([ref.subpath] if ref.subpath else []) + [scope(p) for p in wanted]
    configs = [scope(c) for c in CODE_CONFIGS]
    revision = ref.revision or DEFAULT_REVISION
    if offline():
        root, commit = cached_snapshot(ref.text, ref.repo_id, revision, "model", allow)
        _refuse_code(ref, root)
    else:
        # the commit first (40 hex or refused), then the listing at that commit (every path
        # confined, every hash well formed), the configurations (verified) checked for code before
        # any weight downloads, then the weights (space checked first, each verified)
        try:
            commit = resolve_commit(ref.text, ref.repo_id, revision, "model")
        except HubUnreachable as exc:  # no network (a compute node without HF_HUB_OFFLINE): the cache, as the client
            root, commit = cached_or(exc, ref.text, ref.repo_id, revision, "model", allow)
            _refuse_code(ref, root)
            return _remember(ref, key, root, commit, allow)
        listing = list_remote(ref.text, ref.repo_id, commit, "model")
        download(ref.text, ref.repo_id, "model", commit, listing, select(listing, configs))
        root = snapshot_folder(ref.repo_id, "model", commit)
        _refuse_code(ref, root)
        download(ref.text, ref.repo_id, "model", commit, listing, select(listing, allow))
        remember_revision(ref.repo_id, "model", revision, commit)
    return _remember(ref, key, root, commit, allow)


def _remember(ref: HubRef, key: tuple[str, tuple[str, ...]], root: Path, commit: str, allow: list[str]) -> HubSnapshot:
    files = _selected(root, allow)
    if not files:
        raise HubError(f"{ref.text} (commit {commit}): no file matches {', '.join(allow)}"
                       + (" in the cache" if offline() else ""))
    wanted = key[1]
    snap = HubSnapshot(ref=ref, commit=commit, root=root, files=files)
    with _lock:
        _resolved[key] = snap
        # the pinned text resolves to this snapshot too: an adapter re-resolving its pinned
        # reference (icl.run.planning.models.make_model pins it) asks the Hub nothing more in this process
        _resolved.setdefault((snap.pinned, wanted), snap)
    return snap


# --- the transfer: commit, listing, files ------------------------------------------------------
# icl drives the transfer itself with the client's pieces (HfApi for the commit and the listing,
# its HTTP session, headers and URLs): the client's snapshot_download names cache paths after
# what the server answers (the commit id, the ETag) before anything checks them, and reads a
# trickling body for as long as it lasts. Here every cache path is built from checked values
# only: the commit (40 hex), the listing's paths (confined) and hashes (hex), and every body is
# hashed before it enters the cache.

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def free_space(path: Path) -> int:
    """Free bytes on the disk holding ``path`` (its nearest existing folder). Tests replace it."""
    for p in (path, *path.parents):
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return 0


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repository's tree listing at a commit: its path, size and hash (``sha256``
    for an LFS file, else the git blob id ``oid``); ``blob``: its name in the cache's ``blobs/``
    (the Hub's ETag, which is that hash)."""

    path: str
    size: int
    sha256: Optional[str]
    oid: str

    @property
    def blob(self) -> str:
        return self.sha256 or self.oid


@dataclass(frozen=True)
class DownloadLimits:
    """When a transfer is given up (docs/models.md, "Downloads"): below ``min_rate`` bytes/s
    over the last ``window`` seconds, after ``total`` seconds for one file (0: no limit), or
    after ``tries`` broken connections for one file (each resumes where the last one stopped)."""

    min_rate: float = 16 * 1024
    window: float = 60.0
    total: float = 0.0
    tries: int = 4
    read_timeout: float = 30.0


LIMIT_VARS = {"ICL_DOWNLOAD_MIN_RATE": "min_rate", "ICL_DOWNLOAD_WINDOW": "window",
              "ICL_DOWNLOAD_TIMEOUT": "total", "ICL_DOWNLOAD_TRIES": "tries"}


def download_limits() -> DownloadLimits:
    """:class:`DownloadLimits` from the environment (:data:`LIMIT_VARS`), each unset one at its
    default; a value that is not a finite number >= 0 (``ICL_DOWNLOAD_WINDOW``: > 0,
    ``ICL_DOWNLOAD_TRIES``: an integer >= 1) is one line naming the variable (:class:`icl._parse.EnvError`)."""
    defaults = DownloadLimits()
    values = {field_name: env_number(var, getattr(defaults, field_name))
              for var, field_name in LIMIT_VARS.items()}
    limits = DownloadLimits(**values)
    return dataclasses_replace(limits, read_timeout=max(1.0, min(30.0, limits.window)))


def check_commit(label: str, repo_id: str, revision: str, commit: Any) -> str:
    """``commit`` as the Hub answered it for ``revision``, when it is 40 lowercase hex digits
    (the only value a cache path is ever named after); one line otherwise."""
    if isinstance(commit, str) and COMMIT.fullmatch(commit):
        return commit
    shown = repr(commit)[:80]
    raise HubError(f"{label}: the Hub answered commit {shown} for {repo_id}@{revision}, not 40 hex digits; "
                   f"refused (nothing was written)")


def check_revision(label: str, revision: str) -> str:
    """A revision (branch, tag, commit; ``/`` inside as in ``refs/pr/1``) with no empty, ``.``
    or ``..`` part and no control character: the one rule of :func:`parse_ref` and of
    ``icl.data fetch --revision``."""
    if not revision:
        raise HubError(f"{label}: empty revision")
    if _CONTROL.search(revision):
        raise HubError(f"{label}: revision {revision!r} has a control character")
    parts = revision.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise HubError(f"{label}: revision {revision!r} has an empty, '.' or '..' part")
    if _REVISION.fullmatch(revision) is None:
        raise HubError(f"{label}: revision {revision!r} is not a branch, tag or 40-hex commit")
    return revision


def check_repo_path(label: str, path: Any) -> str:
    """A file path of a listing: relative, ``/``-separated, no empty, ``.`` or ``..`` part, no
    backslash or control character (it names a file inside the snapshot folder, nothing else)."""
    if not isinstance(path, str) or not path:
        raise HubError(f"{label}: the Hub lists a file with no path ({path!r}); refused")
    if path.startswith("/") or "\\" in path or _CONTROL.search(path) or any(
            p in ("", ".", "..") for p in path.split("/")):
        raise HubError(f"{label}: the Hub lists the file {path!r}, a path outside the repository; refused")
    return path


def resolve_commit(label: str, repo_id: str, revision: str, repo_type: str) -> str:
    """The commit ``revision`` names on the Hub (``repo_info``), checked (:func:`check_commit`)."""
    from huggingface_hub import HfApi

    check_revision(label, revision)
    try:
        info = HfApi(endpoint=endpoint()).repo_info(repo_id, revision=revision, repo_type=repo_type)
    except Exception as exc:  # noqa: BLE001 - every failure: one line (_hub_failure names it)
        raise _hub_failure(label, repo_id, revision, repo_type, exc) from None
    commit = check_commit(label, repo_id, revision, getattr(info, "sha", None))
    if COMMIT.fullmatch(revision) and commit != revision:  # a pinned commit is that commit, whatever the answer
        raise HubError(f"{label}: the Hub answered commit {commit} for the pinned commit {revision} of {repo_id}; "
                       f"refused")
    return commit


def list_remote(label: str, repo_id: str, commit: str, repo_type: str) -> dict[str, RemoteFile]:
    """The files of ``repo_id`` at ``commit`` (the Hub's recursive tree listing), each path and
    hash checked; one line for a listing that cannot be read or names a path outside."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    try:
        tree = [f for f in HfApi(endpoint=endpoint()).list_repo_tree(repo_id, recursive=True, revision=commit,
                                                                     repo_type=repo_type)
                if isinstance(f, RepoFile)]
    except Exception as exc:  # noqa: BLE001
        raise _hub_failure(label, repo_id, commit, repo_type, exc, "list the files of") from None
    out: dict[str, RemoteFile] = {}
    for f in tree:
        path = check_repo_path(label, f.path)
        sha256 = f.lfs.sha256 if f.lfs else None
        size = f.size
        if (sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256))) or not (
                isinstance(f.blob_id, str) and COMMIT.fullmatch(f.blob_id)):
            raise HubError(f"{label}: the Hub lists {path} with a malformed hash; refused")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise HubError(f"{label}: the Hub lists {path} with size {size!r}; refused")
        out[path] = RemoteFile(path, size, sha256, f.blob_id)
    return out


def select(listing: dict[str, RemoteFile], allow: Sequence[str],
           ignore: Sequence[str] = IGNORE_PATTERNS) -> list[RemoteFile]:
    """The files of ``listing`` that ``allow`` selects and ``ignore`` does not."""
    from huggingface_hub.utils import filter_repo_objects

    chosen = filter_repo_objects(sorted(listing), allow_patterns=list(allow), ignore_patterns=list(ignore) or None)
    return [listing[p] for p in chosen]


def storage_folder(repo_id: str, repo_type: str) -> Path:
    """The cache's folder of a repository (``models--ORG--NAME``, ``datasets--ORG--NAME``)."""
    from huggingface_hub.file_download import repo_folder_name

    return cache_dir() / repo_folder_name(repo_id=repo_id, repo_type=repo_type)


def snapshot_folder(repo_id: str, repo_type: str, commit: str) -> Path:
    return storage_folder(repo_id, repo_type) / "snapshots" / commit


# verify every cached file against its hash (not only its size) before using it: --prefetch
# sets it (:func:`verifying`), so a file damaged in the cache is found and downloaded again
_verify_cached = threading.local()


@contextmanager
def verifying() -> Iterator[None]:
    """Inside the block, :func:`resolve` hashes every cached file it would use and downloads
    again the ones whose content does not match (``--prefetch``: repair the cache)."""
    before = getattr(_verify_cached, "on", False)
    _verify_cached.on = True
    try:
        yield
    finally:
        _verify_cached.on = before


def download(label: str, repo_id: str, repo_type: str, commit: str, listing: dict[str, RemoteFile],
             files: Sequence[RemoteFile]) -> Path:
    """Into the cache: each of ``files`` (from ``listing`` at ``commit``) whose blob is missing
    or damaged, verified, then linked into the snapshot folder, which is returned. The space the
    missing ones need is checked first; the listing is stored beside, as the client does, so
    the client finds the snapshot complete offline."""
    from icl._signals import stop_on_signals

    storage = storage_folder(repo_id, repo_type)
    root = storage / "snapshots" / commit
    blobs = storage / "blobs"
    deep = getattr(_verify_cached, "on", False)
    fresh: dict[str, RemoteFile] = {}
    for r in files:
        if _cached_problem(blobs / r.blob, r, deep) is not None:
            fresh.setdefault(r.blob, r)  # a blob shared by two paths downloads once
    need = sum(r.size for r in fresh.values())
    if need:
        free = free_space(storage)
        if free < need:
            big = max(fresh.values(), key=lambda r: r.size)
            files_text = f"{len(fresh)} files" if len(fresh) > 1 else "1 file"
            raise HubError(f"{label} (commit {commit}): {files_text} to download need {_mib(need)} "
                           f"(the largest, {big.path}, {_mib(big.size)}), the disk of {cache_dir()} has "
                           f"{_mib(free)} free; free space or set HF_HUB_CACHE elsewhere")
    limits = download_limits()
    locks = cache_dir() / ".locks" / storage.name  # where the client locks its blobs: one writer per blob
    with stop_on_signals():  # SIGTERM / Ctrl-C: the transfer stops (a second one at once)
        for r in fresh.values():
            _transfer_locked(label, repo_id, repo_type, commit, r, blobs / r.blob, limits, locks, deep)
    try:
        for r in files:
            _link(blobs / r.blob, root / r.path)
        _store_listing(storage, commit, listing)
    except OSError as exc:
        raise HubError(f"{label}: cannot write into {cache_dir()} ({type(exc).__name__}: {exc})") from None
    return root


def remember_revision(repo_id: str, repo_type: str, revision: str, commit: str) -> None:
    """``refs/REVISION`` -> ``commit`` in the cache (what the client reads offline), for a
    branch or tag (a commit needs none); the revision was checked (:func:`check_revision`)."""
    if revision == commit:
        return
    refs = storage_folder(repo_id, repo_type) / "refs"
    path = refs.joinpath(*revision.split("/"))
    if refs.resolve() not in path.resolve().parents:  # never outside refs/ (checked revision: never taken)
        raise HubError(f"revision {revision!r} would name a file outside {refs}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != commit:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(commit)
            os.replace(tmp, path)
    except OSError:
        pass  # the ref only spares an offline run the listing; a read-only cache still works by commit


def cached_snapshot(label: str, repo_id: str, revision: str, repo_type: str,
                    allow: Optional[Sequence[str]], ignore: Sequence[str] = IGNORE_PATTERNS) -> tuple[Path, str]:
    """Offline: the cached snapshot of ``revision`` and its commit (the client's own lookup,
    ``local_files_only``: ``refs/REVISION``, and the stored listing to tell a complete snapshot)."""
    from huggingface_hub import errors, snapshot_download

    check_revision(label, revision)
    try:
        root = Path(snapshot_download(repo_id, repo_type=repo_type, revision=revision,
                                      allow_patterns=list(allow) if allow else None,
                                      ignore_patterns=list(ignore) or None, cache_dir=cache_dir(),
                                      local_files_only=True))
    except errors.IncompleteSnapshotError as exc:
        # the client's message names the missing files ("N file(s) are missing (a, b, ...)")
        found = re.search(r"(\d+) file\(s\) are missing \((.*?)\)\.", str(exc))
        needs = "this release needs" if repo_type == "dataset" else "this model needs"
        missing = f"the cached snapshot (revision {revision}) lacks files {needs}" + (
            f": {found.group(1)} missing ({found.group(2)})" if found else "")
        raise HubNotCached(f"{label}: {missing} {_offline_reason()}; {_prefetch_hint()}", missing) from None
    except errors.LocalEntryNotFoundError:
        raise HubNotCached(f"{label}: not in the Hugging Face cache ({cache_dir()}) {_offline_reason()}; "
                           f"{_prefetch_hint()}") from None
    except (OSError, ValueError) as exc:
        raise HubError(f"{label}: cannot read the Hugging Face cache {cache_dir()} ({type(exc).__name__}: "
                       f"{_first_line(exc)})") from None
    commit = root.name
    if COMMIT.fullmatch(commit) is None or root.parent != storage_folder(repo_id, repo_type) / "snapshots":
        raise HubError(f"{label}: the cache returned {root}, not a snapshots/<commit> folder")
    return root, commit


def cached_or(unreachable: HubUnreachable, label: str, repo_id: str, revision: str, repo_type: str,
              allow: Optional[Sequence[str]], ignore: Sequence[str] = IGNORE_PATTERNS) -> tuple[Path, str]:
    """The Hub cannot be reached: the cached snapshot of ``revision`` (as the client falls back
    to its cache), or one line saying both."""
    try:
        return cached_snapshot(label, repo_id, revision, repo_type, allow, ignore)
    except HubNotCached as cached:
        if cached.missing is not None:
            raise HubNotCached(f"{label}: {cached.missing} and the Hub cannot be reached; {_prefetch_hint()}",
                               cached.missing) from None
        raise HubNotCached(f"{unreachable}; not in the Hugging Face cache ({cache_dir()}) either") from None


def verify_cached(path: Union[str, os.PathLike]) -> Optional[str]:
    """Why the cached file ``path`` (a file of a snapshot folder: a link to ``blobs/HASH``) is
    not the file the Hub published, or None when it is: its content is hashed and compared with
    its blob's name (SHA-256 for an LFS file, the git blob id for any other; the Hub names blobs
    so). One public check for ``--check`` and ``--prefetch``: a file it refuses is downloaded
    again by ``--prefetch``. A file that is not a link to a blob (a hand-made folder) is not
    judged (None)."""
    p = Path(path)
    try:
        blob = p.resolve(strict=True)
    except OSError:
        return f"{p.name} is missing from the cache"
    name = blob.name
    if blob.parent.name != "blobs" or not (COMMIT.fullmatch(name) or _SHA256.fullmatch(name)):
        return None
    digest = _sha256(blob) if len(name) == 64 else _git_blob_id(blob)
    if digest != name:
        kind = "SHA-256" if len(name) == 64 else "git blob id"
        return (f"{p.name} in the cache is damaged ({blob.stat().st_size} bytes, its {kind} is {digest[:12]}..., "
                f"the Hub's is {name[:12]}...): download it again (--prefetch repairs it)")
    return None


def verify_snapshot(snap: HubSnapshot, lfs: bool = True) -> list[str]:
    """:func:`verify_cached` of every file of a resolved snapshot (``lfs`` False: only the files
    the Hub names by their git blob id, the small ones: configurations, tokenizers), the
    problems found (empty when every file is the one published)."""
    out = []
    for f in snap.files:
        path = snap.root / f
        if not lfs and _SHA256.fullmatch(os.path.basename(os.path.realpath(path))):
            continue  # an LFS file: hashing gigabytes is --prefetch's; its header is --check's
        problem = verify_cached(path)
        if problem is not None:
            out.append(problem)
    return out


def resolved_snapshots() -> list[HubSnapshot]:
    """The snapshots this process resolved since :func:`forget`, each once."""
    with _lock:
        return list(dict.fromkeys(_resolved.values()))


def _cached_problem(blob: Path, r: RemoteFile, deep: bool) -> Optional[str]:
    """Why the cached blob of ``r`` cannot be used (missing, another size, or, ``deep``,
    another hash), None when it can."""
    try:
        size = blob.stat().st_size
    except OSError:
        return "missing"
    if size != r.size:
        return f"{size} bytes, the Hub lists {r.size}"
    if deep:
        digest = _sha256(blob) if r.sha256 else _git_blob_id(blob)
        if digest != r.blob:
            return "damaged"
    return None


def _transfer_locked(label: str, repo_id: str, repo_type: str, commit: str, r: RemoteFile, blob: Path,
                     limits: DownloadLimits, locks: Path, deep: bool) -> None:
    """:func:`_transfer` under the blob's lock (another process fetching the same blob, a
    concurrent ``--prefetch``, is waited for, and its result used when it is sound)."""
    from huggingface_hub.utils import WeakFileLock

    try:
        locks.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HubError(f"{label}: cannot write into {cache_dir()} ({type(exc).__name__}: {exc})") from None
    with WeakFileLock(locks / f"{r.blob}.lock"):
        if _cached_problem(blob, r, deep) is None:  # fetched meanwhile by another process
            return
        _transfer(label, repo_id, repo_type, commit, r, blob, limits)


def _transfer(label: str, repo_id: str, repo_type: str, commit: str, r: RemoteFile, blob: Path,
              limits: DownloadLimits) -> None:
    """Download ``r`` into ``blob`` (through ``blob.incomplete``, resumed with a Range request
    after a broken connection), within ``limits``, verified before it is renamed into place."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session

    from icl._signals import check_stop

    where = f"{label}: {r.path}"
    part = blob.with_name(blob.name + ".incomplete")
    try:
        blob.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HubError(f"{where}: cannot write into {cache_dir()} ({type(exc).__name__}: {exc})") from None
    url = hf_hub_url(repo_id, r.path, repo_type=repo_type, revision=commit, endpoint=endpoint())
    session = get_session()
    failures: list[str] = []
    started = time.monotonic()
    while True:
        check_stop()
        have = part.stat().st_size if part.is_file() else 0
        if have > r.size:
            part.unlink()
            have = 0
        if have == r.size:
            break
        headers = build_hf_headers()
        headers["Accept-Encoding"] = "identity"  # the bytes as published (the listing's size and hash)
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            _receive(where, session, url, headers, part, have, r.size, limits, started)
        except _Broken as exc:
            failures.append(str(exc))
            if len(failures) >= limits.tries:
                got = part.stat().st_size if part.is_file() else 0
                raise HubError(f"{where}: the transfer broke off {len(failures)} times (last: {failures[-1]}); "
                               f"{got} of {r.size} bytes kept, run again to resume") from None
            time.sleep(min(0.5 * len(failures), 2.0))
    digest = _sha256(part) if r.sha256 else _git_blob_id(part)
    if digest != r.blob:
        part.unlink(missing_ok=True)
        kind = "SHA-256" if r.sha256 else "git blob id"
        raise HubError(f"{label} (commit {commit}): {r.path} is corrupt: its {kind} is {digest}, the Hub lists "
                       f"{r.blob}; not cached, run again to download it anew")
    os.replace(part, blob)


class _Broken(Exception):
    """A transfer that broke off (connection, timeout, server error): tried again."""


def _receive(where: str, session: Any, url: str, headers: dict[str, str], part: Path, have: int, size: int,
             limits: DownloadLimits, started: float) -> None:
    """One GET of the file's remaining bytes, appended to ``part``; raises :class:`_Broken` for
    what another try may mend, :class:`HubError` for what it cannot (a refusal, a body larger
    than listed, a rate below the minimum, the total time spent)."""
    import httpx2

    from icl._signals import check_stop

    try:
        timeout = httpx2.Timeout(limits.read_timeout, connect=min(limits.read_timeout, 10.0))
        with session.stream("GET", url, headers=headers, follow_redirects=True, timeout=timeout) as resp:
            status = resp.status_code
            if status in (429,) or status >= 500:
                raise _Broken(f"HTTP {status}")
            if status == 416:  # the part kept does not match what the server has: start over
                part.unlink(missing_ok=True)
                raise _Broken("HTTP 416 for the part kept")
            if status not in (200, 206):
                raise HubError(f"{where}: the Hub answered HTTP {status}" + (
                    " (not found at this commit)" if status == 404 else
                    " (private or gated? set HF_TOKEN)" if status in (401, 403) else ""))
            if status == 200 and have:  # the server ignored the Range: start over
                part.unlink(missing_ok=True)
                have = 0
            if status == 206 and not resp.headers.get("content-range", "").startswith(f"bytes {have}-"):
                part.unlink(missing_ok=True)  # another range than asked: start over
                raise _Broken(f"HTTP 206 for another range ({resp.headers.get('content-range', 'none')!r})")
            announced = resp.headers.get("content-length")
            if announced is not None and announced.isdigit() and int(announced) > size - have:
                raise HubError(f"{where}: the server announces {int(announced)} bytes, the listing {size - have} "
                               f"more; refused")
            with open(part, "ab") as out, _progress(where, size, have) as bar:
                got, t0 = have, time.monotonic()
                marks = [(t0, got)]  # (time, bytes) to measure the rate over the last window
                for chunk in resp.iter_raw():
                    check_stop()
                    if got + len(chunk) > size:
                        raise HubError(f"{where}: the server sends more than the {size} bytes listed; refused")
                    out.write(chunk)
                    got += len(chunk)
                    bar.update(len(chunk))
                    now = time.monotonic()
                    marks.append((now, got))
                    _within(where, limits, marks, now, started)
            if got < size:
                raise _Broken(f"the connection closed at {got} of {size} bytes")
    except (httpx2.TransportError, httpx2.StreamError) as exc:
        raise _Broken(f"{type(exc).__name__}: {_first_line(exc) or 'no detail'}") from None
    except HubError:  # (a WeightsError is an OSError: not a disk's)
        raise
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise HubError(f"{where}: the disk of {cache_dir()} is full; free space or set HF_HUB_CACHE "
                           f"elsewhere ({part.stat().st_size if part.exists() else 0} bytes kept)") from None
        raise HubError(f"{where}: cannot write into {cache_dir()} ({type(exc).__name__}: {exc})") from None


def _progress(where: str, size: int, have: int) -> Any:
    """A progress bar of one file on a terminal (huggingface_hub's tqdm, which
    ``HF_HUB_DISABLE_PROGRESS_BARS`` turns off: ``--no-progress`` sets it); nothing otherwise."""
    import sys

    from huggingface_hub.utils import are_progress_bars_disabled
    from huggingface_hub.utils import tqdm as hub_tqdm

    # read now (the client read it once, at its import; the runner sets it later for --no-progress)
    flag = hf_flag("HF_HUB_DISABLE_PROGRESS_BARS")
    off = are_progress_bars_disabled() if flag is None else flag
    return hub_tqdm(total=size, initial=have, unit="B", unit_scale=True, desc=where.split(": ", 1)[-1],
                    disable=True if off or not sys.stderr.isatty() else None, leave=False)


def _within(where: str, limits: DownloadLimits, marks: list[tuple[float, int]], now: float, started: float) -> None:
    """Give up (one line) when the last ``window`` seconds brought less than the minimum rate,
    or the file has taken its total time."""
    if limits.total and now - started > limits.total:
        raise HubError(f"{where}: not downloaded within ICL_DOWNLOAD_TIMEOUT={limits.total:g} s; given up "
                       f"({marks[-1][1]} bytes kept, run again to resume)")
    if now - marks[0][0] < limits.window:
        return
    while len(marks) > 1 and marks[1][0] <= now - limits.window:
        del marks[0]  # marks[0]: the last mark at or before the window's start
    rate = (marks[-1][1] - marks[0][1]) / limits.window
    if rate < limits.min_rate:
        raise HubError(f"{where}: {rate:.1f} bytes/s over the last {limits.window:g} s, below "
                       f"ICL_DOWNLOAD_MIN_RATE={limits.min_rate:g}; given up ({marks[-1][1]} bytes kept, run again "
                       f"to resume)")


def _link(blob: Path, pointer: Path) -> None:
    """The snapshot's ``pointer`` as a relative link to ``blob`` (the client's layout), replaced
    when it points elsewhere; confined to the snapshot folder (its path was checked)."""
    target = os.path.relpath(blob, pointer.parent)
    if pointer.is_symlink() and os.readlink(pointer) == target:
        return
    pointer.parent.mkdir(parents=True, exist_ok=True)
    tmp = pointer.with_name(f".{pointer.name}.{os.getpid()}.link")
    tmp.unlink(missing_ok=True)
    try:
        tmp.symlink_to(target)
    except OSError:  # a file system without links: a copy
        shutil.copyfile(blob, tmp)
    os.replace(tmp, pointer)


def _store_listing(storage: Path, commit: str, listing: dict[str, RemoteFile]) -> None:
    """The listing at ``commit`` where the client keeps it (``trees/COMMIT.json``): offline, it
    tells a complete snapshot from one that lacks files."""
    try:
        from huggingface_hub._tree_cache import TreeCacheEntry, write_tree_cache
    except ImportError:  # another client version: offline runs then trust the snapshot folder
        return
    write_tree_cache(str(storage), commit, {
        r.path: TreeCacheEntry(size=r.size, blob_id=r.oid, lfs_sha256=r.sha256,
                               lfs_size=r.size if r.sha256 else None) for r in listing.values()})


def _hub_failure(label: str, repo_id: str, revision: str, repo_type: str, exc: Exception,
                 doing: str = "resolve") -> HubError:
    """One line for a failed Hub request: the client's typed errors in words."""
    from huggingface_hub import errors

    where = endpoint() or "huggingface.co"
    what = "dataset" if repo_type == "dataset" else "repository"
    if isinstance(exc, errors.GatedRepoError):
        return HubError(f"{label}: {repo_id} is gated: accept its conditions on the Hub and set HF_TOKEN to a "
                        f"token of that account")
    if isinstance(exc, errors.RevisionNotFoundError):
        return HubError(f"{label}: {repo_id} has no revision {revision!r} (a branch, tag or commit)")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return HubError(f"{label}: {what} {repo_id} not found on {where} (private? set HF_TOKEN)")
    if isinstance(exc, errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return HubError(f"{label}: the Hub answered HTTP {status} for {repo_id}@{revision}")
    if isinstance(exc, HubError):
        return exc
    name = type(exc).__name__
    if "Connect" in name or "Timeout" in name or "Network" in name or isinstance(exc, ConnectionError):
        return HubUnreachable(f"{label}: the Hub ({where}) cannot be reached ({name}); {doing} {repo_id}@{revision} "
                        f"failed")
    return HubError(f"{label}: cannot {doing} {repo_id}@{revision} ({name}: {_first_line(exc) or 'no detail'})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            yield chunk


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    for chunk in _chunks(path):
        h.update(chunk)
    return h.hexdigest()


def _git_blob_id(path: Path) -> str:
    h = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    for chunk in _chunks(path):
        h.update(chunk)
    return h.hexdigest()


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _prefetch_hint() -> str:
    return ("prefetch it where the network is reachable (e.g. on a login node): run the same command once "
            "without HF_HUB_OFFLINE (or with --prefetch), with the same HF_HOME / HF_HUB_CACHE")


def _refuse_code(ref: HubRef, root: Path) -> None:
    """A configuration with ``auto_map`` names classes defined by the repository's own Python:
    icl never runs it (trust_remote_code stays False), so the reference is refused up front."""
    base = root / ref.subpath if ref.subpath else root
    for name in CODE_CONFIGS:
        path = base / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # damaged in the cache (the Hub's hash says so), or published so
            damaged = verify_cached(path)
            if damaged is not None:
                raise HubCacheDamaged(f"{ref.text}: {damaged}") from None
            raise HubError(f"{ref.text}: {name} is not valid JSON ({exc})") from None
        if isinstance(data, dict) and data.get("auto_map"):
            raise HubError(f"{ref.text}: {name} has auto_map ({', '.join(sorted(data['auto_map']))}): the model needs "
                           f"its repository's own code, which icl never runs (trust_remote_code=False)")
        if name == "model_index.json" and isinstance(data, dict):
            custom = _custom_components(data)
            if custom:
                raise HubError(f"{ref.text}: model_index.json names {', '.join(custom)}: the pipeline needs its "
                               f"repository's own code, which icl never runs (only diffusers and transformers "
                               f"classes are loaded)")


def _custom_components(index: dict[str, Any]) -> list[str]:
    """The entries of a diffusers ``model_index.json`` that name code of the repository: a
    component ``[library, class]`` whose library is neither diffusers nor transformers (a null
    entry is an absent optional component), or a ``_class_name`` given as ``[module, class]``."""
    out = []
    if isinstance(index.get("_class_name"), list):
        out.append(f"_class_name {index['_class_name']}")
    for key, entry in sorted(index.items()):
        if key.startswith("_") or not isinstance(entry, list) or len(entry) != 2 or entry[0] is None:
            continue
        if entry[0] not in PIPELINE_LIBRARIES:
            out.append(f"{key} {entry}")
    return out


def _selected(root: Path, allow: list[str]) -> tuple[str, ...]:
    """The snapshot's files the patterns select: the same list online (just downloaded) and
    offline (from the cache), so the identity does not depend on the network."""
    from huggingface_hub.utils import filter_repo_objects

    present = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return tuple(filter_repo_objects(present, allow_patterns=allow, ignore_patterns=list(IGNORE_PATTERNS)))


# --- official weights: ``weights=hf:default`` ------------------------------------------------
DEFAULT = "hf:default"


@dataclass(frozen=True)
class Official:
    """Where a family's authors publish its weights. ``ref`` (an ``hf:`` reference at ``main``:
    the identity pins the commit it resolves to) is what ``weights=hf:default`` means; None when
    the weights are not on the Hub (or no single checkpoint is the family's), with ``where``
    saying where they live. ``files``: pickles the family loads (downloaded beside the default
    patterns); ``source``: the README or model card that names the repository."""

    ref: Optional[str]
    source: str
    where: str = ""
    files: tuple[str, ...] = ()


# One table: (family, argument) -> Official. docs/models.md "Official weights" lists the same rows
# (tests/models/test_hub_defaults.py compares them).
OFFICIAL: dict[tuple[str, str], Official] = {
    ("hf-vlm", "weights"): Official(None, "", "any transformers vision-language folder (no single official "
                                    "checkpoint): name one, e.g. weights=hf:llava-hf/llava-1.5-7b-hf"),
    ("lvm", "weights"): Official("hf:Emma02/LVM_ckpts", "ytongbai/LVM README.md, 'Models'"),
    ("lvm", "vqgan_weights"): Official("hf:Emma02/vqvae_ckpts", "ytongbai/LVM README.md, 'Models'",
                                       files=("pytorch_model.bin",)),
    ("delvm", "weights"): Official(None, "ggjy/DeLVM README.md", "LLaMA-1b-hf on OneDrive / Baidu Disk, "
                                   "llama_300m_hf.zip as a GitHub release (ggjy/DeLVM README); put the folder at "
                                   "$ICL_WEIGHTS_DIR/delvm/llm/ or pass weights=PATH"),
    ("delvm", "vqgan_weights"): Official(None, "ggjy/DeLVM README.md", "the open-muse VQGAN folder, not named by the "
                                         "DeLVM README (not verified); LVM's is hf:Emma02/vqvae_ckpts"),
    ("painter", "weights"): Official("hf:BAAI/Painter/painter_vit_large.pth", "baaivision/Painter Painter/README.md"),
    ("seggpt", "weights"): Official("hf:BAAI/seggpt-vit-large", "baaivision/Painter SegGPT/SegGPT_inference/README.md "
                                    "(original BAAI/SegGPT seggpt_vit_large.pth); transformers port BAAI/seggpt-vit-large"),
    ("mae-vqgan", "weights"): Official(None, "amirbar/visual_prompting README.md", "checkpoint-1000.pth on Google Drive "
                                       "(amirbar/visual_prompting README, 'Pretrained Models'); put it at "
                                       "$ICL_WEIGHTS_DIR/mae-vqgan/ or pass weights=PATH"),
    ("mae-vqgan", "vqgan_weights"): Official(None, "amirbar/visual_prompting README.md", "taming-transformers' "
                                             "vqgan_imagenet_f16_1024 last.ckpt on heibox.uni-heidelberg.de (linked "
                                             "from the amirbar/visual_prompting README); pass vqgan_weights=PATH"),
    ("prompt-diffusion", "weights"): Official("hf:zhendongw/prompt-diffusion-diffusers",
                                              "Zhendong-Wang/Prompt-Diffusion README.md, 'Hugging Face Diffusers Suport'"),
    ("sd-vicl", "weights"): Official(None, "", "SD-VICL's authors published no code or weights (which Stable "
                                     "Diffusion they used: not verified); pass a Stable Diffusion 1.x/2.x folder, "
                                     "e.g. weights=hf:stable-diffusion-v1-5/stable-diffusion-v1-5"),
    ("visualcloze", "weights"): Official("hf:VisualCloze/VisualClozePipeline-384",
                                         "lzyhha/VisualCloze README.md; diffusers' VisualClozePipeline docs"),
    ("diffusers-t2i", "weights"): Official(None, "", "any diffusers text-to-image pipeline (no single official "
                                           "checkpoint): name one from docs/generators.md, e.g. "
                                           "weights=hf:stable-diffusion-v1-5/stable-diffusion-v1-5"),
    ("janus", "weights"): Official("hf:deepseek-community/Janus-Pro-1B",
                                   "deepseek-ai/Janus README.md (deepseek-ai/Janus-Pro-1B, DeepSeek's own format); "
                                   "transformers-format conversion deepseek-community/Janus-Pro-1B"),
    ("flux-kontext", "weights"): Official("hf:black-forest-labs/FLUX.1-Kontext-dev",
                                          "black-forest-labs/flux docs/image-editing.md"),
    ("qwen-image-edit", "weights"): Official("hf:Qwen/Qwen-Image-Edit-2509", "QwenLM/Qwen-Image README.md"),
    ("clip-judge", "weights"): Official("hf:openai/clip-vit-large-patch14",
                                        "Hub repositories duplicated from openai/clip-vit-large-patch14"),
    ("tiny-chat-judge", "weights"): Official(None, "", "built in: random tiny weights made by icl, no download"),
    ("cobsat-judge", "weights"): Official(None, "", "weight-free (reads CoBSAT-lite drawings)"),
    ("vif-spatial-judge", "weights"): Official(None, "", "weight-free (IoU of the generated layout)"),
    ("openai", "weights"): Official(None, "", "an HTTP API (model=, base_url=): no weights"),
    ("openai-images", "weights"): Official(None, "", "an HTTP API (model=, base_url=): no weights"),
}


def official(family: str, argument: str = "weights") -> Official:
    """The table entry of ``family``'s ``argument``; :class:`HubError` for a family not in it."""
    entry = OFFICIAL.get((family, argument))
    if entry is None:
        known = sorted({f for f, _ in OFFICIAL})
        raise HubError(f"{family}: no official {argument} known for this model (hf:default is defined for "
                       f"{', '.join(known)}); name the repository, hf:ORG/NAME[@REVISION][/SUBPATH]")
    return entry


def expand_default(text: Any, family: str, argument: str = "weights") -> Any:
    """``hf:default`` -> the family's official reference (any other value unchanged); a family
    whose weights are not on the Hub raises :class:`HubError`, one line saying where they are."""
    if text != DEFAULT:
        return text
    entry = official(family, argument)
    if entry.ref is None:
        raise HubError(f"{family}: {argument}=hf:default: no Hub default; {entry.where}")
    parse_ref(entry.ref)  # the table goes through the one parser
    return entry.ref


def downloads_allowed() -> bool:
    """``ICL_HUB_DEFAULTS=1``: a model given no weights (and none under ``$ICL_WEIGHTS_DIR``)
    loads its family's official Hub weights, as with ``weights=hf:default``."""
    return env_bool("ICL_HUB_DEFAULTS")
