"""best50 as a runner plugin (PROTOCOL §2, protocol ``best50-1``).

Items are the package's samples, one per (K, sample id); a model sees ``[support image, query
image, prompt]`` as one :class:`~icl.models.requests.ChatRequest` and answers text. Each answer
is scored on its own (matching counts at every threshold, one batched matching call per
batch); ``summarise`` sums the counts per class, mean over classes and pooled, per model and K.

Predictions made elsewhere are scored through the same path: ``--predictions FILE.jsonl`` makes
the ``best50-predictions`` model replay that file's answers (text, or pixel boxes).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np

from icl.benchmarks.base import Benchmark, Item, Option, int_list, positive_int
from icl.benchmarks.best50 import PROTOCOL_VERSION
from icl.benchmarks.best50.package import Package, Sample, load_image, load_package
from icl.benchmarks.best50.parse import format_boxes, parse_boxes
from icl.benchmarks.best50.score import (CLEAN_EXCLUDE, COUNTS, METRICS, THRESHOLDS, SampleCounts, aggregate_counts,
                                         sample_counts, sample_metrics)
from icl.data.release import NotPublished
from icl.models.requests import ChatRequest
from icl.report.schema import Metric, ResultsSpec

if TYPE_CHECKING:
    from icl.helpers import Job  # plots hands figures to the figure helpers

SYNTHETIC_VERSION = "1"
_CACHE = 256  # decoded images kept


def _path(text: str) -> Path:
    return Path(text).expanduser()


def pixel_answer(boxes: Any) -> str:
    """The replay form of pixel boxes (predictions files that hold boxes, not text)."""
    return json.dumps({"pred_boxes_pixel": [[float(v) for v in b] for b in boxes]})


def _pixel_boxes(text: str) -> Optional[np.ndarray]:
    """Boxes of a replayed pixel answer, or None when ``text`` is model text."""
    if not text.startswith('{"pred_boxes_pixel"'):
        return None
    try:
        obj = json.loads(text)
        boxes = np.asarray(obj["pred_boxes_pixel"], dtype=np.float64).reshape(-1, 4)
    except (ValueError, KeyError, TypeError):
        return None
    return boxes


class Best50(Benchmark):
    """Cross-image in-context detection over a best50 package (or the synthetic one)."""

    name = "best50"
    protocol = PROTOCOL_VERSION
    scorer_version = "1"
    request_types = (ChatRequest,)
    default_models = ("oracle",)
    # not fetched (what was looked for: docs/datasets.md): the package is passed as a folder
    releases = {"best50": NotPublished(
        "the best50 package is not known to icl as a Hub dataset (not verified either way); pass its folder with "
        "--data-root (docs/datasets.md)")}
    thread_safe_scoring = True  # score_batch reads only the item and the answer
    # results.csv: the pooled metrics (ratios of summed counts, score.py) per class and over all
    results_spec = ResultsSpec(task="class", shots="k", pooled_task="all", metrics=(
        Metric("P@50", column="_tp50", denominator="n_pred"), Metric("R@50", column="_tp50", denominator="n_gt"),
        Metric("F1@50", column="_2tp50", denominator="_pred_gt"),
        Metric("mF1@50:95", column="_2tp_mean", denominator="_pred_gt"),
        Metric("mIoU@50:95", column="_tp_iou_mean", denominator="n_gt"),
        Metric("mIoU_best", column="best_sum", denominator="n_gt")))
    options = (
        Option("package", None, "package folder (inputs/inputs_k{K}.jsonl + images); --fast writes a synthetic one",
               _path),
        Option("predictions", None, "score a predictions JSONL made elsewhere (model best50-predictions)", _path),
        Option("ks", None, "only these K, comma-separated (default: every K of the package)", int_list),
        Option("limit", None, "only the first N samples of each K", positive_int),
        Option("max_new_tokens", 512, "most new tokens of an answer (default 512)", int),
        Option("seed", 0, "seed of the synthetic package (--fast)", int),
    )

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(config)
        self._package: Optional[Package] = None
        self._images: OrderedDict = OrderedDict()

    @classmethod
    def models_by_default(cls, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The predictions file stands in for the models when one is given."""
        predictions = options.get("predictions")
        return (f"best50-predictions:path={predictions}",) if predictions is not None else cls.default_models

    @property
    def package(self) -> Package:
        if self._package is None:
            root = self.config["package"]
            if root is None:
                if not self.fast:
                    raise ValueError("best50 needs --package DIR (or --fast for the synthetic package)")
                root = self._synthetic()
            self._package = load_package(root)
        return self._package

    def _synthetic(self) -> Path:
        """The synthetic package in the published format, written once under the data root."""
        from icl.benchmarks.best50.synthetic import write_package
        from icl.data.registry import cache_root
        from icl.data.writer import build_once

        final = cache_root() / "builtin" / f"best50-synthetic-v{SYNTHETIC_VERSION}-s{self.config['seed']}"
        final.parent.mkdir(parents=True, exist_ok=True)
        seed = int(self.config["seed"])

        def build(tmp: Path) -> None:
            write_package(tmp, n_per_class=2, seed=seed)

        return build_once(final, build, "inputs")

    def items(self) -> list[Item]:
        pkg = self.package
        ks = self.config["ks"] or pkg.ks
        missing = [k for k in ks if k not in pkg.samples]
        if missing:
            raise ValueError(f"K = {missing} not in the package (it has K = {pkg.ks})")
        limit = self.config["limit"]
        chosen = [s for k in ks for s in pkg.samples[k][:limit]]
        # a query's K variants side by side: its image is decoded once for all of them
        first: dict[str, int] = {}
        for i, s in enumerate(chosen):
            first.setdefault(s.sample_id, i)
        chosen.sort(key=lambda s: (first[s.sample_id], s.k))
        return [Item(f"k{s.k}/{s.sample_id}@{pkg.sha256[:16]}", {"k": s.k, "class": s.cls, "sample_id": s.sample_id}, s)
                for s in chosen]

    def fingerprints(self) -> dict[str, str]:
        return {"package": self.package.sha256}

    def data_origin(self) -> dict[str, str]:
        if self.config["package"] is None:
            return {"package": f"built-in synthetic (sha256 {self.package.sha256[:16]})"}
        return {"package": f"release {self.config['package']} (sha256 {self.package.sha256[:16]})"}

    def describe(self) -> dict[str, Any]:
        if self.config["package"] is None and not self.fast:
            return {"package": ["none given: --package DIR (a best50 package), or --fast for the synthetic one"]}
        pkg = self.package
        return {"package": [str(self.config["package"] or "built-in synthetic")], "K": pkg.ks,
                "classes": pkg.classes, "samples": [sum(len(v) for v in pkg.samples.values())]}

    def _image(self, path: Path) -> np.ndarray:
        hit = self._images.get(path)
        if hit is None:
            hit = load_image(path)
            self._images[path] = hit
            while len(self._images) > _CACHE:
                self._images.popitem(last=False)
        return hit

    def request(self, item: Item, privileged: bool = False) -> ChatRequest:
        s: Sample = item.payload
        oracle = format_boxes(s.query_gt_boxes_tokens) if privileged else None
        return ChatRequest.user(f"k{s.k}/{s.sample_id}", self._image(s.support_image), self._image(s.query_image),
                                s.prompt, max_new_tokens=int(self.config["max_new_tokens"]), oracle_answer=oracle)

    # -- scoring ---------------------------------------------------------------------------------
    def _counts(self, items: Sequence[Item], responses: Sequence[Any]) -> SampleCounts:
        preds = []
        for it, text in zip(items, responses):
            s: Sample = it.payload
            boxes = _pixel_boxes(text) if isinstance(text, str) else None
            preds.append(boxes if boxes is not None else parse_boxes(text, s.query_image_size))
        return sample_counts(preds, [it.payload.query_gt_boxes_pixel for it in items], THRESHOLDS)

    def score(self, item: Item, response: Any, judgements: Sequence[str] = ()) -> dict[str, float]:
        return self.score_batch([item], [response], [judgements])[0]

    def score_batch(self, items: Sequence[Item], responses: Sequence[Any], judgements: Sequence[Sequence[str]],
                    device: Optional[str] = None) -> list[dict[str, float]]:
        c = self._counts(items, responses)
        per = sample_metrics(c)
        out = []
        for i in range(len(items)):
            m = {"best_sum": float(c.best_sum[i])}
            for j, t in enumerate(c.all_t):
                m[f"tp@{t:.2f}"] = float(c.tp[i, j])
                m[f"tp_iou@{t:.2f}"] = float(c.tp_iou[i, j])
            m.update({name: float(v[i]) for name, v in per.items()})
            out.append(m)
        return out

    def score_failure(self, item: Item, reason: str) -> Optional[dict[str, float]]:
        return None  # a failed answer is not scored; coverage in the report says so

    # -- summaries -----------------------------------------------------------------------------
    def summarise(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        all_t = THRESHOLDS + (() if 0.5 in THRESHOLDS else (0.5,))
        results, per_sample = [], []
        by_model: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            if r["status"] == "ok":
                by_model.setdefault(r["model"], []).append(r)
        self._coverage = {}
        for model, mine in by_model.items():
            counts = SampleCounts(
                np.array([r["n_pred"] for r in mine], dtype=np.int64), np.array([r["n_gt"] for r in mine], np.int64),
                np.array([r["best_sum"] for r in mine]),
                np.array([[r[f"tp@{t:.2f}"] for t in all_t] for r in mine]),
                np.array([[r[f"tp_iou@{t:.2f}"] for t in all_t] for r in mine]), THRESHOLDS)
            for row in aggregate_counts([r["k"] for r in mine], [r["class"] for r in mine], counts, CLEAN_EXCLUDE):
                results.append({"model": model, **{c: row[c] for c in ("k", "kind", "group", *COUNTS, *METRICS)}})
            per_sample += [{"model": model, "k": r["k"], "class": r["class"], "sample_id": r["sample_id"],
                            "n_pred": int(r["n_pred"]), "n_gt": int(r["n_gt"]), "tp@50": int(r["tp@50"]),
                            **{m: r[m] for m in METRICS}} for r in mine]
        self._coverage = {m: (len(by_model.get(m, [])), sum(1 for r in rows if r["model"] == m)) for m in
                          dict.fromkeys(r["model"] for r in rows)}
        tables: dict[str, list[dict[str, Any]]] = {"best50_results": results}
        for k in sorted({r["k"] for r in results}):
            tables[f"results_k{k}"] = [r for r in results if r["k"] == k]
        tables["per_sample"] = per_sample
        return tables

    def result_rows(self, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The counts whose pooled ratios are the metrics (score.py): F1 = 2 TP / (#pred + #GT)."""
        out: list[Mapping[str, Any]] = []
        for r in rows:
            if r["status"] != "ok" or "n_pred" not in r:
                out.append(r)
                continue
            tp = [float(r[f"tp@{t:.2f}"]) for t in THRESHOLDS]
            out.append({**r, "_tp50": float(r["tp@0.50"]), "_2tp50": 2 * float(r["tp@0.50"]),
                        "_pred_gt": float(r["n_pred"]) + float(r["n_gt"]), "_2tp_mean": 2 * float(np.mean(tp)),
                        "_tp_iou_mean": float(np.mean([float(r[f"tp_iou@{t:.2f}"]) for t in THRESHOLDS]))})
        return out

    def summary(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        from icl.report.tables import aligned

        table = [[r["model"], r["k"], "pooled " + r["group"], *(f"{r[m]:.4f}" for m in METRICS)]
                 for r in tables["best50_results"] if r["kind"] == "pooled"]
        return "\n".join([f"best50 ({self.protocol}): pooled over samples",
                          *aligned([["model", "K", "group", *METRICS], *table], right=[1, *range(3, 3 + len(METRICS))])])

    def report(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        from icl.benchmarks.best50.report import markdown_table

        lines = [f"Thresholds {', '.join(f'{t:.2f}' for t in THRESHOLDS)}; clean7 excludes "
                 f"{', '.join(CLEAN_EXCLUDE)}. Package SHA-256 `{self.package.sha256}`.", ""]
        for model, (scored, total) in getattr(self, "_coverage", {}).items():
            lines.append(f"- coverage `{model}`: {scored} of {total} planned samples scored")
        lines.append("")
        for model in dict.fromkeys(r["model"] for r in tables["best50_results"]):
            for k in sorted({r["k"] for r in tables["best50_results"] if r["model"] == model}):
                rows = [r for r in tables["best50_results"] if r["model"] == model and r["k"] == k]
                lines += [f"## {model}, K = {k}", "", markdown_table(rows), ""]
        return "\n".join(lines)

    def plots(self, tables: Mapping[str, list[dict[str, Any]]], out: Path,
              answers: Optional[Callable[[str], dict[str, Any]]] = None) -> list[Path | Job]:
        from icl import helpers
        from icl.benchmarks.best50.report import plot_metrics
        from icl.report.plots import safe_name

        out.mkdir(parents=True, exist_ok=True)
        models = list(dict.fromkeys(r["model"] for r in tables["best50_results"]))
        jobs: list[Path | Job] = []  # a model's figures per helper process (icl.helpers)
        for model in models:
            rows = [r for r in tables["best50_results"] if r["model"] == model]
            prefix = "" if len(models) == 1 else f"{safe_name(model)}_"
            jobs.append(helpers.submit("figures", plot_metrics, rows, out, prefix))
        return jobs  # collected by the runner (icl.run.outputs.files.Plots)


def _register() -> None:
    from icl.models.registry import register_model

    register_model("best50-predictions", "icl.benchmarks.best50.replay:Replay", replace=True)


_register()
