"""Run a model adapter (or a built-in baseline) over a package and write a predictions JSONL.

Adapters come from ``icl.models.registry.get_model`` (imported only here, when asked for): they
are loaded once with ``load(device)``, then receive lists of at most ``batch_size``
:class:`~icl.benchmarks.best50.package.DetectionRequest` and return one string per request.
Each answer is appended to the predictions file at once, with the fields the scorer reads, so
an interrupted run loses nothing: running again into the same file skips finished samples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from icl.benchmarks.best50._fields import json_lines
from icl.benchmarks.best50.package import Package, Sample, build_request
from icl.benchmarks.best50.parse import format_boxes

class AdapterError(RuntimeError):
    """A model adapter cannot be created or answered out of contract."""


# Baselines answer from the sample itself: "oracle" gives the ground-truth grid boxes (the
# round-trip test of parsing and scoring), "copy-support" gives the support boxes' grid boxes.
BASELINES: dict[str, Callable[[Sample], str]] = {
    "oracle": lambda s: format_boxes(s.query_gt_boxes_tokens),
    "copy-support": lambda s: format_boxes(s.support_boxes_tokens),
}


def select_samples(package: Package, ks: Optional[Sequence[int]] = None, limit: Optional[int] = None) -> list[Sample]:
    """Samples of the chosen K (all by default), the first ``limit`` of each file when given."""
    chosen = []
    for k in package.ks if ks is None else ks:
        if k not in package.samples:
            raise ValueError(f"K={k} is not in the package (it has K = {package.ks})")
        chosen += package.samples[k][:limit]
    return chosen


def _resume(path: Path, label: str) -> set[tuple[int, str]]:
    """Keys already answered in ``path`` by ``label``; rewrites the file without a torn last line."""
    if not path.exists():
        return set()
    kept, done = [], set()
    for line, obj, error in json_lines(path):
        if error:
            continue  # a line cut short by an interrupted write; its sample is asked again
        if obj.get("model") != label:
            raise ValueError(f"{path}:{line}: written by model {obj.get('model')!r}, not {label!r}; "
                             f"use another output directory")
        if "k" not in obj or "sample_id" not in obj:
            raise ValueError(f"{path}:{line}: a predictions line without 'k' or 'sample_id' cannot be resumed")
        done.add((obj["k"], obj["sample_id"]))
        kept.append(json.dumps(obj))
    path.write_text("".join(s + "\n" for s in kept), encoding="utf-8")
    return done


def _line(sample: Sample, text: str, label: str) -> str:
    return json.dumps({
        "sample_id": sample.sample_id, "class": sample.cls, "k": sample.k,
        "query_image_size": list(sample.query_image_size),
        "query_gt_boxes_pixel": sample.query_gt_boxes_pixel.tolist(),
        "response": text, "model": label,
    })


def predict(samples: Sequence[Sample], out_path: str | Path, *, model: Optional[str] = None,
            baseline: Optional[str] = None, model_kwargs: Optional[dict[str, Any]] = None,
            device: str = "cpu", progress: bool = False) -> Path:
    """Answer every sample with ``model`` (an icl.models name) or ``baseline``; append to ``out_path``."""
    if (model is None) == (baseline is None):
        raise ValueError("predict: give exactly one of model or baseline")
    if baseline is not None and baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; known: {', '.join(BASELINES)}")
    label = model if model is not None else f"baseline:{baseline}"
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = _resume(out_path, label)
    todo = [s for s in samples if (s.k, s.sample_id) not in done]
    if not todo:
        return out_path
    if model is not None:
        try:
            from icl.models.registry import get_model
        except ImportError as exc:
            raise AdapterError(f"--model needs icl.models, which cannot be imported ({exc})") from exc
        adapter = get_model(model, **(model_kwargs or {}))
        adapter.load(device)
        batch = adapter.batch_size
    else:
        batch = 64
    from tqdm import tqdm

    with open(out_path, "a", encoding="utf-8") as f, tqdm(total=len(todo), disable=not progress, unit="sample") as bar:
        for start in range(0, len(todo), batch):
            chunk = todo[start:start + batch]
            if model is not None:
                texts = adapter.predict([build_request(s) for s in chunk])
                if not isinstance(texts, (list, tuple)) or len(texts) != len(chunk):
                    raise AdapterError(f"model {model!r} returned {type(texts).__name__} of length "
                                    f"{len(texts) if hasattr(texts, '__len__') else '?'} for {len(chunk)} requests")
                for s, t in zip(chunk, texts):
                    if not isinstance(t, str):
                        raise AdapterError(f"model {model!r} answered sample {s.sample_id!r} (k={s.k}) with "
                                        f"{type(t).__name__}; best50 adapters return text")
            else:
                texts = [BASELINES[baseline](s) for s in chunk]
            f.write("".join(_line(s, t, label) + "\n" for s, t in zip(chunk, texts)))
            f.flush()
            bar.update(len(chunk))
    return out_path
