"""Load and validate a best50 package directory (PROTOCOL §2) and build model requests.

Layout (the package README is authoritative): ``inputs/inputs_k{K}.jsonl`` (K = 1, 2, 4, 8 in
the published package), one sample per line; image paths are relative to the package directory.
Loading is strict only where scoring or prompting depends on a field; a problem there is an
error naming the file, line and field (:class:`PackageError` lists every one):

- ``sample_id``, ``class``, ``prompt``: non-empty strings; ``sample_id`` unique within its file.
- ``k``: integer equal to the K of its file.
- ``support_image``, ``query_image``: package-relative paths to image files inside the package:
  an absolute path, a ``..`` component or a symlink leading out of the package is refused with
  one message, whether or not the file outside exists.
- ``support_image_size``, ``query_image_size``: ``[width, height]``, equal to the file's (read
  from the header, never decoded; images over the pixel cap of :mod:`icl.data.images` refused).
- ``support_boxes_pixel`` (exactly K boxes), ``query_gt_boxes_pixel`` (any number): lists of
  ``[x0, y0, x1, y1]`` with ``0 <= x0 < x1 <= width`` and ``0 <= y0 < y1 <= height``.

Everything else is a warning collected on :attr:`Package.warnings` (``file:line: message``;
one line per unknown field and file): ``support_boxes_tokens`` (one string of K concatenated
``<bbox_start><xA><yB><xC><yD><bbox_end>`` boxes) and ``query_gt_boxes_tokens`` (a list of one
such string per GT box) missing, of another type, or not within one grid step (``size / 1024``
pixels) of their pixel boxes; ``prompt_template`` or ``support_stem`` missing or not strings;
fields the README does not list. A sample's token boxes are the ones of its line when they are
usable, else the grid boxes of its pixel boxes, so they always agree with the pixel boxes.

Image sizes come from the file header (no decoding); EXIF orientation is ignored there and when
images are decoded for a model (:func:`load_image`), so both agree.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Optional

import numpy as np

from icl.benchmarks.best50._fields import (FieldError, get_boxes, get_int, get_size, get_str, json_lines, show)
from icl.benchmarks.best50.parse import GRID, parse_grid_boxes, pixels_to_grid
from icl.data.images import ImageError, check_size, decode_image, read_header

_INPUTS = re.compile(r"inputs_k([0-9]+)\.jsonl")
MAX_ERRORS_SHOWN = 30
#: the fields of one line, as the package README lists them
FIELDS = ("sample_id", "class", "k", "prompt", "prompt_template", "support_image", "support_image_size",
          "support_boxes_pixel", "support_boxes_tokens", "query_image", "query_image_size",
          "query_gt_boxes_pixel", "query_gt_boxes_tokens", "support_stem")


def format_problems(header: str, problems: list[str]) -> str:
    """``header`` then one problem per line, the first ``MAX_ERRORS_SHOWN`` of them."""
    shown = problems[:MAX_ERRORS_SHOWN]
    more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    return f"{header}:\n  " + "\n  ".join(shown) + more


class PackageError(ValueError):
    """A package directory is missing files or holds invalid lines; lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(format_problems(f"invalid best50 package ({len(problems)} problem(s))", problems))
        self.problems = problems


@dataclass(frozen=True)
class Sample:
    """One validated line of ``inputs_k{K}.jsonl`` (image paths resolved, sizes ``(w, h)``)."""

    sample_id: str
    cls: str
    k: int
    prompt: str
    prompt_template: str
    support_image: Path
    support_image_size: tuple[int, int]
    support_boxes_pixel: np.ndarray = field(repr=False)
    support_boxes_tokens: tuple = field(repr=False)
    query_image: Path
    query_image_size: tuple[int, int]
    query_gt_boxes_pixel: np.ndarray = field(repr=False)
    query_gt_boxes_tokens: tuple = field(repr=False)
    support_stem: str
    line: int


@dataclass
class Package:
    """A loaded package: ``samples`` by K in file order, ``sha256`` over the inputs files and
    every image they reference, ``warnings`` (``"inputs/inputs_k1.jsonl:3: ..."``) for the
    report."""

    root: Path
    samples: dict[int, list[Sample]]
    sha256: str
    warnings: list[str] = field(default_factory=list)
    _index: Optional[dict] = field(default=None, repr=False, compare=False)

    @property
    def ks(self) -> list[int]:
        return sorted(self.samples)

    @property
    def classes(self) -> list[str]:
        return sorted({s.cls for ss in self.samples.values() for s in ss})

    def find(self, k: int, sample_id: str) -> Optional[Sample]:
        """The sample ``sample_id`` of ``inputs_k{k}.jsonl``, or None."""
        if self._index is None:
            self._index = {(s.k, s.sample_id): s for ss in self.samples.values() for s in ss}
        return self._index.get((k, sample_id))


def image_size(path: Path, max_pixels: Optional[int] = None) -> tuple[int, int]:
    """``(width, height)`` of an image file from its header; :class:`~icl.data.images.ImageError`
    when the header is unreadable or claims more than the pixel cap."""
    header = read_header(path)
    check_size(header, path, max_pixels)
    return header.width, header.height


