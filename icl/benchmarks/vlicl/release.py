"""VL-ICL's published release, as ``python -m icl.data fetch vlicl`` fetches it
(``VLICL.releases``), and the checks this benchmark makes of a local copy (``VLICL.check_release``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from icl.benchmarks.vlicl.records import FileImages, RecordError, image_list, load_published, present_tasks
from icl.benchmarks.vlicl.tasks import TASKS
from icl.data.release import HubRelease, ReleaseError

IMAGE_TASKS = ("clevr", "cobsat", "matching_mi", "open_mi", "open_t2i_mi", "operator_induction",
               "operator_induction_interleaved", "textocr")
TEXT_FOLDERS = ("clevr_text", "operator_induction_text", "operator_induction_interleaved_text")

RELEASES: dict[str, HubRelease] = {
    # huggingface.co/datasets/ys-zong/VL-ICL, tree at 6c63a33 (its newest commit read, "Update README.md"):
    # the eight task folders (query.json, support.json, query.zip, support.zip) of commit 22b22b8,
    # unzip.sh of 4a6bb11, and the three text folders of 469851d ("add text ICL data")
    "vlicl": HubRelease("ys-zong/VL-ICL", "6c63a33ca4f9fa1eda4b5301f6d82655bbdfa71d", IMAGE_TASKS + TEXT_FOLDERS,
                        ("support.zip", "query.zip"), "MIT",
                        "huggingface.co/datasets/ys-zong/VL-ICL (README.md, unzip.sh)"),
}
# "vlicl-text" (the three text folders) is the same release: fetching "vlicl" gives both variants
ALIASES = {"vl-icl": "vlicl", "vlicl-text": "vlicl"}


def check(root: Path) -> dict[str, Any]:
    """The checks ``vlicl`` makes of a local release, on every task and text variant present:
    the records load and validate (``load_published``), and every image they name exists (paths
    relative to the release root, confined to it). Returns the counts (records per folder and
    file, distinct images); :class:`~icl.data.release.ReleaseError` otherwise."""
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
                for ref in image_refs(data.queries) + image_refs(data.support):
                    if not files.path(ref).is_file():
                        raise ReleaseError(f"VL-ICL release at {root}: {folder} names image {ref!r}, which is "
                                           f"missing after unpacking")
                    images.add(ref)
            except RecordError as exc:
                raise ReleaseError(f"VL-ICL release at {root}: {exc}") from None
    if not tasks:
        raise ReleaseError(f"VL-ICL release at {root}: no task folder found")
    return {"tasks": tasks, "images": len(images)}


def summary(counts: dict[str, Any]) -> str:
    """:func:`check`'s counts in a few words."""
    tasks = counts.get("tasks", {})
    records = sum(v.get("query", 0) + v.get("support", 0) for v in tasks.values())
    return f"{len(tasks)} task folders, {records} records, {counts.get('images', 0)} images"


def image_refs(value: Any) -> list[str]:
    """Every image path inside ``value``: ``image`` fields of records and ``images`` lists of
    per-class examples."""
    out: list[str] = []
    if isinstance(value, list):
        for v in value:
            out += image_refs(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in ("image", "images") and isinstance(v, (str, list)) and all(isinstance(x, str) for x in
                                                                               ([v] if isinstance(v, str) else v)):
                out += image_list(v) if k == "image" else list(v)
            elif isinstance(v, (list, dict)):
                out += image_refs(v)
    return out
