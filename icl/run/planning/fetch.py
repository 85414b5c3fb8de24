"""``python -m icl.data fetch NAME``: published data by name.

Releases published on the Hugging Face Hub as datasets (:data:`HUB_RELEASES`) are downloaded
with the ``huggingface_hub`` client (``snapshot_download(repo_type="dataset")``) into the user's
standard cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``; ``HF_ENDPOINT``, ``HF_TOKEN`` and
``HF_HUB_OFFLINE`` are honoured exactly as for ``weights=hf:...``, :mod:`icl.models.hub`), at
the commit the table pins (``--revision`` replaces it), never a moving branch. The release is
then unpacked as its publisher's instructions do (VL-ICL's ``unzip.sh``: ``unzip
{task}/support.zip -d {task}`` and ``query.zip``; CoBSAT's ``datasets/`` folder as it is) into a
hidden sibling of ``OUT`` (default ``<data root>/<name>``), checked as the
benchmark checks a local release (VL-ICL: every task's records parse and validate, every image
they name exists; CoBSAT: every theme's images), renamed to ``OUT`` when it passes, and ``OUT`` is
printed: pass it as ``--data-root``. ``OUT/fetch-manifest.json`` records the repository, the
commit and the counts found; a second fetch (online or offline) re-checks them. An ``OUT`` that
holds files fetch did not make is refused.

The visual benchmark's 14 releases are not on the Hub: for those, ``fetch`` prints where to get
each one, its licence, what it becomes and the ``convert`` command (:data:`ELSEWHERE`, the table
of docs/datasets.md "Per release"); it downloads nothing and never scrapes.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

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
        work = target.with_name(f".{target.name}.fetching")
        try:
            _unpack(rel, snapshot, work, commit)
            counts = _checked(rel, work, target)
            _write_manifest(work / manifest.name, {**record, "counts": counts})
            if target.exists():  # only a folder fetch made (refused above otherwise)
                shutil.rmtree(target)
            os.replace(work, target)
        finally:
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
    from huggingface_hub import errors, snapshot_download

    is_offline = hub.offline()
    where = hub.endpoint() or "huggingface.co"
    at = f"{rel.repo}@{revision}"
    try:
        return Path(snapshot_download(rel.repo, repo_type="dataset", revision=revision, cache_dir=hub.cache_dir(),
                                      endpoint=hub.endpoint(), local_files_only=is_offline,
                                      allow_patterns=list(rel.allow_patterns) if rel.allow_patterns else None))
    except errors.LocalEntryNotFoundError:
        if is_offline:
            raise FetchError(f"{at}: not in the Hugging Face cache ({hub.cache_dir()}) and "
                             f"HF_HUB_OFFLINE is set; fetch it once where the Hub is reachable, with the same "
                             f"HF_HOME / HF_HUB_CACHE") from None
        raise FetchError(f"{rel.repo}: the Hub ({where}) cannot be reached and the dataset is not cached") from None
    except errors.RevisionNotFoundError:
        raise FetchError(f"{rel.repo}: the Hub ({where}) has no revision {revision}") from None
    except errors.RepositoryNotFoundError:
        raise FetchError(f"{rel.repo}: dataset not found on {where} (private or gated? set HF_TOKEN)") from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise FetchError(f"{rel.repo}: the Hub answered HTTP {status}") from None
    except OSError as exc:
        raise FetchError(f"{rel.repo}: cannot download into {hub.cache_dir()} ({exc})") from None


def _unpack(rel: HubRelease, snapshot: Path, work: Path, commit: str) -> None:
    """Into ``work`` (made afresh): the release's folders copied from the snapshot, everything
    under them but their archives, and each folder's archives extracted into it (as its unzip
    script)."""
    missing = [f for f in rel.folders if not (snapshot / f).is_dir()]
    if missing:
        raise FetchError(f"{rel.repo}@{commit}: the snapshot lacks {', '.join(missing)}")
    work.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for folder in rel.folders:
        src, dst = snapshot / folder, work / folder
        # the cache's files are links to its blobs: copied as files
        shutil.copytree(src, dst, ignore=lambda at, names: [n for n in names if Path(at) == src and n in rel.archives])
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


def _extract(archive: Path, dst: Path) -> None:
    root = dst.resolve()
    try:
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                path = (dst / info.filename).resolve()
                if root not in path.parents and path != root:
                    raise FetchError(f"{archive}: member {info.filename!r} would land outside {dst}")
            z.extractall(dst)
    except zipfile.BadZipFile as exc:
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