def load_image(path: Path, max_pixels: Optional[int] = None) -> np.ndarray:
    """RGB uint8 ``[H, W, 3]`` (EXIF orientation ignored, like the size check). Raises
    :class:`~icl.data.images.ImageError` (a ``ValueError``) for an image that is truncated,
    corrupt or over the pixel cap: the caller fails that sample only."""
    import cv2

    img = decode_image(path, cv2.IMREAD_COLOR, max_pixels)
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _check_boxes_in(boxes: np.ndarray, size: tuple[int, int], name: str) -> None:
    w, h = size
    for i, (x0, y0, x1, y1) in enumerate(boxes.tolist()):
        if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
            raise FieldError(name, f"box {i} {[x0, y0, x1, y1]} lies outside the {w}x{h} image")


def _quote(rel: str) -> str:
    """A path as written in the line, quoted (long ones shortened)."""
    return repr(rel) if len(rel) <= 300 else repr(rel[:300]) + "..."


def _outside(rel: str) -> str:
    return (f"{_quote(rel)} leads outside the package (image paths must be package-relative, without '..' "
            f"and without a symlink out of the package)")


def package_path(root: Path, root_resolved: Path, rel: str, name: str) -> Path:
    """``root / rel`` when it stays inside the package, else :class:`FieldError`. The checks
    (absolute, ``..``, resolved through symlinks) never look at whether the target exists, so
    the message is the same for outside files that exist and ones that do not."""
    if "\0" in rel:
        raise FieldError(name, f"{_quote(rel)} contains a NUL character")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or Path(rel).is_absolute() or ".." in pure.parts or ".." in Path(rel).parts:
        raise FieldError(name, _outside(rel))
    path = root / rel
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise FieldError(name, f"{_quote(rel)} cannot be resolved ({exc})") from None
    if not resolved.is_relative_to(root_resolved):
        raise FieldError(name, _outside(rel))
    try:
        is_file = path.is_file()
    except OSError as exc:  # e.g. a name longer than the filesystem allows
        raise FieldError(name, f"{_quote(rel)} cannot be read ({exc.strerror or exc})") from None
    if not is_file:
        raise FieldError(name, f"{_quote(rel)} does not exist in the package")
    return path


def _token_problem(value: Any, pixels: np.ndarray, size: tuple[int, int],
                   as_string: bool) -> tuple[Optional[list], str]:
    """``(grid boxes, "")`` when the token field is usable, else ``(None, what is wrong)``.

    ``as_string``: the README's type is one string of concatenated boxes (else a list of one
    string per box; lists of four integers are taken too)."""
    if isinstance(value, str):
        boxes = parse_grid_boxes(value)
        note = "" if as_string else "expected a list of token strings, got one string"
    elif isinstance(value, list):
        boxes = []
        for item in value:
            if isinstance(item, str) and len(parse_grid_boxes(item)) == 1:
                boxes.append(parse_grid_boxes(item)[0])
            elif (isinstance(item, list) and len(item) == 4
                  and all(isinstance(v, int) and not isinstance(v, bool) for v in item)):
                boxes.append(tuple(item))
            else:
                return None, f"{show(item)} is not one <bbox_start><xA><yB><xC><yD><bbox_end> box"
        note = "expected one string of concatenated token boxes, got a list" if as_string else ""
    else:
        return None, f"expected {'a string' if as_string else 'a list of strings'}, got {type(value).__name__}"
    if len(boxes) != len(pixels):
        return None, f"holds {len(boxes)} box(es), the pixel boxes {len(pixels)}"
    scale = np.array([size[0], size[1], size[0], size[1]], dtype=np.float64)
    for i, (tok, px) in enumerate(zip(boxes, pixels)):
        if not all(0 <= v <= GRID for v in tok):
            return None, f"box {i} {list(tok)} lies off the 0-{GRID} grid"
        err = np.abs(np.asarray(tok, dtype=np.float64) / GRID * scale - px)
        if (err > scale / GRID + 1e-6).any():
            return None, f"box {i} {list(tok)} does not match pixel box {px.tolist()} within one grid step"
    return boxes, note


def _tokens(obj: dict, name: str, pixels: np.ndarray, size: tuple[int, int], as_string: bool,
            warn: list[str]) -> tuple:
    if name not in obj:
        warn.append(f"missing field {name!r} (grid boxes taken from the pixel boxes)")
        return tuple(pixels_to_grid(pixels, size))
    boxes, problem = _token_problem(obj[name], pixels, size, as_string)
    if boxes is None:
        warn.append(f"field {name!r}: {problem} (grid boxes taken from the pixel boxes)")
        return tuple(pixels_to_grid(pixels, size))
    if problem:
        warn.append(f"field {name!r}: {problem}")
    return tuple(tuple(int(v) for v in b) for b in boxes)


def _optional_str(obj: dict, name: str, warn: list[str]) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        warn.append(f"missing field {name!r}" if name not in obj
                    else f"field {name!r}: expected a string, got {type(value).__name__}")
        return ""
    return value


