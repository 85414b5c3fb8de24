"""``python -m icl.data fetch NAME``: published data by name.

Releases published on the Hugging Face Hub as datasets (:data:`HUB_RELEASES`) are downloaded
by the transfer of ``weights=hf:...`` (:mod:`icl.models.hub`: the revision resolved to a checked
40-hex commit first, every listed path confined, every file hashed, rate and time limits,
signals) into the user's standard cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``; ``HF_ENDPOINT``,
``HF_TOKEN`` and ``HF_HUB_OFFLINE`` honoured the same way), at the commit the table pins
(``--revision``, checked by :func:`icl.models.hub.check_revision`, replaces it), never a moving
branch. The release is
then unpacked as its publisher's instructions do (VL-ICL's ``unzip.sh``: ``unzip
{task}/support.zip -d {task}`` and ``query.zip``; CoBSAT's ``datasets/`` folder as it is) into a
hidden sibling of ``OUT`` (default ``<data root>/<name>``), checked as the
benchmark checks a local release (VL-ICL: every task's records parse and validate, every image
they name exists; CoBSAT: every theme's images), renamed to ``OUT`` when it passes, and ``OUT`` is
printed: pass it as ``--data-root``. ``OUT/fetch-manifest.json`` records the repository, the
commit and the counts found; a second fetch (online or offline) re-checks them. An ``OUT`` that
holds files fetch did not make is refused, and so is a hidden sibling fetch did not make (it
marks its own with :data:`WORK_MARKER`). Archives are bounded before they are unpacked
(:data:`UNPACK_LIMITS`: in all, per member, and per member against its compressed size) and
must fit in the free space; a disk that fills anyway is one line.

The visual benchmark's 14 releases are not on the Hub: for those, ``fetch`` prints where to get
each one, its licence, what it becomes and the ``convert`` command (:data:`ELSEWHERE`, the table
of docs/datasets.md "Per release"); it downloads nothing and never scrapes.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from icl._parse import env_number
from icl.models import hub


class FetchError(Exception):
    """A release that cannot be fetched, unpacked or validated (one line)."""


@dataclass(frozen=True)
class HubRelease:
    """A release published as a Hub dataset: ``repo`` at ``commit`` (40 hex), ``folders`` the
    top-level folders it holds (copied with everything under them), ``archives`` the zips each
    folder's images come in, ``allow_patterns`` the files downloaded (None: the whole snapshot),
    ``source`` where this was read."""

    repo: str
    commit: str
    folders: tuple[str, ...]
    archives: tuple[str, ...]
    licence: str
    source: str
    validate: str  # "module:function" (out_dir) -> {counts}
    allow_patterns: Optional[tuple[str, ...]] = None


VLICL_IMAGE_TASKS = ("clevr", "cobsat", "matching_mi", "open_mi", "open_t2i_mi", "operator_induction",
                     "operator_induction_interleaved", "textocr")
VLICL_TEXT_FOLDERS = ("clevr_text", "operator_induction_text", "operator_induction_interleaved_text")

HUB_RELEASES: dict[str, HubRelease] = {
    # huggingface.co/datasets/ys-zong/VL-ICL, tree at 6c63a33 (its newest commit read, "Update README.md"):
    # the eight task folders (query.json, support.json, query.zip, support.zip) of commit 22b22b8,
    # unzip.sh of 4a6bb11, and the three text folders of 469851d ("add text ICL data")
    "vlicl": HubRelease("ys-zong/VL-ICL", "6c63a33ca4f9fa1eda4b5301f6d82655bbdfa71d",
                        VLICL_IMAGE_TASKS + VLICL_TEXT_FOLDERS, ("support.zip", "query.zip"), "MIT",
                        "huggingface.co/datasets/ys-zong/VL-ICL (README.md, unzip.sh)",
                        "icl.run.planning.fetch:validate_vlicl"),
    # huggingface.co/datasets/yzeng58/CoBSAT, commit 99928c5 ("Upload 517 files": the captions
    # datasets/{theme}.csv and the images datasets/{attr_type}_{obj}/{attr}_{obj}.jpg, with a
    # datasets loading script CoBSAT.py that icl neither downloads nor runs); the authors' README
    # (github.com/UW-Madison-Lee-Lab/CoBSAT, "Step 2: Download Dataset") points to the same
    # dataset's datasets.zip; no licence file is published
    "cobsat": HubRelease("yzeng58/CoBSAT", "99928c5d1fde398973efef652be9879313b63c5d", ("datasets",), (),
                         "no licence stated", "huggingface.co/datasets/yzeng58/CoBSAT (commit 99928c5; "
                         "github.com/UW-Madison-Lee-Lab/CoBSAT README.md, 'Step 2: Download Dataset')",
                         "icl.run.planning.fetch:validate_cobsat", allow_patterns=("datasets/*",)),
}
# "vlicl-text" (the three text folders) is the same release: fetching "vlicl" gives both variants
ALIASES = {"vl-icl": "vlicl", "vlicl-text": "vlicl"}

# Not on the Hub, or not as a dataset icl reads (what was looked for, docs/datasets.md):
NOT_PUBLISHED = {
    "best50": "the best50 package is not known to icl as a Hub dataset (not verified either way); pass its folder with "
              "--data-root (docs/datasets.md)",
    "vif": "VIF-Bench is on the Hub (shim0114/VIF-Bench) with pre-rendered images whose layout files icl has no "
           "converter for yet (docs/vif.md); not fetched",
}


@dataclass(frozen=True)
class Elsewhere:
    """A visual-benchmark release published off the Hub: where, licence, what to download,
    what ``convert`` writes (samples after the paper's filters)."""

    release: str
    licence: str
    where: str
    download: str


# The 14 releases of docs/datasets.md "Per release" (the same rows)
ELSEWHERE: dict[str, Elsewhere] = {
    "duke": Elsewhere("Duke DME OCT, Chiu et al. 2015", "no licence stated",
                      "people.duke.edu/~sf59/Chiu_BOE_2014_dataset.htm", "2015_BOE_Chiu.zip"),
    "ixi": Elsewhere("IXI", "CC BY-SA 3.0", "brain-development.org/ixi-dataset", "IXI-T2.tar, IXI-PD.tar"),
    "atlantis": Elsewhere("ATLANTIS", "custom licence", "github.com/smhassanerfani/atlantis", "the atlantis/ folder"),
    "seathru": Elsewhere("Sea-thru", "CC BY-NC-SA 4.0", "kaggle.com/datasets/colorlabeilat/seathru-dataset",
                         "sites D1..D5"),
    "suim": Elsewhere("SUIM", "MIT", "irvlab.cs.umn.edu/resources/suim-dataset", "train_val/, TEST/"),
    "nyuv2": Elsewhere("NYU Depth V2", "cite the paper", "cs.nyu.edu/~fergus/datasets/nyu_depth_v2.html",
                       "nyu_depth_v2_labeled.mat and classMapping40.mat"),
    "deepcrack": Elsewhere("DeepCrack (Liu et al. 2019)", "custom licence", "github.com/yhlleo/DeepCrack",
                           "dataset/DeepCrack.zip"),
    "cdd": Elsewhere("CDD-11 (OneRestore)", "no licence stated", "github.com/gy65896/OneRestore", "CDD-11_test/"),
    "dram": Elsewhere("DRAM", "cite the paper", "nadavc220.github.io/ssiap", "DRAM_processed"),
    "otp": Elsewhere("OpenThermalPose", "MIT", "github.com/IS2AI/OpenThermalPose", "the dataset archive"),
    "rord": Elsewhere("RORD", "MIT", "github.com/IIDA-AILab/RORD", "RORD-mini, its val split"),
    "llvip": Elsewhere("LLVIP", "custom licence", "github.com/bupt-ai-cz/LLVIP", "LLVIP/"),
    "ap10k": Elsewhere("AP-10K", "CC BY 4.0", "github.com/AlexTheBad/AP-10K", "ap-10k.zip"),
    "cub": Elsewhere("CUB-200-2011", "cite the report", "vision.caltech.edu/datasets/cub_200_2011",
                     "CUB_200_2011.tgz"),
}


def names() -> list[str]:
    return sorted(HUB_RELEASES) + sorted(ELSEWHERE) + sorted(NOT_PUBLISHED)


def fetch(name: str, out: Optional[str | os.PathLike] = None, stdout: Optional[TextIO] = None,
          revision: Optional[str] = None) -> Optional[Path]:
    """Fetch ``name`` (see the module docstring); the folder to pass as ``--data-root``, or None
    for a release published elsewhere (its instructions printed). ``revision`` (a commit, tag or
    branch of the Hub dataset) replaces the pinned commit. Raises :class:`FetchError`."""
    import sys

    stdout = stdout or sys.stdout
    key = ALIASES.get(name.lower(), name.lower())
    if key in ELSEWHERE:
        print(describe_elsewhere(key), file=stdout)
        return None
    if key in NOT_PUBLISHED:
        raise FetchError(f"{name}: {NOT_PUBLISHED[key]}")
    if key not in HUB_RELEASES:
        raise FetchError(f"{name}: not a published release icl knows; fetch takes {', '.join(names())}")
    rel = HUB_RELEASES[key]
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
            counts = _checked(rel, work, target)
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
        counts = _checked(rel, target, target)
        if done.get("counts") not in (None, counts):
            raise FetchError(f"{target}: the counts found ({_summary(counts)}) differ from those recorded when it "
                             f"was fetched ({_summary(done['counts'])}); delete the folder and fetch again")
        _write_manifest(manifest, {**record, "counts": counts})
    print(f"{key}: {rel.repo}@{commit} ({rel.licence}), {_summary(counts)}", file=stdout)
    if revision is not None and commit != rel.commit:
        print(f"{key}: --revision {revision} replaces the commit icl pins ({rel.commit})", file=stdout)
    print(f"ready at {target}: python -m icl.run {key} --data-root {target} ...", file=stdout)
    return target


def describe_elsewhere(key: str) -> str:
    e = ELSEWHERE[key]
    from icl.data.convert import OUTPUTS, PAPER_COUNTS

    writes = ", ".join(f"{d} ({PAPER_COUNTS[d]:,} samples)" for d in OUTPUTS[key])
    return (f"{key}: {e.release} is not on the Hugging Face Hub; download it from {e.where} ({e.licence}; "
            f"get: {e.download}; download size not recorded), then\n"
            f"  python -m icl.data convert {key} RAW_DIR OUT_DIR\n"
            f"writes {writes} (docs/datasets.md, 'Per release'); nothing was downloaded")


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


def _checked(rel: HubRelease, folder: Path, target: Path) -> dict[str, Any]:
    """The release's checks on ``folder``, their errors naming ``target`` (where it will be)."""
    try:
        return _validator(rel)(folder)
    except FetchError as exc:
        raise FetchError(str(exc).replace(str(folder), str(target))) from None


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


def _validator(rel: HubRelease) -> Callable[[Path], dict[str, Any]]:
    from icl._lazy import import_target

    return import_target(rel.validate)


def _summary(counts: dict[str, Any]) -> str:
    if "themes" in counts:
        return f"{len(counts['themes'])} themes, {counts.get('images', 0)} images"
    records = sum(v.get("query", 0) + v.get("support", 0) for v in counts.get("tasks", {}).values())
    return f"{len(counts.get('tasks', {}))} task folders, {records} records, {counts.get('images', 0)} images"


def validate_vlicl(root: Path) -> dict[str, Any]:
    """The checks ``vlicl`` makes of a local release, on every task and text variant present:
    the records load and validate (``load_published``), and every image they name exists (paths
    relative to the release root, confined to it). Returns the counts (records per folder and
    file, distinct images)."""
    from icl.benchmarks.vlicl.records import FileImages, RecordError, load_published, present_tasks
    from icl.benchmarks.vlicl.tasks import TASKS

    files = FileImages(Path(root))
    tasks: dict[str, dict[str, int]] = {}
    images: set[str] = set()
    for text_only in (False, True):
        wanted = [t for t in TASKS if not text_only or TASKS[t].has_text]
        present, _ = present_tasks(root, wanted, text_only)
        for task in present:
            try:
                data = load_published(root, task, text_only)
                folder = Path(data.origin).name
                tasks[folder] = {"query": len(data.queries), "support": len(data.support)}
                for ref in _image_refs(data.queries) + _image_refs(data.support):
                    path = files.path(ref)
                    if not path.is_file():
                        raise FetchError(f"VL-ICL release at {root}: {folder} names image {ref!r}, which is "
                                         f"missing after unpacking")
                    images.add(ref)
            except RecordError as exc:
                raise FetchError(f"VL-ICL release at {root}: {exc}") from None
    if not tasks:
        raise FetchError(f"VL-ICL release at {root}: no task folder found")
    return {"tasks": tasks, "images": len(images)}


def validate_cobsat(root: Path) -> dict[str, Any]:
    """The checks ``cobsat`` makes of a local release, on every theme: each theme's 100 images
    (``datasets/{attr_type}_{obj}/{attr}_{obj}.jpg``, the benchmark's own
    :class:`~icl.benchmarks.cobsat.data.ReleaseImages`) exist, and its captions file
    (``datasets/{theme}.csv``, read by the caption variant) parses when it is there (the images
    it captions are counted). Returns the counts (images and captions per theme, images in all)."""
    from icl.benchmarks.cobsat.data import ReleaseImages
    from icl.benchmarks.cobsat.vocab import THEMES, VOCAB

    try:
        release = ReleaseImages(Path(root))
    except ValueError as exc:
        raise FetchError(f"CoBSAT release at {root}: {exc}") from None
    themes: dict[str, dict[str, int]] = {}
    for name, theme in THEMES.items():
        pairs = [(a, o) for a in VOCAB[theme.attribute] for o in VOCAB[theme.object]]
        missing = [m for a, o in pairs if (m := release.missing(theme, a, o)) is not None]
        if missing:
            raise FetchError(f"CoBSAT release at {root}: theme {name}: {len(missing)} of its {len(pairs)} images "
                             f"missing after unpacking (first: {missing[0].removeprefix('missing image ')})")
        captions = 0
        if (release.root / "datasets" / f"{name}.csv").is_file():
            for a, o in pairs:
                try:
                    release.caption(theme, a, o)
                    captions += 1
                except ValueError as exc:  # an image without a caption fails the caption variant's item only
                    if "has no caption for" not in str(exc):
                        raise FetchError(f"CoBSAT release at {root}: {exc}") from None
        themes[name] = {"images": len(pairs), "captions": captions}
    return {"themes": themes, "images": sum(t["images"] for t in themes.values())}


def _image_refs(value: Any) -> list[str]:
    """Every image path inside ``value``: ``image`` fields of records and ``images`` lists of
    per-class examples."""
    from icl.benchmarks.vlicl.records import image_list

    out: list[str] = []
    if isinstance(value, list):
        for v in value:
            out += _image_refs(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in ("image", "images") and isinstance(v, (str, list)) and all(isinstance(x, str) for x in
                                                                               ([v] if isinstance(v, str) else v)):
                out += image_list(v) if k == "image" else list(v)
            elif isinstance(v, (list, dict)):
                out += _image_refs(v)
    return out
