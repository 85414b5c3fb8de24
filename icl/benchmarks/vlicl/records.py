"""VL-ICL records: the published release layout and its loader.

The release (``huggingface.co/datasets/ys-zong/VL-ICL``, unpacked) has one folder per task with
``query.json`` and ``support.json``: JSON arrays of records whose image paths are relative to the
release root (``{root}/{task}/query/...``, ``{root}/{task}/support/...``). The built-in data
(:mod:`.builtin`) produces records of the same shape, so one episode builder serves both. Fields by task:

- every record: ``question`` (str), ``answer``; I2T records ``image`` (a path or a list of paths).
- operator tasks: query ``operator`` in ``+ - x``; support ``answer`` = the three results ``[+, -, x]``.
- ``open_mi`` / ``open_t2i_mi`` / ``fast_count_t2i`` / ``fast_attr_t2i`` queries: ``classes`` (names),
  ``support`` = ``{name: {"images": [...], "captions": [...]?, "real_name": str?}}``; the answer
  class is ``answer`` (``open_mi``) or ``task_label`` (text-to-image, whose ``answer`` is the concept
  the judge checks).
- ``matching_mi`` support: ``{"same": record, "diff": record}``.
- ``cobsat``: ``task``, ``latent`` (the name of the latent field), that field's value; support
  ``image`` (one path); query ``answer`` = ``[latent concept, non-latent concept]``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

import cv2
import numpy as np

from icl._text import bad_text
from icl.benchmarks.vlicl.tasks import I2T, PER_CLASS, get_task
from icl.data.images import ImageError, decode_image

OPERATORS = ("+", "-", "x")


class RecordError(ValueError):
    """A record of the published layout is malformed (the message names the file, record and field)."""


class ImageSource(Protocol):
    has_text: bool  # whether ``text(ref)`` can describe an image (built-in scenes can)

    def image(self, ref: str) -> np.ndarray:
        """uint8 ``[H, W, 3]`` RGB."""

    def text(self, ref: str) -> str:
        """The text standing in for the image in text-only variants."""


@dataclass
class TaskData:
    """One task's queries and support pool (records as in the release) and where images come from."""

    task: str
    queries: list[dict[str, Any]]
    support: list[dict[str, Any]]
    source: ImageSource
    digest: str  # SHA-256 of what the records depend on (files, or the generator's version)
    origin: str  # "builtin" or the release folder
    text_only: bool = False
    by_id: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    def pool(self, *fields: str, like: dict[str, Any]) -> list[dict[str, Any]]:
        """The support records agreeing with ``like`` on ``fields`` (in pool order; indexed once)."""
        key = (fields, tuple(like[f] for f in fields))
        if (fields, None) not in self.groups:
            self.groups[(fields, None)] = []
            for r in self.support:
                self.groups.setdefault((fields, tuple(r.get(f) for f in fields)), []).append(r)
        return self.groups.get(key, [])

    def __post_init__(self) -> None:
        self.by_id = {q["id"]: q for q in self.queries}


class FileImages:
    """Images of the release, read through the capped reader (:func:`icl.data.images.decode_image`:
    header pixel cap, completeness check), paths confined to its root."""

    has_text = False  # the release's text versions carry their text in the records

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def path(self, ref: str) -> Path:
        if Path(ref).is_absolute() or ".." in Path(ref).parts:
            raise RecordError(f"image path {ref!r} must be relative to {self.root} and stay inside it")
        p = (self.root / ref).resolve()
        if not p.is_relative_to(self.root):
            raise RecordError(f"image path {ref!r} leaves {self.root} (symlink?)")
        return p

    def image(self, ref: str) -> np.ndarray:
        p = self.path(ref)
        if not p.is_file():
            raise RecordError(f"image {p} not found (or not a regular file)")
        try:
            img = decode_image(p, cv2.IMREAD_COLOR)
        except ImageError as exc:
            raise RecordError(f"image {exc}") from None
        return np.ascontiguousarray(img[:, :, ::-1])

    def text(self, ref: str) -> str:
        raise RecordError(f"{ref}: the release's image folders have no text version; the text-only "
                          f"variant reads the release's text folders")


def image_list(value: Any) -> list[str]:
    """A record's ``image`` field as a list of paths."""
    return [value] if isinstance(value, str) else list(value)


def _fail(where: str, msg: str) -> None:
    raise RecordError(f"{where}: {msg}")


