"""Execute a plan in batches: prepare data, predict, decode and score, commit per batch.

Loop order: (dataset, task) groups -> chunks of queries (each query and context is loaded,
turned into its pair and encoded once per chunk, contexts cached across the group) -> models
-> shot counts -> batches of the model's ``batch_size``. Every batch is one store transaction,
so a killed run loses at most the batch in flight, and a rerun computes only what is missing
or failed. A sample that cannot be loaded, predicted or scored is recorded as failed (with
the file, model, task and sample named) and the run goes on.
"""

from __future__ import annotations

import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from icl.models import Adapter, AnalogyRequest
from icl.report.plots import safe_name, write_rgb
from icl.run.compute import ComputeMeter
from icl.run.errors import ModelOutputError
from icl.run.plan import PROTOCOL, Group, Plan, context_hash
from icl.store import Failure, SampleKey, SampleResult, Store

CHUNK = 32


@dataclass
class Pair:
    """One sample turned into what models see: input image, target structure, encoded target."""

    input: Optional[np.ndarray] = None
    target: Any = None
    encoded: Optional[np.ndarray] = None
    error: Optional[str] = None
    path: Optional[str] = None


@dataclass
class Item:
    query_id: str
    query: Pair
    contexts: list[Pair]

    def error(self, shots: int) -> Optional[Pair]:
        """The first failed pair among the query and its first ``shots`` contexts."""
        return next((p for p in [self.query, *self.contexts[:shots]] if p.error is not None), None)


@dataclass
class ExecStats:
    computed: int = 0
    skipped: int = 0
    failed: int = 0
    model_calls: int = 0
    failed_models: list[str] = field(default_factory=list)


def _short_trace(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-2:]
    where = "; ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(exc).__name__}: {exc}" + (f" [at {where}]" if where else "")


def _as_array(pred: Any) -> Any:
    if hasattr(pred, "detach"):  # a torch tensor: bf16/fp16 become float32 for numpy
        pred = pred.detach()
        pred = (pred.float() if pred.is_floating_point() else pred).cpu().numpy()
    return pred


def _to_uint8(pred: np.ndarray) -> Optional[np.ndarray]:
    if not isinstance(pred, np.ndarray) or pred.ndim != 3 or pred.shape[2] != 3:
        return None
    if pred.dtype == np.uint8:
        return pred
    return np.round(255 * np.clip(pred.astype(np.float32), 0, 1)).astype(np.uint8)


