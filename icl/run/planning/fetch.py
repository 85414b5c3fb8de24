"""``python -m icl.data fetch NAME``: published data by name.

The mechanism only: which releases exist is each benchmark's to say (``Benchmark.releases``,
described by :mod:`icl.data.release`, found by name through the benchmark registry,
:func:`icl.benchmarks.registry.find_release`), and so is what a good copy holds
(``Benchmark.check_release``). Nothing here knows any benchmark's data.

A release published on the Hugging Face Hub as a dataset (:class:`~icl.data.release.HubRelease`)
is downloaded by the transfer of ``weights=hf:...`` (:mod:`icl.models.hub`: the revision
resolved to a checked 40-hex commit first, every listed path confined, every file hashed, rate
and time limits, signals) into the user's standard cache (``HF_HUB_CACHE``, else
``HF_HOME/hub``; ``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` honoured the same way), at
the commit the benchmark pins (``--revision``, checked by :func:`icl.models.hub.check_revision`,
replaces it), never a moving branch. The release is then unpacked as its publisher's
instructions do (its folders copied, each folder's archives extracted into it) into a hidden
sibling of ``OUT`` (default ``<data root>/<name>``), checked as the benchmark checks a local
release (its ``check_release``), renamed to ``OUT`` when it passes, and ``OUT`` is printed: pass
it as ``--data-root``. ``OUT/fetch-manifest.json`` records the repository, the commit and the
counts found; a second fetch (online or offline) re-checks them. An ``OUT`` that holds files
fetch did not make is refused, and so is a hidden sibling fetch did not make (it marks its own
with :data:`WORK_MARKER`). Archives are bounded before they are unpacked (:data:`UNPACK_LIMITS`:
in all, per member, and per member against its compressed size) and must fit in the free
space; a disk that fills anyway is one line.

A release published off the Hub (:class:`~icl.data.release.Elsewhere`) is not downloaded:
``fetch`` prints where to get it, its licence, what to download and what to do with it; it
downloads nothing and never scrapes. A name a benchmark declares but does not publish
(:class:`~icl.data.release.NotPublished`) is one line saying why.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any, Optional, TextIO

from icl._parse import env_number
from icl.benchmarks.registry import FoundRelease, find_release, release_names
from icl.data.release import Elsewhere, HubRelease, NotPublished, ReleaseError
from icl.models import hub


class FetchError(Exception):
    """A release that cannot be fetched, unpacked or validated (one line)."""


def names() -> list[str]:
    """Every release name fetch takes (aliases aside), as the benchmarks declare them."""
    return release_names()


def find(name: str, benchmark: Optional[str] = None) -> Optional[FoundRelease]:
    """The release called ``name`` (:func:`icl.benchmarks.registry.find_release`); a benchmark
    that cannot be imported is one line (:class:`FetchError`)."""
    try:
        return find_release(name, benchmark)
    except (ImportError, TypeError) as exc:
        raise FetchError(f"{name}: {exc}") from None


def fetch(name: str, out: Optional[str | os.PathLike] = None, stdout: Optional[TextIO] = None,
          revision: Optional[str] = None) -> Optional[Path]:
    """Fetch ``name`` (see the module docstring); the folder to pass as ``--data-root``, or None
    for a release published elsewhere (its instructions printed). ``revision`` (a commit, tag or
    branch of the Hub dataset) replaces the pinned commit. Raises :class:`FetchError`."""
    import sys

    stdout = stdout or sys.stdout
    found = find(name)
    if found is None:
        raise FetchError(f"{name}: not a published release icl knows; fetch takes {', '.join(names())}")
    key, rel = found.name, found.release
    if isinstance(rel, Elsewhere):
        print(describe_elsewhere(key, rel), file=stdout)
        return None
    if isinstance(rel, NotPublished):
        raise FetchError(f"{name}: {rel.why}")
    if not isinstance(rel, HubRelease):
        raise FetchError(f"{name}: benchmark {found.benchmark.name!r} declares it as {type(rel).__name__}, not one "
                         f"of icl.data.release's HubRelease, Elsewhere or NotPublished")
    if revision is not None:
        try:
            hub.check_revision(f"--revision {revision!r}", revision)
        except hub.HubError as exc:
            raise FetchError(str(exc)) from None
    if out is None:
        from icl.data.registry import data_root

        out = data_root() / key
    target = Path(out).expanduser()
    manifest = target / "fetch-manifest.json"
    done = _read_manifest(manifest)
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not done:
        raise FetchError(f"{target}: exists and was not made by fetch (no fetch-manifest.json); nothing in it is "
                         f"replaced: choose another --out")
    snapshot = _download(rel, revision or rel.commit)
    commit = snapshot.name  # the snapshot folder of the Hugging Face cache is named by the commit
    record = dict(name=key, repo=rel.repo, repo_type="dataset", commit=commit, licence=rel.licence,
                  source=rel.source)
    if done.get("repo") != rel.repo or done.get("commit") != commit:
        # unpacked and checked in a hidden sibling, renamed into place only when complete: a release
        # that fails its checks leaves nothing behind
        work = _work_folder(target)
        try:
            _unpack(rel, snapshot, work, commit)
            counts = _checked(found, work, target)
            _write_manifest(work / manifest.name, {**record, "counts": counts})
            if target.exists():  # only a folder fetch made (refused above otherwise)
                shutil.rmtree(target)
            os.replace(work, target)  # the marker goes last: a failure before leaves fetch's own folder to clean
            (target / WORK_MARKER).unlink()
        except OSError as exc:
            raise FetchError(_disk_problem(exc, work, target)) from None
        finally:
            if (work / WORK_MARKER).is_file():  # ours: removed; anything else is never touched
                shutil.rmtree(work, ignore_errors=True)
    else:
        counts = _checked(found, target, target)
        if done.get("counts") not in (None, counts):
            raise FetchError(f"{target}: the counts found ({_summary(found, counts)}) differ from those recorded "
                             f"when it was fetched ({_summary(found, done['counts'])}); delete the folder and fetch "
                             f"again")
        _write_manifest(manifest, {**record, "counts": counts})
    print(f"{key}: {rel.repo}@{commit} ({rel.licence}), {_summary(found, counts)}", file=stdout)
    if revision is not None and commit != rel.commit:
        print(f"{key}: --revision {revision} replaces the commit icl pins ({rel.commit})", file=stdout)
    print(f"ready at {target}: python -m icl.run {found.benchmark_name} --data-root {target} ...", file=stdout)
    return target


def describe_elsewhere(key: str, e: Elsewhere) -> str:
    """Where to get release ``key``, published off the Hub, and what to do with it (its
    ``then``); nothing is downloaded."""
    then = f", then\n{e.then}" if e.then else ""
    return (f"{key}: {e.release} is not on the Hugging Face Hub; download it from {e.where} ({e.licence}; "
            f"get: {e.download}; download size not recorded){then}; nothing was downloaded")


def _download(rel: HubRelease, revision: str) -> Path:
    """The release's snapshot at ``revision`` (the commit asked first and checked, then every
    file downloaded by that commit and verified: :mod:`icl.models.hub`'s transfer), or from the
    cache alone offline; its folder (named by the commit)."""
    at = f"{rel.repo}@{revision}"
    allow = list(rel.allow_patterns) if rel.allow_patterns else ["*"]
    try:
        if hub.offline():
            root, _ = hub.cached_snapshot(at, rel.repo, revision, "dataset", rel.allow_patterns, ignore=())
            return root
        try:
            commit = hub.resolve_commit(at, rel.repo, revision, "dataset")
        except hub.HubUnreachable as exc:  # no network: the cache, as the client does
            return hub.cached_or(exc, at, rel.repo, revision, "dataset", rel.allow_patterns, ignore=())[0]
        listing = hub.list_remote(at, rel.repo, commit, "dataset")
        root = hub.download(at, rel.repo, "dataset", commit, listing, hub.select(listing, allow, ignore=()))
        hub.remember_revision(rel.repo, "dataset", revision, commit)
        return root
    except hub.HubError as exc:
        raise FetchError(str(exc)) from None


# The hidden folder fetch unpacks into holds this file from the moment fetch makes it: a folder of
# that name without it is the user's, and is never removed or written into.
WORK_MARKER = ".icl-fetch-in-progress"


def _work_folder(target: Path) -> Path:
    """``.NAME.fetching`` beside ``target``, made afresh and marked as fetch's: one left by an
    interrupted fetch (marked) is replaced, one fetch did not make is refused (one line)."""
    work = target.with_name(f".{target.name}.fetching")
    if work.exists() or work.is_symlink():
        if work.is_symlink() or not work.is_dir() or not (work / WORK_MARKER).is_file():
            raise FetchError(f"{work}: exists and was not made by fetch (no {WORK_MARKER} in it); nothing in it "
                             f"is touched: move it away or choose another --out")
        shutil.rmtree(work)  # an interrupted fetch's (marked): nothing of the user's
    try:
        work.parent.mkdir(parents=True, exist_ok=True)
        work.mkdir()
        (work / WORK_MARKER).write_text("unpacked by python -m icl.data fetch; removed when it ends\n")
    except OSError as exc:
        raise FetchError(_disk_problem(exc, work, target)) from None
    return work


def _disk_problem(exc: OSError, work: Path, target: Path) -> str:
    """One line for a write that failed while unpacking (a full disk above all)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"{target}: the disk is full while unpacking (into {work}); nothing was kept: free space or "
                f"choose another --out")
    return f"{target}: cannot unpack into {work} ({type(exc).__name__}: {exc.strerror or exc})"


