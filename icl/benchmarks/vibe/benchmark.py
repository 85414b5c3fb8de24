"""The visual in-context benchmark as a runner plugin (PROTOCOL §1, protocol ``vibe-1``).

Items are (dataset, task, query, shots). The key carries the dataset and task versions, the
context list's hash and the seed, so a changed dataset, decoder or context list is never
counted as done. Episodes (query, target, context pairs at the largest shot count) are built
once per (dataset, task, query) and kept in a bounded cache for scoring.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np

from icl.helpers import Deferred, resolved
from icl.benchmarks.base import Benchmark, Item, Option, comma_list, flag, int_list, positive_int
from icl.benchmarks.vibe import diagnostics as diag
from icl.benchmarks.vibe.diagnostics import SENSITIVITY_FRACTION
from icl.benchmarks.vibe.plan import DEFAULT_MODELS, PROTOCOL, Plan, context_hash, make_plan, qualitative
from icl.data.convert.releases import RELEASES as VISUAL_RELEASES
from icl.data.seeds import derive_seed
from icl.benchmarks.vibe.tasks.base import validate_prediction
from icl.benchmarks.vibe.tasks.image import ImageTask, lpips_batch
from icl.models.requests import AnalogyRequest
from icl.report import Scored, TaskSpec, aggregate, markdown_section, rank_models, rank_rows, summary_text
from icl.report.aggregate import attach_rank_intervals, cap
from icl.report.schema import Metric, ResultsSpec
from icl.report.tables import RANK_COLUMNS, RESULT_COLUMNS

if TYPE_CHECKING:
    from icl.helpers import Job  # plots hands figures to the figure helpers

_CACHE = 512  # loaded samples and episodes kept


@dataclass(frozen=True)
class _Payload:
    dataset: str
    task: str
    query: str
    shots: int
    contexts: tuple[str, ...]  # at the largest shot count
    donor: Optional[str] = None  # context sensitivity: the query whose first ``shots`` contexts are shown
    donor_contexts: tuple[str, ...] = ()


class Vibe(Benchmark):
    """13 task names over canonical datasets; oracle, copy-target and identity by default."""

    name = "vibe"
    protocol = PROTOCOL
    # 2: encoding_lossless beside every score; 3: LPIPS with each image through the trunk alone;
    # 4: the diagnostics (hand-through, copy, palette adherence) beside every score
    scorer_version = "4"
    request_types = (AnalogyRequest,)
    default_models = DEFAULT_MODELS
    # the 14 public releases its datasets are converted from, each published off the Hub: fetch
    # says where to get one and how to convert it (icl/data/convert/releases.py, beside the converters)
    releases = VISUAL_RELEASES
    thread_safe_scoring = True  # the caches below are locked
    results_spec = ResultsSpec(task="task", subset=("dataset",), shots="shots", data="dataset", metrics=(
        Metric("miou"), Metric("precision"), Metric("recall"), Metric("f1"), Metric("ap50"),
        Metric("rmse", "lower", "m"), Metric("abs_rel", "lower"), Metric("psnr", unit="dB"), Metric("ssim"),
        Metric("lpips", "lower")))
    options = (
        Option("tasks", None, "comma-separated task names (default: all)", comma_list),
        Option("datasets", None, "comma-separated dataset names (default: all under the data root)", comma_list),
        Option("shots", (1,), "comma-separated shot counts K (default: 1)", int_list),
        Option("limit", None, "at most N test queries per (dataset, task)", positive_int),
        Option("seed", 0, "global seed of splits, contexts and noise (default: 0)", int),
        Option("qualitative", 3, "samples per task in the qualitative grids (default: 3)", int),
        Option("sensitivity_fraction", SENSITIVITY_FRACTION, "share of queries asked again with another query's "
               f"context, for the context-sensitivity diagnostic (0 switches it off; default {SENSITIVITY_FRACTION})",
               float),
        Option("rank_reference", False, "rank the reference models (oracle, identity) too (PROTOCOL §1.4: not "
               "ranked by default)", flag),
    )

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(config)
        from icl.ops import lpips_weights

        if not 0.0 <= float(self.config["sensitivity_fraction"]) <= 1.0:
            raise ValueError(f"benchmark 'vibe', option 'sensitivity_fraction': expected a share in [0, 1], got "
                             f"{self.config['sensitivity_fraction']!r}")

        # LPIPS scores depend on its weights: their digest is part of every score's key
        self.lpips = lpips_weights("alex")
        # per instance (the runner reads it from the instance); the class's own version stays as it is
        digest = self.lpips.sha256[:16] if self.lpips else "missing"
        self.scorer_version = f"{type(self).scorer_version}+lpips:{digest}"  # type: ignore[misc]
        self.plan: Optional[Plan] = None
        self._lock = threading.RLock()
        self._samples: OrderedDict = OrderedDict()
        self._episodes: OrderedDict = OrderedDict()
        self._items: dict[str, Item] = {}
        self._diagnostics: list[dict[str, Any]] = []

    # -- plan ----------------------------------------------------------------------------------
    def _plan(self) -> Plan:
        if self.plan is None:
            c = self.config
            self.plan = make_plan(c["tasks"], c["datasets"], c["shots"], c["limit"], int(c["seed"]),
                                  self.data_root, self.fast)
        return self.plan

    def items(self) -> list[Item]:
        plan = self._plan()
        out, swapped = [], []
        fraction = float(self.config["sensitivity_fraction"])
        for g in plan.groups:
            # the content digest: an edited dataset with an unchanged version is never "done"
            ds_version = f"{plan.datasets[g.dataset].meta.version}#{plan.datasets[g.dataset].content_digest()[:16]}"
            t_version = plan.tasks[g.task].version
            for q in g.queries:
                ctx = tuple(g.contexts[q])
                picked = diag.sensitivity_picked(plan.seed, g.dataset, g.task, q, fraction)
                for k in plan.shots:
                    key = (f"{g.dataset}@{ds_version}/{g.task}@{t_version}/{q}/k{k}/"
                           f"c{context_hash(list(ctx[:k]))}/s{plan.seed}")
                    group = {"dataset": g.dataset, "task": g.task, "shots": k, "query": q}
                    out.append(Item(key, group, _Payload(g.dataset, g.task, q, k, ctx)))
                    other = diag.donor(plan.seed, g.dataset, g.task, q, g.contexts, k) if picked else None
                    if other is not None:  # the same query with another query's context (diagnostics)
                        theirs = tuple(g.contexts[other][:k])
                        swapped.append(Item(f"{key}/swap:{other}/c{context_hash(list(theirs))}",
                                            {**group, "context": "swapped"},
                                            _Payload(g.dataset, g.task, q, k, ctx, other, theirs)))
        out += swapped
        self._items = {it.key: it for it in out}
        return out

    def data_origin(self) -> dict[str, str]:
        from icl.data.registry import builtin_datasets

        plan, builtin = self._plan(), set(builtin_datasets())
        return {n: "built-in synthetic" if n in builtin else
                f"release, converted (version {d.meta.version}, content sha256 {d.content_digest()[:16]})"
                for n, d in sorted(plan.datasets.items())}

    def data_failures(self) -> list[tuple[str, str, Optional[str]]]:
        plan = self._plan()
        return [(f"dataset {i.dataset!r}, sample {i.sample_id!r} (tasks {', '.join(i.tasks)})", i.message, i.path)
                for i in plan.issues]

    def write_artifacts(self, out: Path) -> dict[str, str]:
        from icl.data.contexts import write_context_csv

        return {"contexts.csv": write_context_csv(self._plan().context_rows, out / "contexts.csv")}

    def fingerprints(self) -> dict[str, str]:
        plan = self._plan()
        out = {f"dataset:{n}": d.meta.version for n, d in sorted(plan.datasets.items())}
        out["lpips:alex"] = f"{self.lpips.sha256} ({self.lpips.source})" if self.lpips else "missing"
        return out

    def describe(self) -> dict[str, Any]:
        from icl.benchmarks.vibe.combinations import combinations, kept_counts, present
        from icl.benchmarks.vibe.tasks.registry import list_tasks
        from icl.data.registry import data_root, list_datasets

        found = present(data_root(self.data_root))
        return {"tasks": list_tasks(), "datasets": sorted(list_datasets(self.data_root)),
                "paper combinations": [f"{len(found)} of {len(combinations())} present under {data_root(self.data_root)}"]
                + [f"{c.dataset}/{c.task}" for c in found],
                "converted datasets": kept_counts(data_root(self.data_root))}

    # -- requests --------------------------------------------------------------------------------
    def _sample(self, dataset: str, sample_id: str, parts: tuple[str, ...]) -> Any:
        key = (dataset, sample_id, parts)
        with self._lock:
            hit = self._samples.get(key)
            if hit is not None:
                self._samples.move_to_end(key)
                return hit
        sample = self._plan().datasets[dataset].load(sample_id, parts=parts)
        with self._lock:
            self._samples[key] = sample
            while len(self._samples) > _CACHE:
                self._samples.popitem(last=False)
        return sample

    def _episode(self, p: _Payload, shown: bool = False) -> tuple[Any, np.ndarray]:
        """The item's episode; ``shown``: the one the model sees (the donor's contexts, when replaced)."""
        contexts = p.donor_contexts if shown and p.donor is not None else p.contexts
        key = (p.dataset, p.task, p.query, contexts)
        with self._lock:
            hit = self._episodes.get(key)
            if hit is not None:
                self._episodes.move_to_end(key)
                return hit
        plan = self._plan()
        ds, task = plan.datasets[p.dataset], plan.tasks[p.task]
        parts = tuple(task.parts)
        query = self._sample(p.dataset, p.query, parts)
        episode = task.make_episode(query, [self._sample(p.dataset, c, parts) for c in contexts], plan.seed, ds.meta)
        encoded = task.encode(episode.target, ds.meta)
        with self._lock:
            self._episodes[key] = (episode, encoded)
            while len(self._episodes) > _CACHE:
                self._episodes.popitem(last=False)
        return episode, encoded

    def request(self, item: Item, privileged: bool = False) -> AnalogyRequest:
        p: _Payload = item.payload
        episode, encoded = self._episode(p, shown=True)
        seed = derive_seed(self._plan().seed, p.dataset, "test", p.query, f"model/{p.task}/k{p.shots}")
        # a replaced context is another request of the same query: its id says so (a model keeping
        # anything per query id never answers it from the original)
        query_id = p.query if p.donor is None else f"{p.query}/context-of:{p.donor}"
        return AnalogyRequest(p.task, p.dataset, query_id, list(episode.context_inputs[:p.shots]),
                              list(episode.context_outputs[:p.shots]), episode.query_input,
                              tuple(encoded.shape[:2]), encoded if privileged else None, None, seed)

    # -- scoring ---------------------------------------------------------------------------------
    def score(self, item: Item, response: Any, judgements: Sequence[str] = ()) -> dict[str, float]:
        return resolved(self.score_batch([item], [response], [judgements]))[0]

    def score_batch(self, items: Sequence[Item], responses: Sequence[Any], judgements: Sequence[Sequence[str]],
                    device: Optional[str] = None) -> list[dict[str, float]]:
        plan = self._plan()
        out: list[Optional[dict[str, float]]] = [None] * len(items)
        groups: dict[tuple[str, str, int], list[int]] = {}
        for i, it in enumerate(items):
            p: _Payload = it.payload
            groups.setdefault((p.dataset, p.task, p.shots), []).append(i)
        where = {} if device is None else {"device": device}
        with lpips_batch():  # the batch's host LPIPS: one job for the LPIPS helper, sent at the end of the block
            for (dataset, task_name, shots), idx in groups.items():
                task, meta = plan.tasks[task_name], plan.datasets[dataset].meta
                episodes = [self._episode(items[i].payload)[0] for i in idx]
                scores = task.evaluate([responses[i] for i in idx], [e.target for e in episodes],
                                       [e.context_targets[:shots] for e in episodes], meta, defer=True, **where)
                colour_coded = not isinstance(task, ImageTask)
                for i, e, s in zip(idx, episodes, scores):
                    # host LPIPS may still be on its way (Deferred: the runner stores it once there)
                    row: dict[str, Any] = {k: v if isinstance(v, Deferred) else float(v) for k, v in s.items()}
                    seen = self._episode(items[i].payload, shown=True)[0]
                    row.update(diag.sample_diagnostics(validate_prediction(0, responses[i]), seen.query_input,
                                                       seen.context_outputs[:shots], colour_coded))
                    # where the encoding is lossy the oracle scores its ceiling, not perfection
                    lossy = task.oracle_ceiling(e.target, e.context_targets[:shots], meta)
                    row["encoding_lossless"] = 0.0 if lossy else 1.0
                    out[i] = row
        # every index is in a group; a value may be Deferred (Benchmark.score_batch)
        return out  # type: ignore[return-value]

    def helper_pools(self, host: bool) -> tuple[str, ...]:
        """LPIPS of host predictions runs in a helper process (its torch import overlaps the run),
        when a task asked for scores it and its weights are installed (read from the options, not
        the plan: the helper starts before the planning)."""
        from icl.benchmarks.vibe.tasks.registry import get_task, list_tasks

        names = set(self.config["tasks"] or list_tasks()) & set(list_tasks())
        lpips = any("lpips" in get_task(n).metrics for n in names)
        return ("lpips",) if host and lpips and self.lpips is not None else ()

    # -- summaries -----------------------------------------------------------------------------
    def _specs(self) -> dict[str, TaskSpec]:
        return {n: TaskSpec(n, tuple(t.metrics), tuple(t.rank_metrics), frozenset(t.lower_is_better))
                for n, t in self._plan().tasks.items()}

    def summarise(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        reserved = {"model", "model_id", "key", "status", "reason", "dataset", "task", "shots", "query",
                    "encoding_lossless", "context", *diag.DIAGNOSTICS}
        swapped = [r for r in rows if r.get("context") == "swapped"]  # diagnostics only, never in the results
        rows = [r for r in rows if r.get("context") != "swapped"]
        ceiling: dict[tuple[str, str, int], dict[str, float]] = {}
        for r in rows:  # the same for every model: counted once per item
            if "encoding_lossless" in r:
                ceiling.setdefault((r["dataset"], r["task"], int(r["shots"])), {})[r["key"]] = r["encoding_lossless"]
        self._ceiling: list[dict[str, Any]] = [
            {"dataset": d, "task": t, "shots": k, "n": len(v), "lossless": sum(v.values()) / len(v)}
            for (d, t, k), v in sorted(ceiling.items())]
        scored = [Scored(r["model"], r["model_id"], r["dataset"], r["task"], int(r["shots"]), r["query"], r["status"],
                         {k: v for k, v in r.items() if k not in reserved}) for r in rows]
        specs = self._specs()
        aggs = aggregate(scored, specs, self.name)
        order = list(dict.fromkeys(r["model"] for r in rows))
        ranked = order if self.config["rank_reference"] else [m for m in order if m not in self.reference_models]
        tables = rank_models([a for a in aggs if a.model in ranked], specs, ranked)
        attach_rank_intervals(tables, [r for r in scored if r.model in ranked], specs, self.name)
        # the terminal and report tables show every model; only the ranked ones get ranks
        shown = rank_models(aggs, specs, order)
        by_shots = {t.shots: t for t in tables}
        for full in shown:
            part = by_shots.get(full.shots)
            full.metric_ranks = part.metric_ranks if part else {t: {} for t in full.tasks}
            full.task_ranks = part.task_ranks if part else {}
            full.overall = part.overall if part else {}
        self._aggs, self._tables, self._shown, self._order = aggs, tables, shown, order
        self._own_rows, self._swapped_rows = rows, swapped
        # the output changes need both predictions: result_files fills them in (same list object)
        self._diagnostics[:] = diag.diagnostics_table(rows, swapped, self._rank_metric(), {})
        return {"vibe_results": [{c: getattr(a, c) for c in RESULT_COLUMNS} for a in aggs],
                "ranks": [{c: r[c] for c in RANK_COLUMNS} for r in rank_rows(tables)],
                "oracle_ceiling": self._ceiling, "diagnostics": self._diagnostics}

    def _rank_metric(self) -> dict[str, str]:
        return {n: t.rank_metrics[0] for n, t in self._plan().tasks.items()}

    def result_files(self, rows: Sequence[Mapping[str, Any]],
                     answers: Callable[[str], dict[str, Any]]) -> dict[str, str]:
        """``context_sensitivity.csv``: per swapped item and model, the output change (1 - SSIM of
        the two predictions) and both values of the task's first rank metric; its means complete
        the ``diagnostics`` table (written by the one table writer, :func:`icl._csv.csv_text`)."""
        from icl.report.tables import csv_text

        own = {(r["model"], r["dataset"], r["task"], int(r["shots"]), r["query"]): r for r in self._own_rows}
        metric = self._rank_metric()
        changes: dict[tuple, float] = {}
        table: list[list[Any]] = []
        for s in sorted(self._swapped_rows, key=lambda r: (r["model"], r["key"])):
            k = (s["model"], s["dataset"], s["task"], int(s["shots"]), s["query"])
            o = own.get(k)
            if o is None or s["status"] != "ok" or o["status"] != "ok":
                continue
            a, b = answers(o["key"]).get(s["model"]), answers(s["key"]).get(s["model"])
            if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
                continue
            changes[k] = diag.output_change(validate_prediction(0, a), validate_prediction(0, b))
            m = metric[s["task"]]
            table.append([*k, self._items[s["key"]].payload.donor, f"{changes[k]:.6g}", m, o.get(m, ""), s.get(m, "")])
        self._diagnostics[:] = diag.diagnostics_table(self._own_rows, self._swapped_rows, metric, changes)
        columns = ["model", "dataset", "task", "shots", "query", "donor", "output_change", "metric", "original", "swapped"]
        return {"context_sensitivity.csv": csv_text(table, columns)} if self._swapped_rows else {}

    def result_rows(self, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """PSNR capped as in the aggregates (PROTOCOL §1.4: identical images score +inf); the
        context-sensitivity items (another query's context) are diagnostics, never results."""
        return [{**r, "psnr": cap("psnr", float(r["psnr"]))} if "psnr" in r else r for r in rows
                if r.get("context") != "swapped"]

    def summary(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        return summary_text(self._shown)

    def report(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        refs = ", ".join(sorted(self.reference_models)) or "none in this run"
        note = [f"Reference models ({refs}) are reported but not ranked (PROTOCOL §1.4; `--rank-reference true` "
                "ranks them). Where the encoding is lossy (keypoints closer than 2r, boxes under 3 px, query classes "
                "missing from the contexts, depth outside the range) the oracle scores the encoding's ceiling:"]
        note += [f"- {c['dataset']} / {c['task']} (shots {c['shots']}): lossless on {100 * c['lossless']:.1f}% of "
                 f"{c['n']} samples" for c in self._ceiling if c["lossless"] < 1.0] \
            or ["- every sample of this run is encoded losslessly (`oracle_ceiling.csv`)"]
        return ("\n".join(note) + "\n\n" + markdown_section(self._aggs, self._shown)
                + ("\n" + diag.markdown(self._diagnostics) if self._diagnostics else ""))

    def plots(self, tables: Mapping[str, list[dict[str, Any]]], out: Path,
              answers: Optional[Callable[[str], dict[str, Any]]] = None) -> list[Path | Job]:
        from icl.benchmarks.vibe.figures import rank_intervals
        from icl import helpers
        from icl.report.plots import rank_heatmap, safe_name, task_plot

        specs = self._specs()
        out.mkdir(parents=True, exist_ok=True)
        # figures and qualitative grids: jobs for the figure helpers (icl.helpers), collected in order
        jobs = []
        reference = [m for m in self._order if m in self.reference_models]
        for shots in self._plan().shots:
            for task in specs:
                aggs = [a for a in self._aggs if a.task == task and a.shots == shots]
                jobs.append(helpers.submit("figures", task_plot, specs[task], aggs, shots,
                                            out / f"task_{safe_name(task)}_k{shots}.png", self._order, reference))
        if len(self._plan().shots) > 1:
            jobs.append(self._shot_curves(specs, out / "shots.png"))
        intervals = rank_intervals(tables.get("ranks", []))
        for t in self._tables:
            jobs.append(helpers.submit("figures", rank_heatmap, t, out / f"ranks_k{t.shots}.png", intervals.get(t.shots)))
        jobs += self._qualitative(specs, out, answers)
        return [job for job in jobs if job is not None]  # collected by the runner (icl.run.outputs.files.Plots)

    def _qualitative(self, specs: Mapping[str, TaskSpec], out: Path,
                     answers: Optional[Callable[[str], dict[str, Any]]]) -> list[Any]:
        """A figure job per task (:func:`icl.report.plots.qualitative_task`, in a figure helper):
        a grid of ``qualitative`` samples (inputs, each model's prediction, target) and each
        sample's images under ``qualitative/``."""
        from icl import helpers
        from icl.report.plots import qualitative_task, safe_name

        per_task = int(self.config["qualitative"])
        if answers is None or per_task <= 0:
            return []
        plan = self._plan()
        shots = plan.shots[0]
        picked = qualitative(plan.groups, per_task)
        qual = out.parent / "qualitative"
        jobs = []
        for task in specs:
            samples = []
            for (dataset, t, q) in sorted(picked):
                if t != task:
                    continue
                item = next((it for it in self._items.values() if "context" not in it.group and
                             it.group["dataset"] == dataset and
                             it.group["task"] == t and it.group["query"] == q and it.group["shots"] == shots), None)
                if item is None:
                    continue
                episode, encoded = self._episode(item.payload)
                images = {"query": episode.query_input, "target": encoded,
                          "context_in_0": episode.context_inputs[0], "context_out_0": episode.context_outputs[0]}
                images.update({f"pred_k{shots}_{safe_name(label)}": image
                               for label, image in answers(item.key).items() if isinstance(image, np.ndarray)})
                d = qual / safe_name(task) / safe_name(f"{dataset}__{q}")
                samples.append((d.name, d, images))
            if samples:
                jobs.append(helpers.submit("figures", qualitative_task, samples, self._order, shots,
                                            out / f"qualitative_{safe_name(task)}.png"))
        return jobs

    def _shot_curves(self, specs: Mapping[str, TaskSpec], path: Path) -> Any:
        """Each task's first rank metric (averaged over its datasets, as ranked) against shots, a
        line per model; whiskers combine the datasets' intervals (:func:`shot_rows`). A figure
        job (``.result()``: the files), None without a panel."""
        from icl.benchmarks.vibe.figures import shot_rows
        from icl import helpers
        from icl.report.plots import metric_label, shot_curve_panels

        panels, labels = {}, {}
        for task, spec in specs.items():
            metric = next((m for m in spec.rank_metrics if any(a.task == task and a.metric == m for a in self._aggs)),
                          None)
            if metric is None:
                continue
            panels[task] = shot_rows([a for a in self._aggs if a.task == task and a.metric == metric])
            labels[task] = metric_label(metric, metric in spec.lower_is_better)
        return helpers.submit("figures", shot_curve_panels, panels, path, "mean", ylabel=labels, ylim=None) if panels else None

