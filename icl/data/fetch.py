"""``python -m icl.data fetch NAME``: published data by name.

Releases published on the Hugging Face Hub as datasets (:data:`HUB_RELEASES`) are downloaded
with the ``huggingface_hub`` client (``snapshot_download(repo_type="dataset")``) into the user's
standard cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``; ``HF_ENDPOINT``, ``HF_TOKEN`` and
``HF_HUB_OFFLINE`` are honoured exactly as for ``weights=hf:...``, :mod:`icl.models.hub`), at
the commit the table pins, never a moving branch. The release is then unpacked as its publisher's
script does (VL-ICL's ``unzip.sh``: ``unzip {task}/support.zip -d {task}`` and ``query.zip``)
into ``OUT`` (default ``<data root>/<name>``), checked as the benchmark checks a local release
(every task's records parse and validate, every image they name exists), and ``OUT`` is printed:
pass it as ``--data-root``. ``OUT/fetch-manifest.json`` records the repository, the commit and the
counts found (records per file, images); a second fetch (online or offline) re-checks them.

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
    top-level folders it holds, ``archives`` the zips each folder's images come in, ``source``
    where this was read."""

    repo: str
    commit: str
    folders: tuple[str, ...]
    archives: tuple[str, ...]
    licence: str
    source: str
    validate: str  # "module:function" (out_dir) -> {counts}


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
                        "icl.data.fetch:validate_vlicl"),
}
# "vlicl-text" (the three text folders) is the same release: fetching "vlicl" gives both variants
ALIASES = {"vl-icl": "vlicl", "vlicl-text": "vlicl"}

# Not on the Hub, or not as a dataset icl reads (what was looked for, docs/datasets.md):
NOT_PUBLISHED = {
    "best50": "the best50 package is not known to icl as a Hub dataset (not verified either way); pass its folder with "
              "--data-root (docs/datasets.md)",
    "cobsat": "CoBSAT's images are not known to icl as a Hub dataset (not verified either way); VL-ICL's release holds the cobsat "
              "task (python -m icl.data fetch vlicl), the full CoBSAT dataset comes from its authors' repository "
              "(docs/cobsat.md)",
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


def fetch(name: str, out: Optional[str | os.PathLike] = None, stdout: Optional[TextIO] = None) -> Optional[Path]:
    """Fetch ``name`` (see the module docstring); the folder to pass as ``--data-root``, or None
    for a release published elsewhere (its instructions printed). Raises :class:`FetchError`."""
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
    snapshot = _download(rel)
    manifest = target / "fetch-manifest.json"
    done = _read_manifest(manifest)
    if done.get("repo") != rel.repo or done.get("commit") != rel.commit:
        _unpack(rel, snapshot, target)
    counts = _validator(rel)(target)
    if done and done.get("commit") == rel.commit and done.get("counts") not in (None, counts):
        raise FetchError(f"{target}: the counts found ({_summary(counts)}) differ from those recorded when it was "
                         f"fetched ({_summary(done['counts'])}); delete the folder and fetch again")
    record = dict(name=key, repo=rel.repo, repo_type="dataset", commit=rel.commit, licence=rel.licence,
                  source=rel.source, counts=counts)
    tmp = manifest.with_name(manifest.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, manifest)
    print(f"{key}: {rel.repo}@{rel.commit} ({rel.licence}), {_summary(counts)}", file=stdout)
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


def _download(rel: HubRelease) -> Path:
    from huggingface_hub import errors, snapshot_download

    is_offline = hub.offline()
    where = hub.endpoint() or "huggingface.co"
    try:
        return Path(snapshot_download(rel.repo, repo_type="dataset", revision=rel.commit, cache_dir=hub.cache_dir(),
                                      endpoint=hub.endpoint(), local_files_only=is_offline))
    except errors.LocalEntryNotFoundError:
        if is_offline:
            raise FetchError(f"{rel.repo}@{rel.commit}: not in the Hugging Face cache ({hub.cache_dir()}) and "
                             f"HF_HUB_OFFLINE is set; fetch it once where the Hub is reachable, with the same "
                             f"HF_HOME / HF_HUB_CACHE") from None
        raise FetchError(f"{rel.repo}: the Hub ({where}) cannot be reached and the dataset is not cached") from None
    except errors.RevisionNotFoundError:
        raise FetchError(f"{rel.repo}: the Hub ({where}) has no commit {rel.commit}") from None
    except errors.RepositoryNotFoundError:
        raise FetchError(f"{rel.repo}: dataset not found on {where} (private or gated? set HF_TOKEN)") from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise FetchError(f"{rel.repo}: the Hub answered HTTP {status}") from None
    except OSError as exc:
        raise FetchError(f"{rel.repo}: cannot download into {hub.cache_dir()} ({exc})") from None


def _unpack(rel: HubRelease, snapshot: Path, target: Path) -> None:
    """Copy the release's folders from the snapshot and extract each folder's archives into it
    (as its unzip script), in a hidden sibling renamed into place when complete."""
    missing = [f for f in rel.folders if not (snapshot / f).is_dir()]
    if missing:
        raise FetchError(f"{rel.repo}@{rel.commit}: the snapshot lacks {', '.join(missing)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = target.with_name(f".{target.name}.fetching")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        for folder in rel.folders:
            src, dst = snapshot / folder, work / folder
            dst.mkdir()
            for f in sorted(src.iterdir()):
                if f.is_file() and f.name not in rel.archives:
                    shutil.copyfile(f, dst / f.name)
            for name in rel.archives:
                if (src / name).is_file():
                    _extract(src / name, dst)
        if target.exists():
            shutil.rmtree(target)
        os.replace(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


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