def _unpack(rel: HubRelease, snapshot: Path, work: Path, commit: str) -> None:
    """Into ``work`` (made and marked by :func:`_work_folder`): the release's folders copied from
    the snapshot, everything under them but their archives, and each folder's archives extracted
    into it (as its unzip script), within :func:`unpack_limits` and the disk's free space."""
    missing = [f for f in rel.folders if not (snapshot / f).is_dir()]
    if missing:
        raise FetchError(f"{rel.repo}@{commit}: the snapshot lacks {', '.join(missing)}")
    archives = [snapshot / folder / name for folder in rel.folders for name in rel.archives
                if (snapshot / folder / name).is_file()]
    copied = sum(_on_disk(p.stat().st_size) for folder in rel.folders for p in (snapshot / folder).rglob("*")
                 if p.is_file() and p not in archives)
    sizes = {a: _planned_members(a, rel) for a in archives}
    unpacked = sum(sizes.values())
    bound = unpack_limits()["ICL_FETCH_MAX_UNPACK"]
    if unpacked > bound:
        largest = max(sizes, key=sizes.__getitem__)
        raise FetchError(f"{rel.repo}@{commit}: its archives unpack to {unpacked} bytes (the largest, "
                         f"{largest.relative_to(snapshot)}, {sizes[largest]}), more than ICL_FETCH_MAX_UNPACK={bound}; "
                         f"refused")
    free = hub.free_space(work)
    if copied + unpacked > free:  # (each member counted in whole blocks by _planned_members)
        raise FetchError(f"{work.parent}: unpacking {rel.repo}@{commit} needs {(copied + unpacked) / 2**20:.1f} MiB, "
                         f"the disk has {free / 2**20:.1f} MiB free; free space or choose another --out")
    for folder in rel.folders:
        src, dst = snapshot / folder, work / folder
        # the cache's files are links to its blobs: copied as files, one by one (a write that
        # fails is its own OSError, a full disk among them, not copytree's list of them)
        for path in sorted(src.rglob("*")):
            if path.parent == src and path.name in rel.archives or not path.is_file():
                continue
            to = dst / path.relative_to(src)
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, to)
        dst.mkdir(exist_ok=True)
        for name in rel.archives:
            if (src / name).is_file():
                _extract(src / name, dst)


