"""Execute a plan in batches: build episodes, predict, decode and score, commit per batch.

Loop order: (dataset, task) groups -> chunks of queries (each query's episode, i.e. its input,
target and context pairs at the largest shot count, is built once per chunk; loaded context
samples are cached across the group) -> models -> shot counts -> batches of the model's
``batch_size``. Every batch is one store transaction, so a killed run loses at most the batch
in flight, and a rerun computes only what is missing or failed. A sample that cannot be
loaded, predicted or scored is recorded as failed (naming the file, model, task and sample)
and the run goes on.

With device evaluation (``RunConfig.evaluate``, see :mod:`icl.run.device`) predictions are
decoded and scored as tensors on the run's device, in a background thread that overlaps the
model's next batch; batches are still committed one by one, in order, on the main thread.
"""

from __future__ import annotations

import sys
import traceback
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from icl.models import Adapter, AnalogyRequest
from icl.report.plots import safe_name, write_rgb
from icl.run.compute import ComputeMeter
from icl.run.device import ScorePipeline, eval_device, tensor_requests, to_host
from icl.run.errors import ModelOutputError
from icl.run.plan import PROTOCOL, Group, Plan, context_hash
from icl.store import Failure, SampleKey, SampleResult, Store

CHUNK = 32  # queries whose episodes are built together
CACHE = 256  # loaded context samples kept per group


@dataclass
class Item:
    """One query: its episode (at the largest shot count) and encoded target, or the error."""

    query_id: str
    episode: Any = None
    encoded: Optional[np.ndarray] = None
    error: Optional[str] = None
    path: Optional[str] = None


@dataclass
class ExecStats:
    computed: int = 0
    skipped: int = 0
    failed: int = 0
    model_calls: int = 0
    failed_models: list[str] = field(default_factory=list)


def short_trace(exc: BaseException) -> str:
    """``Type: message [at file:line in func; ...]`` (the last two frames)."""
    frames = traceback.extract_tb(exc.__traceback__)[-2:]
    where = "; ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(exc).__name__}: {exc}" + (f" [at {where}]" if where else "")


def _to_uint8(pred: Any) -> Optional[np.ndarray]:
    """A displayable copy of a prediction (for the qualitative grids), or None."""
    if hasattr(pred, "detach"):
        pred = pred.detach().float().cpu().numpy()
    if not isinstance(pred, np.ndarray) or pred.ndim != 3 or pred.shape[2] != 3:
        return None
    if pred.dtype == np.uint8:
        return pred
    return np.rint(255 * np.clip(np.nan_to_num(pred.astype(np.float32)), 0, 1)).astype(np.uint8)