def _sample(obj: dict, k: int, root: Path, root_resolved: Path, line: int,
            sizes: dict[Path, tuple[int, int]], warn: list[str], max_pixels: Optional[int]) -> Sample:
    sample_id, cls = get_str(obj, "sample_id"), get_str(obj, "class")
    got_k = get_int(obj, "k")
    if got_k != k:
        raise FieldError("k", f"expected {k} (the K of this file), got {got_k}")
    prompt = get_str(obj, "prompt")
    images = {}
    for name in ("support_image", "query_image"):
        rel = get_str(obj, name)
        path = package_path(root, root_resolved, rel, name)
        claimed = get_size(obj, name + "_size")
        if path not in sizes:
            try:
                sizes[path] = image_size(path, max_pixels)
            except ImageError as exc:
                raise FieldError(name, f"{_quote(rel)}: {str(exc).removeprefix(exc.path + ': ')}") from None
        if sizes[path] != claimed:
            raise FieldError(name + "_size", f"says {show(list(claimed))} but {rel} is {list(sizes[path])} "
                                             f"(width, height)")
        images[name] = (path, claimed)
    support = get_boxes(obj, "support_boxes_pixel", positive=True)
    if len(support) != k:
        raise FieldError("support_boxes_pixel", f"expected {k} boxes (K), got {len(support)}")
    gt = get_boxes(obj, "query_gt_boxes_pixel", positive=True)
    _check_boxes_in(support, images["support_image"][1], "support_boxes_pixel")
    _check_boxes_in(gt, images["query_image"][1], "query_gt_boxes_pixel")
    support_tok = _tokens(obj, "support_boxes_tokens", support, images["support_image"][1], True, warn)
    gt_tok = _tokens(obj, "query_gt_boxes_tokens", gt, images["query_image"][1], False, warn)
    return Sample(
        sample_id=sample_id, cls=cls, k=k, prompt=prompt,
        prompt_template=_optional_str(obj, "prompt_template", warn),
        support_image=images["support_image"][0], support_image_size=images["support_image"][1],
        support_boxes_pixel=support, support_boxes_tokens=support_tok,
        query_image=images["query_image"][0], query_image_size=images["query_image"][1],
        query_gt_boxes_pixel=gt, query_gt_boxes_tokens=gt_tok,
        support_stem=_optional_str(obj, "support_stem", warn), line=line)


def _hash(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def load_package(root: str | Path, max_pixels: Optional[int] = None) -> Package:
    """Read and validate every ``inputs/inputs_k*.jsonl`` of ``root``; raise :class:`PackageError`
    listing every refused line (``file:line: problem``). Warnings go to ``Package.warnings``.

    ``sha256`` covers the inputs files and every image they reference (path and content).
    ``max_pixels``: the image size cap (None: :mod:`icl.data.images`' default, 40 MP).
    """
    root = Path(root)
    inputs = root / "inputs"
    files = sorted(p for p in inputs.glob("inputs_k*.jsonl") if _INPUTS.fullmatch(p.name)) if inputs.is_dir() else []
    if not files:
        raise PackageError([f"{inputs}: no inputs_k{{K}}.jsonl files (expected inputs_k1.jsonl ... inputs_k8.jsonl)"])
    root_resolved = root.resolve()
    problems: list[str] = []
    warnings: list[str] = []
    samples: dict[int, list[Sample]] = {}
    sizes: dict[Path, tuple[int, int]] = {}
    for path in files:
        k = int(path.name[len("inputs_k"):-len(".jsonl")])  # the name matched _INPUTS above
        rel = path.relative_to(root).as_posix()
        seen: dict[str, int] = {}
        extra: dict[str, list[int]] = {}
        rows = samples.setdefault(k, [])
        n_problems = len(problems)
        try:
            lines = list(json_lines(path))
        except OSError as exc:
            problems.append(f"{rel}: cannot be read ({exc.strerror or exc})")
            continue
        for line, obj, error in lines:
            if error:
                problems.append(f"{rel}:{line}: {error}")
                continue
            warn: list[str] = []
            try:
                s = _sample(obj, k, root, root_resolved, line, sizes, warn, max_pixels)
            except FieldError as exc:
                problems.append(f"{rel}:{line}: {exc}")
                continue
            warnings += [f"{rel}:{line}: {w}" for w in warn]
            for name in obj:
                if name not in FIELDS:
                    extra.setdefault(name, []).append(line)
            if s.sample_id in seen:
                problems.append(f"{rel}:{line}: sample_id {show(s.sample_id)} repeats line {seen[s.sample_id]}")
                continue
            seen[s.sample_id] = line
            rows.append(s)
        for name, at in extra.items():
            warnings.append(f"{rel}:{at[0]}: unknown field {show(name)} (on {len(at)} line(s); ignored)")
        if not rows and len(problems) == n_problems:
            problems.append(f"{rel}: holds no samples")
    if problems:
        raise PackageError(problems)
    return Package(root=root, samples=samples, sha256=_hash(root, files + list(sizes)), warnings=warnings)
