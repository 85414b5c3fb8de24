"""Per-sample log of a run: ``samples.jsonl``, ``requests.jsonl`` and the image answers as PNGs
under ``samples/``, written from the store (by every run under ``--log-samples``, and by
``python -m icl.run export RUN_DIR`` for a finished run), like lm-evaluation-harness's
``samples_*.jsonl``.

``samples.jsonl``: one JSON object per (planned item, model that serves it, judge), in plan
order, then model label order (as results.json lists the models), then the run's judge order,
keys in a fixed order:

- ``item`` (key), ``group`` (the item's group columns), ``model`` (label), ``model_id``,
  ``judge`` (``{"label", "judge_id"}`` of the judge whose score the line holds; null without);
- ``status`` ok|failed|missing|not applicable (missing: no score stored; not applicable: the
  model refused the request, ``reason`` "refused" and ``error`` its sentence), ``reason``, ``error``;
- ``request``: ``hash`` (the cache key of the first request sent, PROTOCOL §1.4), ``steps``
  (answers asked: the first and its follow-ups), ``type``, ``images`` and ``text_sha256`` of
  the request's text summary (the first request, rebuilt from the plan as an unprivileged model
  sees it; images shown as ``<image>``), whose text ``requests.jsonl`` holds once;
- ``answer``: ``{"text": ...}``, ``{"png": "samples/<name>.png", "sha256": ...}`` or null;
- ``metrics`` (non-finite values as null, as in results.json), ``judge_answers`` (the text of
  each answer of the line's judge, in order), ``generation`` (a generator's record: seed, steps, guidance, size,
  output_size, batch; null for other models);
- ``compute``: everything that differs between two runs of the same plan: ``model_s`` (the
  item's share of its model calls: batch time / batch size, summed over follow-ups; 0 when
  answered from the store), ``score_s``, ``peak_memory_bytes`` and ``memory_kind`` (the peak of
  the item's calls, shared by a batch: ``cuda-max-allocated``, ``tracemalloc-peak`` or
  ``process-max-rss``, the process high-water mark), ``energy_j`` (NVML; null when not
  reported), and the generator's own ``latency_s`` and ``peak_bytes``.

Dropping ``compute``, two runs of the same plan give byte-identical files; results.json's
``artifacts`` records the SHA-256 of samples.jsonl without its ``compute`` objects
(:func:`stable_digest`), so it too is the same for both. PNG names are a hash
of the item key and model id (never the raw key: no path leaves ``samples/``). The folder's
``.samples-manifest.json`` lists the files this module wrote; it replaces those and never a file of
another origin. A run whose requests generate images gets its gallery (``gallery/``, shown in
report.html) written here too (:mod:`icl.report.gallery`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from icl.benchmarks.base import Benchmark, Item
from icl.report.gallery import write_gallery
from icl.report.tables import jsonable
from icl.store.atomic import atomic_open, write_bytes, write_text
from icl.run.errors import ConfigError
from icl.store import ScoreKey, Store

SAMPLES = "samples.jsonl"
REQUESTS = "requests.jsonl"
IMAGES = "samples"
MANIFEST = ".samples-manifest.json"
AUTO_LIMIT = 100_000  # planned items x models: --log-samples defaults on below, off from here
CHUNK = 256  # items read from the store at a time
_GENERATION_COMPUTE = ("latency_s", "peak_bytes", "memory")
_GALLERY_KEYS = ("item", "group", "model", "model_id", "judge", "status", "reason", "error", "request", "answer",
                 "metrics", "judge_answers")


def _status(score: Any) -> str:
    if score is None:
        return "missing"
    return "not applicable" if score.reason == "refused" else score.status


def log_samples(setting: Optional[bool], planned: int) -> bool:
    """Whether a run of ``planned`` (items x models) writes the per-sample log: the explicit
    setting, else on below :data:`AUTO_LIMIT`."""
    return setting if setting is not None else planned < AUTO_LIMIT


def image_name(item_key: str, model_id: str) -> str:
    """The PNG file name of one answer: a SHA-256 of item key and model id (safe in any path)."""
    return hashlib.sha256(f"{item_key}\0{model_id}".encode()).hexdigest()[:32] + ".png"


def request_summary(request: Any) -> tuple[str, int]:
    """(text, number of images) of a request: chat turns as ``role: parts`` lines, a generation
    prompt as its parts joined by spaces, images as ``<image>``; an analogy request (images only) by its task,
    dataset, query and shots."""
    def parts(seq: Sequence[Any]) -> tuple[str, int]:
        return " ".join(p if isinstance(p, str) else "<image>" for p in seq), sum(not isinstance(p, str) for p in seq)

    if hasattr(request, "messages"):
        lines, n = [], 0
        for m in request.messages:
            text, k = parts(m.content)
            lines.append(f"{m.role}: {text}")
            n += k
        return "\n".join(lines), n
    if hasattr(request, "prompt"):
        return parts(request.prompt)
    if hasattr(request, "context_inputs"):
        return (f"task={request.task} dataset={request.dataset} query={request.query_id} shots={request.shots}",
                2 * request.shots + 1)
    return json.dumps({f.name: getattr(request, f.name) for f in fields(request)
                       if isinstance(getattr(request, f.name), (str, int, float))}, sort_keys=True), 0


class _Images:
    """Writes answer PNGs under ``out/samples``, replacing only its own earlier files."""

    def __init__(self, out: Path):
        self.folder = out / IMAGES
        self.manifest = self.folder / MANIFEST
        if self.folder.exists() and not self.folder.is_dir():
            raise ConfigError(f"{self.folder}: exists and is not a folder; icl writes the image answers there: "
                              f"move it away")
        try:
            self.before: dict[str, str] = json.loads(self.manifest.read_text(encoding="utf-8"))["files"]
        except (OSError, ValueError, KeyError, TypeError):
            self.before = {}
        self.written: dict[str, str] = {}

    def put(self, name: str, png: bytes) -> str:
        path = self.folder / name
        digest = hashlib.sha256(png).hexdigest()
        if path.exists() and name not in self.before:
            if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                raise ConfigError(f"{path}: a file icl did not write is in the way of an image answer; "
                                  f"move it away and run again")
        else:
            self.folder.mkdir(exist_ok=True)
            write_bytes(path, png, durable=False)
        self.written[name] = digest
        return f"{IMAGES}/{name}"

    def close(self) -> None:
        for name, digest in self.before.items():  # own earlier files no longer answered, unless edited since
            path = self.folder / name
            if name not in self.written and "/" not in name and path.is_file() \
                    and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                path.unlink()
        if self.written or self.before:
            self.folder.mkdir(exist_ok=True)
            write_text(self.manifest, json.dumps({"files": dict(sorted(self.written.items()))}, indent=1) + "\n")


def _lines(bench: Benchmark, items: Sequence[Item], models: Sequence[tuple[str, str]],
           judges: Sequence[Optional[Mapping[str, Any]]], store: Store, applicable: Mapping[str, set[str]],
           images: _Images, requests: dict[str, dict]) -> Iterator[dict[str, Any]]:
    for start in range(0, len(items), CHUNK):
        chunk = items[start:start + CHUNK]
        keys = [it.key for it in chunk]
        summaries: dict[str, Optional[tuple[str, str, int]]] = {}
        per_model = {}
        for label, model_id in models:
            links = store.links(keys, model_id)
            answer_hashes = {}
            for k, step_hashes in links.items():
                answers = sorted(step for step in step_hashes if step.startswith("answer:"))
                if answers:
                    answer_hashes[k] = (step_hashes.get("answer:0"), step_hashes[answers[-1]], len(answers))
            responses = store.responses([h for *_, h, _n in answer_hashes.values()], model_id)
            scores, verdicts = {}, {}
            for judge in judges:
                judge_id = judge["judge_id"] if judge else ""
                for score in store.scores([ScoreKey(bench.name, bench.protocol, k, model_id, judge_id,
                                                    bench.scorer_version) for k in keys]):
                    scores[score.key.item_key, judge_id] = score
                judged = store.judge_answers(keys, model_id, judge_id) if judge_id else {}
                for k, found in judged.items():
                    verdicts[f"{k}|{model_id}", judge_id] = [r.body if r is not None and r.status == "ok" else None
                                                             for r in found]
            per_model[model_id] = (answer_hashes, responses, scores, verdicts)
        for it, (label, model_id), judge in ((it, m, j) for it in chunk for m in models for j in judges):
            if it.key not in applicable[label]:
                continue
            judge_id = judge["judge_id"] if judge else ""
            answer_hashes, responses, scores, verdicts = per_model[model_id]
            first, last, steps = answer_hashes.get(it.key, (None, None, 0))
            r = responses.get(last) if last is not None else None
            s = scores.get((it.key, judge_id))
            if it.key not in summaries:
                summaries[it.key] = _summary(bench, it, requests)
            summary = summaries[it.key]
            answer: Optional[dict[str, Any]] = None
            if r is not None and r.status == "ok" and r.kind == "text":
                answer = {"text": r.body}
            elif r is not None and r.status == "ok" and r.kind == "png" and isinstance(r.body, bytes):
                png = r.body
                answer = {"png": images.put(image_name(it.key, model_id), png),
                          "sha256": hashlib.sha256(png).hexdigest()}
            generation = dict(r.generation) if r is not None and r.generation else None
            gen_compute = {k: generation.pop(k) for k in _GENERATION_COMPUTE if k in generation} \
                if generation else {}
            yield {
                "item": it.key, "group": dict(it.group), "model": label, "model_id": model_id,
                "judge": {"label": judge["label"], "judge_id": judge_id} if judge else None,
                "status": _status(s),
                "reason": s.reason if s is not None else None, "error": s.error if s is not None else None,
                "request": {"hash": first, "steps": steps, "type": summary and summary[0],
                            "images": summary and summary[2], "text_sha256": summary and summary[1]},
                "answer": answer,
                "metrics": dict(sorted(s.metrics.items())) if s is not None else {},
                "judge_answers": verdicts.get((f"{it.key}|{model_id}", judge_id), []),
                "generation": generation,
                "compute": {"model_s": s.model_s if s is not None else None,
                            "score_s": s.score_s if s is not None else None,
                            "peak_memory_bytes": s.peak_memory_bytes if s is not None else None,
                            "memory_kind": s.memory_kind if s is not None else None,
                            "energy_j": s.energy_j if s is not None else None,
                            **({"generation": gen_compute} if gen_compute else {})},
            }


def _summary(bench: Benchmark, item: Item, requests: dict[str, dict]) -> Optional[tuple[str, str, int]]:
    """(request type, text SHA-256, images) of ``item``'s first request; its text kept once."""
    try:
        request = bench.request(item, False)
    except Exception:  # an item that cannot be built is a failed sample; its line says so
        return None
    text, n = request_summary(request)
    digest = hashlib.sha256(text.encode()).hexdigest()
    requests.setdefault(digest, {"text_sha256": digest, "type": type(request).__name__, "images": n, "text": text})
    return type(request).__name__, digest, n


