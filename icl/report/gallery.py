"""The gallery of a generating run (VL-ICL text-to-image, CoBSAT, VIF): per task, for a sample of
items and every failure, the prompt as the model saw it (text, and the support set's images in
their place), each model's image and the judge's verdict, as thumbnails beside the report.

Written with the per-sample log (:func:`icl.run.outputs.samples.write_samples`) into ``gallery/``:
``gallery/gallery.json`` (what :func:`gallery_html` renders into ``report.html``) and the
thumbnails ``gallery/<sha256 of the PNG>.png`` (the long side :data:`THUMB` pixels: downscaled
with area averaging, a smaller image upscaled by nearest neighbour so its pixels stay pixels).
The page references them by relative path, ``loading="lazy"``, with their size; its
Content-Security-Policy allows images from the page's own origin (``img-src data: 'self'``) and
nothing else.

Which items: per task (the item group's ``task``), the :data:`PER_TASK` items whose key has the
smallest SHA-256 (a stable sample: the same run, and a longer run of the same plan, show the
same items), plus every failed item, up to :data:`MAX_FAILURES` per task (the page says how many
more samples.jsonl holds). An item failed when one of its lines is neither ``ok`` nor ``not
applicable`` (the model or the judge failed; a refusal is not a failure), has ``failed`` set, or
scores 0 on its verdict metric (the first of :data:`VERDICT_METRICS` it carries: ``correct`` for
VL-ICL, ``overall`` for CoBSAT; VIF's rubric has none, so only its failed lines count).

What each item shows: the prompt with its parts marked (the text right before an image: its
caption in the support set; text before the first caption: the task's instruction or
description; the text after the last image: the **query**, set apart; a prompt without images is
all query); each model under its short name (the label up to its arguments, numbered when two
share it) with its full label and model id on hover (``title``); each verdict as what it means
(the benchmark's :meth:`~icl.benchmarks.base.Benchmark.verdict`, e.g. "object right, attribute
wrong") with the judge's raw answers beside it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
import struct
from html import escape
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import cv2
import numpy as np

from icl.store.atomic import OutputWriteError, write_bytes, write_text

FOLDER = "gallery"
INDEX = "gallery.json"
SCHEMA = "icl-gallery-1"
#: long side of a thumbnail, pixels
THUMB = 128
#: sampled items per task
PER_TASK = 4
#: failed items shown per task (beyond the sample)
MAX_FAILURES = 40
#: a line whose first present metric of these is 0 is a failure (the judge said no)
VERDICT_METRICS = ("correct", "overall")
#: characters of one prompt text part / one verdict shown
MAX_TEXT = 600
_NAME = re.compile(r"^[0-9a-f]{32}\.png$")


def stable_rank(key: str) -> str:
    """The sampling order of an item: the SHA-256 of its key (no random state)."""
    return hashlib.sha256(key.encode()).hexdigest()


def failed(line: Mapping[str, Any]) -> bool:
    """Whether a samples.jsonl line is a failure (see the module)."""
    metrics = line.get("metrics") or {}
    if line.get("status") == "not applicable":  # the model refused the request: not a failure
        return False
    if line.get("status") != "ok" or metrics.get("failed"):
        return True
    for name in VERDICT_METRICS:
        if name in metrics:
            return metrics[name] is not None and float(metrics[name]) == 0.0
    return False


def pick(lines: Sequence[Mapping[str, Any]], per_task: int = PER_TASK,
         max_failures: int = MAX_FAILURES) -> list[dict[str, Any]]:
    """Per task (in first-seen order): the sampled item keys, the failed ones shown besides,
    how many failed in all and how many failed ones are not shown. ``lines``: samples.jsonl lines of generated images."""
    tasks: dict[str, dict[str, Any]] = {}
    for line in lines:
        task = str((line.get("group") or {}).get("task", ""))
        t = tasks.setdefault(task, {"task": task, "keys": {}, "failed": {}})
        t["keys"].setdefault(line["item"], None)
        if failed(line):
            t["failed"].setdefault(line["item"], None)
    out = []
    for t in tasks.values():
        sampled = sorted(t["keys"], key=stable_rank)[:per_task]
        fails = [k for k in t["failed"] if k not in sampled]
        out.append({"task": t["task"], "sampled": sampled, "failures": fails[:max_failures],
                    "failed": len(t["failed"]), "hidden": len(fails[max_failures:])})
    return out


def thumbnail(rgb: np.ndarray, size: int = THUMB) -> bytes:
    """A PNG of ``rgb`` (uint8 ``[h, w, 3]``) with its long side ``size`` pixels."""
    rgb = np.asarray(rgb)
    if rgb.ndim == 2:
        rgb = np.repeat(rgb[:, :, None], 3, axis=2)
    rgb = np.ascontiguousarray(rgb[:, :, :3]).astype(np.uint8, copy=False)
    h, w = rgb.shape[:2]
    scale = size / max(h, w, 1)
    shape = (max(1, round(w * scale)), max(1, round(h * scale)))
    small = cv2.resize(rgb, shape, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_NEAREST)
    ok, png = cv2.imencode(".png", cv2.cvtColor(small, cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("thumbnail: PNG encoding failed")
    return png.tobytes()


class _Thumbs:
    """Writes thumbnails under ``out/gallery`` by content, removing its earlier ones not used now."""

    def __init__(self, out: Path):
        self.out = out
        self.folder = out / FOLDER
        self.written: dict[str, tuple[int, int]] = {}

    def put(self, rgb: np.ndarray) -> dict[str, Any]:
        png = thumbnail(rgb)
        name = hashlib.sha256(png).hexdigest()[:32] + ".png"
        if name not in self.written:
            path = self.folder / name
            if not (path.is_file() and path.read_bytes() == png):
                self.folder.mkdir(exist_ok=True)
                write_bytes(path, png, durable=False)
            w, h = struct.unpack(">II", png[16:24])  # the PNG's IHDR chunk: width, height
            self.written[name] = (w, h)
        w, h = self.written[name]
        return {"src": f"{FOLDER}/{name}", "w": w, "h": h}

    def put_file(self, path: Path) -> Optional[dict[str, Any]]:
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        return None if bgr is None else self.put(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))

    def prune(self, before: Iterable[str]) -> None:
        for name in before:
            path = self.folder / name
            if _NAME.match(name) and name not in self.written and path.is_file():
                path.unlink()


def _before(folder: Path) -> list[str]:
    try:
        return list(json.loads((folder / INDEX).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def short_names(labels: Iterable[str]) -> dict[str, str]:
    """Model label -> the name a gallery shows: the label up to its ``[arguments]`` (the
    adapter's name), numbered in label order when two labels share it."""
    labels = sorted(set(labels))
    base = {label: label.split("[", 1)[0] or label for label in labels}
    seen: dict[str, int] = {}
    out = {}
    for label in labels:
        n = sum(1 for b in base.values() if b == base[label])
        seen[base[label]] = seen.get(base[label], 0) + 1
        out[label] = base[label] if n == 1 else f"{base[label]} #{seen[base[label]]}"
    return out


def prompt_roles(parts: Sequence[Any]) -> list[str]:
    """The role of each prompt part (see the module): ``instruction``, ``support`` (captions and
    images of the support set) or ``query``."""
    images = [i for i, p in enumerate(parts) if not isinstance(p, str)]
    if not images:
        return ["query"] * len(parts)
    # a text right before the first image is that image's caption; text before it, the instruction
    return ["instruction" if i < images[0] - 1 else "query" if i > images[-1] else "support"
            for i, p in enumerate(parts)]


def write_gallery(out: Path, lines: Sequence[Mapping[str, Any]], request_of: Callable[[str], Any],
                  verdict: Optional[Callable[[Mapping[str, float]], Optional[str]]] = None) -> Optional[Path]:
    """Write ``out/gallery/`` for the samples.jsonl ``lines`` of generated images (answers as
    ``samples/*.png`` under ``out``); ``request_of(item_key)``: the item's request (its
    ``prompt`` parts: text and RGB arrays); ``verdict(metrics)``: what a judged answer's scores
    mean, in words (the benchmark's ``verdict``). Returns gallery.json's path, None (and an
    earlier gallery removed) when no line holds a generated image."""
    thumbs = _Thumbs(out)
    folder = thumbs.folder
    if folder.exists() and not folder.is_dir():
        raise OutputWriteError(folder, NotADirectoryError(
            errno.ENOTDIR, "exists and is not a folder (icl writes the gallery there): move it away"))
    before = _before(folder)
    lines = [d for d in lines if (d.get("answer") or {}).get("png")
             or (d.get("request") or {}).get("type") == "GenerationRequest"]
    if not lines:
        thumbs.prune(before)
        if (folder / INDEX).is_file():
            (folder / INDEX).unlink()
        return None
    by_item: dict[str, list[Mapping[str, Any]]] = {}
    for d in lines:
        by_item.setdefault(d["item"], []).append(d)
    names = short_names(d["model"] for d in lines)
    tasks = []
    for t in pick(lines):
        items = []
        for key, why in [(k, "sample") for k in t["sampled"]] + [(k, "failure") for k in t["failures"]]:
            items.append(_item(key, why, by_item[key], request_of, thumbs, out, names, verdict))
        tasks.append({"task": t["task"], "failed": t["failed"], "hidden": t["hidden"], "items": items})
    folder.mkdir(exist_ok=True)
    index = {"schema": SCHEMA, "thumb": THUMB, "per_task": PER_TASK, "max_failures": MAX_FAILURES,
             "tasks": tasks, "files": sorted(thumbs.written)}
    write_text(folder / INDEX, json.dumps(index, ensure_ascii=False, indent=1) + "\n", durable=False)
    thumbs.prune(before)
    return folder / INDEX


def _item(key: str, why: str, lines: Sequence[Mapping[str, Any]], request_of: Callable[[str], Any],
          thumbs: _Thumbs, out: Path, names: Mapping[str, str],
          verdict: Optional[Callable[[Mapping[str, float]], Optional[str]]]) -> dict[str, Any]:
    prompt: list[dict[str, Any]] = []
    try:
        request = request_of(key)
        parts = list(getattr(request, "prompt", ()))
        for part, role in zip(parts, prompt_roles(parts)):
            prompt.append({"text": part[:MAX_TEXT], "role": role} if isinstance(part, str)
                          else {**thumbs.put(part), "role": role})
    except Exception as exc:  # an item that cannot be rebuilt still shows its answers
        prompt = [{"text": f"(request not rebuilt: {type(exc).__name__}: {exc})"[:MAX_TEXT]}]
    models: dict[str, dict[str, Any]] = {}
    for d in lines:
        m = models.get(d["model"])
        if m is None:
            png = (d.get("answer") or {}).get("png")
            m = models[d["model"]] = {
                "model": d["model"], "name": names.get(d["model"], d["model"]),
                "identity": f"{d['model']} (model id {d.get('model_id')})", "status": d.get("status"), "failed": False,
                "image": thumbs.put_file(out / png) if png and "/../" not in f"/{png}/" else None,
                "error": d.get("error") or d.get("reason"), "verdicts": []}
        m["failed"] = m["failed"] or failed(d)
        metrics = d.get("metrics") or {}
        score = next((f"{n}={metrics[n]:g}" for n in VERDICT_METRICS if metrics.get(n) is not None), None)
        judge = (d.get("judge") or {}).get("label")
        text = " | ".join(str(a) for a in d.get("judge_answers") or [] if a is not None)
        meaning = None
        if verdict is not None and d.get("status") == "ok":
            try:
                meaning = verdict(metrics)
            except Exception:  # a verdict that cannot be read in words shows its raw answers alone
                meaning = None
        if judge or score or text:
            m["verdicts"].append({"judge": judge, "score": score, "meaning": meaning, "text": text[:MAX_TEXT]})
    return {"item": key, "group": dict(lines[0].get("group") or {}), "why": why, "prompt": prompt,
            "models": list(models.values())}


# -- report.html -------------------------------------------------------------------------------
def _img(image: Any, alt: str) -> str:
    """An ``<img>`` of a thumbnail entry; anything but ``gallery/<hex>.png`` is refused."""
    if not isinstance(image, Mapping):
        return ""
    src = str(image.get("src", ""))
    folder, _, name = src.partition("/")
    w, h = image.get("w"), image.get("h")
    if folder != FOLDER or not _NAME.match(name) or not all(isinstance(v, int) and 0 < v <= 4 * THUMB for v in (w, h)):
        return ""
    return f'<img class="thumb" loading="lazy" src="{escape(src)}" width="{w}" height="{h}" alt="{escape(alt)}">'


def _prompt_html(parts: Sequence[Mapping[str, Any]]) -> str:
    """The prompt's parts in order, the query set apart in a box of its own (``role``; an index
    written before roles existed shows every part as before)."""
    def part(p: Mapping[str, Any]) -> str:
        if "src" in p:
            return _img(p, "support image" if p.get("role") != "query" else "query image")
        cls = "ptext instr" if p.get("role") == "instruction" else "ptext"
        return f'<span class="{cls}">{escape(str(p.get("text", "")))}</span>'

    context = "".join(part(p) for p in parts if p.get("role") != "query")
    query = "".join(part(p) for p in parts if p.get("role") == "query")
    return (context + (f'<div class="query"><span class="qlabel">query</span>{query}</div>' if query else ""))


def _verdict_html(v: Mapping[str, Any]) -> str:
    """One judge's verdict: what it means (or its score), then the raw answers beside it."""
    judge = escape(str(v.get("judge") or "score"))
    meaning = v.get("meaning") or v.get("score")
    head = f'{judge}: <span class="meaning">{escape(str(meaning))}</span>' if meaning else judge
    raw = f' <span class="raw" title="the judge\'s raw answers">raw: {escape(str(v["text"]))}</span>' \
        if v.get("text") else ""
    return f'<div class="verdict">{head}{raw}</div>'


def gallery_html(out: Path) -> str:
    """The report's gallery section from ``out/gallery/gallery.json`` ("" without one)."""
    try:
        index = json.loads((out / FOLDER / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(index, dict) or index.get("schema") != SCHEMA:
        return ""
    parts = [f'<p class="note">per task: the {index.get("per_task")} items whose key hashes lowest (a stable '
             f"sample) and every failed item (model or judge failed, or the judge said no; at most "
             f"{index.get('max_failures')} per task); thumbnails {index.get('thumb')} px, under "
             f'<a href="{FOLDER}/{INDEX}">{FOLDER}/</a>; every answer is in '
             f'<a href="samples.jsonl">samples.jsonl</a></p>']
    for t in index.get("tasks") or []:
        items = t.get("items") or []
        hidden = int(t.get("hidden") or 0)
        head = (f'<h3>{escape(str(t.get("task")))}</h3><p class="note">{len(items)} items shown; '
                f'{int(t.get("failed") or 0)} failed' + (f", {hidden} of them not shown" if hidden else "") + "</p>")
        rows = [head, '<div class="scroll"><table class="gallery"><tr><th>item</th><th>support set, then the query</th>'
                      "<th>answers and verdicts</th></tr>"]
        for it in items:
            group = ", ".join(f"{k}={v}" for k, v in (it.get("group") or {}).items() if k != "task")
            answers = []
            for m in it.get("models") or []:
                cls = "answer bad" if m.get("failed") else "answer"
                verdicts = "".join(_verdict_html(v) for v in m.get("verdicts") or [] if isinstance(v, Mapping))
                error = f'<div class="verdict">{escape(str(m["error"]))}</div>' if m.get("error") else ""
                image = _img(m.get("image"), f"answer of {m.get('name') or m.get('model')}") or "<div>(no image)</div>"
                name, identity = m.get("name") or m.get("model"), m.get("identity") or m.get("model")
                head = f'{escape(str(name))} [{escape(str(m.get("status")))}]'
                answers.append(f'<div class="{cls}"><div class="model" title="{escape(str(identity))}">{head}</div>'
                               f'{image}{verdicts}{error}</div>')
            prompt = _prompt_html([p for p in it.get("prompt") or [] if isinstance(p, Mapping)])
            rows.append(f'<tr><td>{escape(str(it.get("item")))}<br><span class="note">{escape(group)}; '
                        f'{escape(str(it.get("why")))}</span></td><td>{prompt}</td><td>{"".join(answers)}</td></tr>')
        rows.append("</table></div>")
        parts += rows
    return "".join(parts)