class Executor:
    """Runs ``plan`` into ``store`` under ``run_id``; ``run()`` returns counts."""

    def __init__(self, plan: Plan, store: Store, run_id: str, meter: ComputeMeter):
        self.plan, self.store, self.run_id, self.meter = plan, store, run_id, meter
        self.cfg = plan.config
        self.stats = ExecStats()
        self._loaded: set[str] = set()
        self.qual_dir = self.cfg.out_dir / "qualitative"
        self.eval_device = eval_device(self.cfg.device, self.cfg.evaluate)
        self.pipeline = ScorePipeline(self.eval_device, self.cfg.overlap)
        meter.per_stream = self.pipeline.stream is not None

    def key(self, g: Group, q: str, model: str, shots: int) -> SampleKey:
        return SampleKey(PROTOCOL, g.dataset, g.task, q, context_hash(g.contexts[q][:shots]), model,
                         self.plan.models[model].version, shots, self.cfg.seed,
                         self.plan.datasets[g.dataset].meta.version, self.plan.tasks[g.task].version)

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
        pool = ThreadPoolExecutor(self.cfg.jobs) if self.cfg.jobs > 1 else None
        try:
            with tqdm(total=total, unit="sample", file=sys.stderr, disable=not self.cfg.progress,
                      dynamic_ncols=True) as progress:
                for g, p in zip(self.plan.groups, pending):
                    self._run_group(g, p, progress, pool)
                self.pipeline.drain()
        finally:
            self.pipeline.close()  # batches scored before an interruption are still committed
            if pool is not None:
                pool.shutdown()
        return self.stats

    def _sample_dir(self, g: Group, query_id: str):
        return self.qual_dir / safe_name(g.task) / safe_name(f"{g.dataset}__{query_id}")

    # -- data ------------------------------------------------------------------------------
    def _item(self, g: Group, q: str, load_context: Callable[[str], Any]) -> Item:
        ds, task = self.plan.datasets[g.dataset], self.plan.tasks[g.task]
        try:
            query = ds.load(q, parts=task.parts)
            contexts = [load_context(c) for c in g.contexts[q][: max(self.cfg.shots)]]
            episode = task.make_episode(query, contexts, self.cfg.seed, ds.meta)
            item = Item(q, episode, task.encode(episode.target, ds.meta))
        except Exception as exc:  # any bad sample is recorded, the run goes on
            path = getattr(exc, "path", None)
            msg = f"dataset {g.dataset!r}, task {g.task!r}, query {q!r}: {short_trace(exc)}"
            self.store.add_failures([Failure("data", msg, None, g.dataset, g.task, q, None, path, self.run_id)])
            return Item(q, error=msg, path=path)
        if (g.dataset, g.task, q) in self.plan.qualitative:
            d = self._sample_dir(g, q)
            write_rgb(d / "query.png", episode.query_input)
            write_rgb(d / "target.png", item.encoded)
            write_rgb(d / "context_in_0.png", episode.context_inputs[0])
            write_rgb(d / "context_out_0.png", episode.context_outputs[0])
        return item

    def _prepare(self, g: Group, queries: list[str], cache: OrderedDict,
                 pool: Optional[ThreadPoolExecutor]) -> list[Item]:
        ds, task = self.plan.datasets[g.dataset], self.plan.tasks[g.task]

        def load_context(sample_id: str) -> Any:
            # racing threads may load a sample twice; both copies are equal
            if sample_id in cache:
                cache.move_to_end(sample_id)
                return cache[sample_id]
            sample = ds.load(sample_id, parts=task.parts)
            cache[sample_id] = sample
            while len(cache) > CACHE:
                cache.popitem(last=False)
            return sample

        with self.meter.measure("*", "data", len(queries)):
            if pool is None:
                return [self._item(g, q, load_context) for q in queries]
            return list(pool.map(lambda q: self._item(g, q, load_context), queries))

    def _run_group(self, g: Group, pending: dict[tuple[str, int], set[str]], progress: Any,
                   pool: Optional[ThreadPoolExecutor]) -> None:
        todo = [q for q in g.queries if any(q in p for p in pending.values())]
        cache: OrderedDict = OrderedDict()
        for start in range(0, len(todo), CHUNK):
            items = self._prepare(g, todo[start:start + CHUNK], cache, pool)
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
            msg = f"model {name!r} failed to load on {self.cfg.device!r}: {short_trace(exc)}"
            self.store.add_failures([Failure("load", msg, name, run_id=self.run_id)])
            return msg
        self._loaded.add(name)
        return None

    def _run_batch(self, g: Group, name: str, shots: int, batch: Sequence[Item]) -> None:
        model = self.plan.models[name]
        results: list[SampleResult] = []
        failures: list[Failure] = []

        def fail(it: Item, stage: str, msg: str, event: bool = True) -> None:
            results.append(SampleResult(self.key(g, it.query_id, name, shots), "failed", {}, msg, run_id=self.run_id))
            if event:
                failures.append(Failure(stage, msg, name, g.dataset, g.task, it.query_id, shots, it.path, self.run_id))

        live = []
        for it in batch:
            if it.error is not None:  # the data failure itself was recorded when the episode was built
                fail(it, "data", it.error, event=False)
            else:
                live.append(it)
        load_error = self._load(name, model) if live else None
        if load_error:
            for it in live:
                fail(it, "load", load_error, event=False)
            live = []
        preds: Any = []
        model_s = 0.0
        if live:
            reqs = [AnalogyRequest(g.task, g.dataset, it.query_id, it.episode.context_inputs[:shots],
                                   it.episode.context_outputs[:shots], it.episode.query_input,
                                   tuple(it.encoded.shape[:2]), it.encoded if model.privileged else None)
                    for it in live]
            try:
                with self.meter.measure(name, "model", len(live)) as timing:
                    self.stats.model_calls += 1
                    if self.eval_device is not None and model.accepts_tensors:
                        reqs = tensor_requests(reqs, self.eval_device)  # each image crosses once
                    out = model.predict(reqs)
                    # a [B, h, w, 3] tensor stays one batch (the tasks take it as it is)
                    preds = out if getattr(out, "ndim", 0) == 4 else list(out)
                if len(preds) != len(live):
                    raise ValueError(f"returned {len(preds)} predictions for a batch of {len(live)} requests")
            except Exception as exc:
                for it in live:
                    fail(it, "model", f"model {name!r} failed on task {g.task!r}, dataset {g.dataset!r}, "
                                      f"sample {it.query_id!r}: {short_trace(exc)}")
                live, preds = [], []
            model_s = timing.elapsed / len(reqs)

        def job() -> tuple[list[SampleResult], list[Failure]]:
            self._score(g, name, shots, live, preds, model_s, results, fail)
            return results, failures

        self.pipeline.submit(job, self._commit, preds)

    def _commit(self, batch: tuple[list[SampleResult], list[Failure]]) -> None:
        """Write one scored batch (main thread, in batch order)."""
        results, failures = batch
        self.store.write_batch(results, failures)
        n_ok = sum(r.status == "ok" for r in results)
        self.stats.computed += n_ok
        self.stats.failed += len(results) - n_ok

    def _score(self, g: Group, name: str, shots: int, live: list[Item], preds: Any, model_s: float,
               results: list[SampleResult], fail: Callable[..., None]) -> None:
        from icl.benchmarks.vibe.tasks import PredictionError

        task, meta = self.plan.tasks[g.task], self.plan.datasets[g.dataset].meta
        where = {} if self.eval_device is None else {"device": self.eval_device}
        if self.cfg.evaluate == "host":
            preds = to_host(preds)
        while live:
            try:
                with self.meter.measure(name, "score", len(live)) as timing:
                    scores = task.evaluate(preds, [it.episode.target for it in live],
                                           [it.episode.context_targets[:shots] for it in live], meta, **where)
            except PredictionError as exc:
                i = exc.index
                err = ModelOutputError(name, g.task, g.dataset, live[i].query_id, exc.message)
                fail(live[i], "score", str(err))
                preds = list(preds)
                live, preds = live[:i] + live[i + 1:], preds[:i] + preds[i + 1:]
                continue
            except Exception as exc:
                for it in live:
                    fail(it, "score", f"scoring failed for model {name!r}, task {g.task!r}, dataset {g.dataset!r}, "
                                      f"sample {it.query_id!r}: {short_trace(exc)}")
                return
            score_s = timing.elapsed / len(live)
            for it, pred, metrics in zip(live, preds, scores):
                results.append(SampleResult(self.key(g, it.query_id, name, shots), "ok",
                                            {k: float(v) for k, v in metrics.items()}, None, model_s, score_s,
                                            self.run_id))
                if (g.dataset, g.task, it.query_id) in self.plan.qualitative:
                    img = _to_uint8(pred)
                    if img is not None:
                        write_rgb(self._sample_dir(g, it.query_id) / f"pred_k{shots}_{safe_name(name)}.png", img)
            return