def _stable_text(line: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in line.items() if k != "compute"}, ensure_ascii=False, allow_nan=False) + "\n"


def stable_digest(path: Path) -> str:
    """SHA-256 of a samples.jsonl without its ``compute`` objects (what results.json records)."""
    digest = hashlib.sha256()
    for text in path.read_text(encoding="utf-8").splitlines():
        digest.update(_stable_text(json.loads(text)).encode())
    return digest.hexdigest()


def write_samples(out: Path, bench: Benchmark, items: Sequence[Item], models: Sequence[tuple[str, str]],
                  judges: Sequence[Mapping[str, Any]], store: Store,
                  applicable: Mapping[str, Sequence[Item]]) -> dict[str, str]:
    """Write ``samples.jsonl``, ``requests.jsonl`` and the answer PNGs into ``out`` from
    ``store`` (``judges``: the run's, each with ``label`` and ``judge_id``; ``applicable``: per
    model label, the items it was asked); returns
    ``{file: SHA-256}`` of the two JSONL files, samples.jsonl's without the compute objects
    (:func:`stable_digest`)."""
    images = _Images(out)
    models = sorted(models)  # results.json's order (sorted labels): a run and its export agree
    requests: dict[str, dict] = {}
    keys = {label: {it.key for it in mine} for label, mine in applicable.items()}
    digest = hashlib.sha256()  # of the lines without their compute: equal for two runs of a plan
    generated: list[dict[str, Any]] = []  # the lines of generated images, for the gallery
    with atomic_open(out / SAMPLES, "w") as f:
        for line in _lines(bench, items, models, list(judges) or [None], store, keys, images, requests):
            line = jsonable(line)
            f.write(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n")
            digest.update(_stable_text(line).encode())
            if line["request"]["type"] == "GenerationRequest":
                generated.append({k: line[k] for k in _GALLERY_KEYS})
    images.close()
    by_key = {it.key: it for it in items}
    write_gallery(out, generated, lambda key: bench.request(by_key[key], False), bench.verdict)
    request_text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests.values())
    write_text(out / REQUESTS, request_text)
    return {SAMPLES: digest.hexdigest(), REQUESTS: hashlib.sha256(request_text.encode()).hexdigest()}