def _need(rec: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(rec, dict):
        _fail(where, f"expected a JSON object, got {type(rec).__name__}")
    for k in keys:
        if k not in rec:
            _fail(where, f"missing field {k!r}")


def _check_images(value: Any, where: str, count: Optional[int] = None) -> None:
    ok = isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(v, str) for v in value))
    if not ok:
        _fail(where, f"field 'image' must be a path or a non-empty list of paths, got {value!r}")
    if count is not None and len(image_list(value)) != count:
        _fail(where, f"expected {count} image(s), got {len(image_list(value))}")


def validate(task: str, kind: str, records: Any, where: str, text_only: bool = False) -> list[dict[str, Any]]:
    """Check ``records`` (the parsed ``{kind}.json`` of ``task``) and give each an ``id`` (its
    own, else its index); raises :class:`RecordError` naming ``where``, the record and the field."""
    spec = get_task(task)
    if not isinstance(records, list):
        _fail(where, f"expected a JSON array of records, got {type(records).__name__}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, rec in enumerate(records):
        at = f"{where} record {i}"
        _need(rec, (), at)
        bad = bad_text(rec)  # text that is not Unicode fails here, naming the field, never at a write
        if bad:
            _fail(at, f"field {bad[0]!r}: {bad[1]}")
        rec = dict(rec)
        rec["id"] = str(rec.get("id", i))
        at = f"{where} record {i} (id {rec['id']})"
        if rec["id"] in seen:
            _fail(at, "duplicate id")
        seen.add(rec["id"])
        if task == "matching_mi" and kind == "support":
            _need(rec, ("same", "diff"), at)
            for side, want in (("same", "yes"), ("diff", "no")):
                _need(rec[side], ("question", "answer") + (() if text_only else ("image",)), f"{at}.{side}")
                if not text_only:
                    _check_images(rec[side]["image"], f"{at}.{side}", 2)
                if str(rec[side]["answer"]).lower() != want:
                    _fail(f"{at}.{side}", f"answer must be {want!r}, got {rec[side]['answer']!r}")
            out.append(rec)
            continue
        # text-to-image support items are a question and an image; everything else has an answer
        _need(rec, ("question",) if spec.direction != I2T and kind == "support" else ("question", "answer"), at)
        if spec.direction == I2T and not text_only:
            _need(rec, ("image",), at)
            _check_images(rec["image"], at, 2 if task in ("operator_induction_interleaved", "matching_mi") else None)
        if task == "matching_mi" and str(rec["answer"]).lower() not in ("yes", "no"):
            _fail(at, f"answer must be 'yes' or 'no', got {rec['answer']!r}")
        if task.startswith("operator_induction"):
            if kind == "query":
                _need(rec, ("operator",), at)
                if rec["operator"] not in OPERATORS:
                    _fail(at, f"operator must be one of {OPERATORS}, got {rec['operator']!r}")
            elif not (isinstance(rec["answer"], list) and len(rec["answer"]) == 3):
                _fail(at, f"support answer must be the three results [+, -, x], got {rec['answer']!r}")
        if task in PER_CLASS and kind == "query":
            _need(rec, ("classes", "support") + (("task_label",) if spec.direction != I2T else ()), at)
            label = rec["answer"] if spec.direction == I2T else rec["task_label"]
            classes = rec["classes"]
            if not isinstance(classes, list) or len(classes) < 2:
                _fail(at, f"classes must list at least two names, got {classes!r}")
            if label not in classes:
                _fail(at, f"answer class {label!r} is not in classes {classes}")
            for c in classes:
                if c not in rec["support"] or not isinstance(rec["support"][c], dict) or "images" not in rec["support"][c]:
                    _fail(at, f"support has no images for class {c!r}")
        if task == "cobsat":
            _need(rec, ("task", "latent"), at)
            _need(rec, (rec["latent"],), at)
            if kind == "support" and not text_only:
                _need(rec, ("image",), at)
            if kind == "query" and not (isinstance(rec["answer"], list) and len(rec["answer"]) == 2):
                _fail(at, f"answer must be [latent concept, non-latent concept], got {rec['answer']!r}")
        out.append(rec)
    return out


# Tasks whose episodes draw support only from the query records (``query["support"]``): the
# reference loader opens their ``support.json`` but never reads it, so it is neither required nor
# validated here (ys-zong/VL-ICL utils/ICL_utils.py, select_demonstration).
QUERY_ONLY = PER_CLASS


def folder_names(task: str, text_only: bool = False) -> tuple[str, ...]:
    """The folder names ``task`` may have in a release: the task's own name, or for the text-only
    variant its text folders (the published name, then the reference code's internal one)."""
    return get_task(task).text_folders if text_only else (task,)


def missing_folders(tasks: Any, text_only: bool = False) -> str:
    """``"clevr (clevr_text/query.json), …"``: the folders a user must provide for ``tasks``."""
    return ", ".join(f"{t} ({' or '.join(f'{n}/query.json' for n in folder_names(t, text_only))})" for t in tasks)


def release_folder(root: Path | str, task: str, text_only: bool = False) -> Optional[Path]:
    """The folder of ``task`` in the release at ``root`` (None when absent). The text-only variant
    takes the first present of the task's text folders (the published name, then the reference
    code's internal one)."""
    for name in folder_names(task, text_only):
        if (Path(root) / name / "query.json").is_file():
            return Path(root) / name
    return None


def present_tasks(root: Path | str, tasks: Any, text_only: bool = False) -> tuple[list[str], list[str]]:
    """``(present, absent)``: which of ``tasks`` the release at ``root`` holds."""
    present: list[str] = []
    absent: list[str] = []
    for t in tasks:
        (present if release_folder(root, t, text_only) is not None else absent).append(t)
    return present, absent


def _read_json(path: Path, h: Any, kind: str) -> Any:
    if not path.is_file():
        raise RecordError(f"{path}: not found (the release's {path.parent.name} folder has no {kind}.json)")
    raw = path.read_bytes()
    h.update(f"|{kind}:{len(raw)}:".encode())
    h.update(raw)
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise RecordError(f"{path}: invalid JSON{where}: {msg}") from None


def load_published(root: Path | str, task: str, text_only: bool = False) -> TaskData:
    """Load ``task`` from an unpacked release at ``root`` (``{root}/{task}/query.json`` and, for
    tasks that read it, ``support.json``; the text-only variant reads the task's text folder).
    Raises :class:`RecordError` (one line naming the file, record and field)."""
    root = Path(root)
    spec = get_task(task)
    if text_only and not spec.has_text:
        raise RecordError(f"task {task} has no text-only version")
    found = release_folder(root, task, text_only)
    if found is None:
        names = " or ".join(f"{root}/{n}/query.json" for n in (spec.text_folders if text_only else (task,)))
        raise RecordError(f"VL-ICL release: task {task} is absent (expected {names})")
    h = hashlib.sha256(f"vlicl-release/{found.name}".encode())
    queries = validate(task, "query", _read_json(found / "query.json", h, "query"), str(found / "query.json"),
                       text_only)
    support: list[dict[str, Any]] = []
    if task not in QUERY_ONLY:
        support = validate(task, "support", _read_json(found / "support.json", h, "support"),
                           str(found / "support.json"), text_only)
    return TaskData(task, queries, support, FileImages(root), h.hexdigest(), str(found), text_only)


def check_real_names(data: TaskData) -> None:
    """The real-name variant reads ``real_name`` of every query and of every class in its
    ``support``: a missing one is a one-line :class:`RecordError` naming the record and class."""
    where = f"{data.origin}/query.json" if data.origin != "builtin" else "built-in open_mi"
    for q in data.queries:
        if "real_name" not in q:
            _fail(f"{where} record {q['id']}", "missing field 'real_name' (the real_names variant needs it)")
        for c, entry in q["support"].items():
            if "real_name" not in entry:
                _fail(f"{where} record {q['id']} support[{c!r}]", "missing field 'real_name' (the real_names "
                      "variant needs it)")


class SceneImages:
    """Images drawn on demand from scene descriptions (the built-in data)."""

    has_text = True

    def __init__(self) -> None:
        self.scenes: dict[str, Any] = {}
        self._cache: dict[str, np.ndarray] = {}

    def add(self, ref: str, scene: Any) -> str:
        self.scenes[ref] = scene
        return ref

    def image(self, ref: str) -> np.ndarray:
        img = self._cache.get(ref)
        if img is None:
            img = self._scene(ref).render()
            img.setflags(write=False)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[ref] = img
        return img

    def text(self, ref: str) -> str:
        return self._scene(ref).caption()

    def _scene(self, ref: str) -> Any:
        try:
            return self.scenes[ref]
        except KeyError:
            raise RecordError(f"built-in image {ref!r} does not exist") from None