class Executor:
    """Runs ``plan`` into ``store`` under ``run_id``; ``run()`` returns counts."""

    def __init__(self, plan: Plan, store: Store, run_id: str, meter: ComputeMeter):
        self.plan, self.store, self.run_id, self.meter = plan, store, run_id, meter
        self.cfg = plan.config
        self.stats = ExecStats()
        self._loaded: set[str] = set()
        self._pool = ThreadPoolExecutor(self.cfg.jobs) if self.cfg.jobs > 1 else None
        self.qual_dir = self.cfg.out_dir / "qualitative"

    def key(self, g: Group, q: str, model: str, shots: int) -> SampleKey:
        return SampleKey(PROTOCOL, g.dataset, g.task, q, context_hash(g.contexts[q][:shots]), model,
                         self.plan.models[model].version, shots, self.cfg.seed)

    def planned_keys(self) -> list[SampleKey]:
        return [self.key(g, q, m, s) for g in self.plan.groups for q in g.queries
                for m in self.plan.models for s in self.cfg.shots]

    def _pending(self, g: Group) -> dict[tuple[str, int], set[str]]:
        """Per (model, shots): the queries without an ``ok`` row in the store."""
        out = {}
        for m in self.plan.models:
            for s in self.cfg.shots:
                status = self.store.statuses(self.key(g, g.queries[0], m, s))
                todo = {q for q in g.queries if status.get((q, context_hash(g.contexts[q][:s]))) != "ok"}
                self.stats.skipped += len(g.queries) - len(todo)
                out[(m, s)] = todo
        return out

    def run(self) -> ExecStats:
        """Compute every pending sample, with a progress bar on stderr."""
        from tqdm import tqdm

        pending = [self._pending(g) for g in self.plan.groups]
        total = sum(len(q) for p in pending for q in p.values())
        try:
            with tqdm(total=total, unit="sample", file=sys.stderr, disable=not self.cfg.progress,
                      dynamic_ncols=True) as progress:
                for g, p in zip(self.plan.groups, pending):
                    self._run_group(g, p, progress)
        finally:
            if self._pool is not None:
                self._pool.shutdown()
        return self.stats

    # -- data ------------------------------------------------------------------------------
    def _make_pair(self, g: Group, sample_id: str) -> Pair:
        ds, task = self.plan.datasets[g.dataset], self.plan.tasks[g.task]
        try:
            sample = ds.load(sample_id)
            image, target = task.make_pair(sample, self.cfg.seed)
            return Pair(image, target, task.encode(target, ds.meta))
        except Exception as exc:  # any bad sample is recorded, the run goes on
            path = getattr(exc, "path", None)
            msg = f"dataset {g.dataset!r}, task {g.task!r}, sample {sample_id!r}: {_short_trace(exc)}"
            self.store.add_failures([Failure("data", msg, None, g.dataset, g.task, sample_id, None, path, self.run_id)])
            return Pair(error=msg, path=path)

    def _prepare(self, g: Group, queries: list[str], cache: dict[str, Pair]) -> list[Item]:
        k = max(self.cfg.shots)
        needed = list(dict.fromkeys([*queries, *(c for q in queries for c in g.contexts[q][:k])]))
        fresh = [s for s in needed if s not in cache]
        with self.meter.measure("*", "data", len(fresh)):
            pairs = self._pool.map(lambda s: self._make_pair(g, s), fresh) if self._pool else map(
                lambda s: self._make_pair(g, s), fresh)
            cache.update(zip(fresh, pairs))
        items = [Item(q, cache[q], [cache[c] for c in g.contexts[q][:k]]) for q in queries]
        for it in items:
            if (g.dataset, g.task, it.query_id) in self.plan.qualitative and it.error(k) is None:
                d = self.qual_dir / safe_name(g.task) / safe_name(f"{g.dataset}__{it.query_id}")
                write_rgb(d / "query.png", it.query.input)
                write_rgb(d / "target.png", it.query.encoded)
                write_rgb(d / "context_in_0.png", it.contexts[0].input)
                write_rgb(d / "context_out_0.png", it.contexts[0].encoded)
        return items

    def _run_group(self, g: Group, pending: dict[tuple[str, int], set[str]], progress: Any) -> None:
        todo = [q for q in g.queries if any(q in p for p in pending.values())]
        if not todo:
            return
        cache: dict[str, Pair] = {}
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start:start + CHUNK]
            items = self._prepare(g, chunk, cache)
            for q in chunk:  # queries (test split) are never contexts (train split)
                cache.pop(q, None)
            for (model, shots), waiting in pending.items():
                mine = [it for it in items if it.query_id in waiting]
                if not mine:
                    continue
                progress.set_description(f"{g.task}/{g.dataset} {model} k={shots}", refresh=False)
                bs = self.plan.models[model].batch_size
                for b in range(0, len(mine), bs):
                    self._run_batch(g, model, shots, mine[b:b + bs])
                    progress.update(len(mine[b:b + bs]))

    # -- model and scoring -------------------------------------------------------------------
    def _load(self, name: str, model: Adapter) -> Optional[str]:
        if name in self._loaded:
            return None
        if name in self.stats.failed_models:
            return f"model {name!r} failed to load"
        try:
            model.load(self.cfg.device)
        except Exception as exc:
            self.stats.failed_models.append(name)
            msg = f"model {name!r} failed to load on {self.cfg.device!r}: {_short_trace(exc)}"
            self.store.add_failures([Failure("load", msg, name, run_id=self.run_id)])
            return msg
        self._loaded.add(name)
        return None

    def _run_batch(self, g: Group, name: str, shots: int, batch: Sequence[Item]) -> None:
        model, task, meta = self.plan.models[name], self.plan.tasks[g.task], self.plan.datasets[g.dataset].meta
        results: list[SampleResult] = []
        failures: list[Failure] = []

        def fail(it: Item, stage: str, msg: str, path: Optional[str] = None, event: bool = True) -> None:
            results.append(SampleResult(self.key(g, it.query_id, name, shots), "failed", {}, msg, run_id=self.run_id))
            if event:
                failures.append(Failure(stage, msg, name, g.dataset, g.task, it.query_id, shots, path, self.run_id))

        live = []
        for it in batch:
            bad = it.error(shots)
            if bad is not None:  # the data failure itself was recorded when the pair was made
                fail(it, "data", bad.error or "", bad.path, event=False)
            else:
                live.append(it)
        load_error = self._load(name, model) if live else None
        if load_error:
            for it in live:
                fail(it, "load", load_error, event=False)
            live = []
        preds: list = []
        model_s = 0.0
        if live:
            reqs = [AnalogyRequest(g.task, g.dataset, it.query_id, [c.input for c in it.contexts[:shots]],
                                   [c.encoded for c in it.contexts[:shots]], it.query.input,
                                   tuple(it.query.encoded.shape[:2]),
                                   it.query.encoded if model.privileged else None) for it in live]
            try:
                with self.meter.measure(name, "model", len(live)) as timing:
                    self.stats.model_calls += 1
                    preds = list(model.predict(reqs))
                if len(preds) != len(live):
                    raise ValueError(f"returned {len(preds)} predictions for a batch of {len(live)} requests")
            except Exception as exc:
                for it in live:
                    fail(it, "model", f"model {name!r} failed on task {g.task!r}, dataset {g.dataset!r}, "
                                      f"sample {it.query_id!r}: {_short_trace(exc)}")
                live, preds = [], []
            model_s = timing.elapsed / len(reqs)
        self._score(g, name, shots, task, meta, live, [_as_array(p) for p in preds], model_s, results, fail)
        self.store.write_batch(results, failures)
        n_ok = sum(r.status == "ok" for r in results)
        self.stats.computed += n_ok
        self.stats.failed += len(results) - n_ok

    def _score(self, g: Group, name: str, shots: int, task: Any, meta: Any, live: list[Item], preds: list,
               model_s: float, results: list[SampleResult], fail: Any) -> None:
        from icl.tasks import PredictionError

        while live:
            try:
                with self.meter.measure(name, "score", len(live)) as timing:
                    scores = task.evaluate(preds, [it.query.target for it in live],
                                           [[c.target for c in it.contexts[:shots]] for it in live], meta)
            except PredictionError as exc:
                i = getattr(exc, "index", exc.args[0] if exc.args else 0)
                it = live[i]
                err = ModelOutputError(name, g.task, g.dataset, it.query_id, getattr(exc, "message", str(exc)))
                fail(it, "score", str(err))
                live, preds = live[:i] + live[i + 1:], preds[:i] + preds[i + 1:]
                continue
            except Exception as exc:
                for it in live:
                    fail(it, "score", f"scoring failed for model {name!r}, task {g.task!r}, dataset {g.dataset!r}, "
                                      f"sample {it.query_id!r}: {_short_trace(exc)}")
                return
            score_s = timing.elapsed / len(live)
            for it, pred, metrics in zip(live, preds, scores):
                results.append(SampleResult(self.key(g, it.query_id, name, shots), "ok",
                                            {k: float(v) for k, v in metrics.items()}, None, model_s, score_s,
                                            self.run_id))
                if (g.dataset, g.task, it.query_id) in self.plan.qualitative:
                    img = _to_uint8(pred)
                    if img is not None:
                        d = self.qual_dir / safe_name(g.task) / safe_name(f"{g.dataset}__{it.query_id}")
                        write_rgb(d / f"pred_k{shots}_{safe_name(name)}.png", img)
            return