def _checked(found: FoundRelease, folder: Path, target: Path) -> dict[str, Any]:
    """The benchmark's checks of its release on ``folder``, their errors naming ``target``
    (where it will be)."""
    try:
        counts = found.benchmark.check_release(found.name, folder)
    except (ReleaseError, FetchError) as exc:
        raise FetchError(str(exc).replace(str(folder), str(target))) from None
    try:  # recorded in the manifest and compared with it next time: JSON, as read back
        return json.loads(json.dumps(counts))
    except (TypeError, ValueError) as exc:
        raise FetchError(f"{found.name}: benchmark {found.benchmark.name!r}'s check_release returned counts that "
                         f"are not JSON ({exc})") from None


def _summary(found: FoundRelease, counts: Any) -> str:
    """The benchmark's words for ``counts``; a manifest's counts it cannot read (edited by
    hand) as they are."""
    try:
        return found.benchmark.release_summary(found.name, counts)
    except (AttributeError, TypeError, ValueError, KeyError):
        return json.dumps(counts, sort_keys=True)


def _write_manifest(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# Bounds on what a release's archives may unpack to (docs/datasets.md): in all, per member,
# and per member as a multiple of its compressed size (a zip bomb's members expand a thousandfold;
# images and JSON far less). Environment variables replace the defaults.
UNPACK_LIMITS = {"ICL_FETCH_MAX_UNPACK": 64 * 2**30, "ICL_FETCH_MAX_MEMBER": 8 * 2**30, "ICL_FETCH_MAX_RATIO": 200}
_SMALL_MEMBER = 1 << 20  # below this, a member's ratio is not judged (a tiny JSON compresses well)


def unpack_limits() -> dict[str, int]:
    """:data:`UNPACK_LIMITS` with the environment's values (a positive integer each; one line
    naming the variable otherwise: :class:`icl._parse.EnvError`)."""
    return {var: env_number(var, default) for var, default in UNPACK_LIMITS.items()}


def _on_disk(size: int) -> int:
    """What a file of ``size`` bytes takes on a disk (whole 4 KiB blocks, one at least)."""
    return max(1, -(-size // 4096)) * 4096


def _planned_members(archive: Path, rel: HubRelease) -> int:
    """The disk ``archive`` declares it unpacks to (whole blocks), each member within :func:`unpack_limits`
    (zipfile stops a member at its declared size, so this bounds what is written; the total of
    a release's archives is bounded by :func:`_unpack`); one line naming the archive and the
    member otherwise."""
    limits = unpack_limits()
    total = 0
    try:
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                total += _on_disk(info.file_size)
                name = info.filename
                if info.file_size > limits["ICL_FETCH_MAX_MEMBER"]:
                    raise FetchError(f"{archive}: member {name!r} unpacks to {info.file_size} bytes, more than "
                                     f"ICL_FETCH_MAX_MEMBER={limits['ICL_FETCH_MAX_MEMBER']}; refused")
                if (info.file_size > _SMALL_MEMBER
                        and info.file_size > limits["ICL_FETCH_MAX_RATIO"] * max(info.compress_size, 1)):
                    raise FetchError(f"{archive}: member {name!r} unpacks to {info.file_size} bytes from "
                                     f"{info.compress_size}, more than ICL_FETCH_MAX_RATIO="
                                     f"{limits['ICL_FETCH_MAX_RATIO']} times (a zip bomb?); refused")
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{archive}: not a valid zip ({exc})") from None
    return total


def _extract(archive: Path, dst: Path) -> None:
    """``archive``'s members into ``dst`` (each confined to it; sizes bounded beforehand by
    :func:`_planned_members`)."""
    root = dst.resolve()
    try:
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                path = (dst / info.filename).resolve()
                if root not in path.parents and path != root:
                    raise FetchError(f"{archive}: member {info.filename!r} would land outside {dst}")
            z.extractall(dst)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise FetchError(f"{archive}: not a valid zip ({exc})") from None


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}
