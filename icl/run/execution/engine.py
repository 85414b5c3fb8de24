"""The one execution loop: pending items -> batches -> requests -> cache or model -> responses
-> follow-ups -> judge -> scores, one store transaction per batch.

Loop order: models -> the benchmark's items in plan order -> batches of the model's
``batch_size``. An item whose score (for this model, judge and scorer version) is stored as
``ok`` is skipped (with several judges, an item is taken again only for the judges that have no
score of it: a judge added later reuses the model's stored answers and scores only its own); a
response already stored for the same request and model identity is reused
without calling the model. Every batch is committed in one transaction as soon as it is scored,
so a killed run loses at most the batch in flight (and, with scoring overlapped, the one being
scored): with overlap, the main thread commits a scored batch while it waits for the model's next
call (:func:`icl.run.execution.guard.while_waiting`), never only after that call. An item that
cannot be built, answered or scored is recorded as
failed (naming the item, model and file) and the run goes on; failed items are asked again on
the next run. A request the model refuses (:meth:`icl.models.base.Adapter.would_refuse`, asked
before it is sent, or a :class:`~icl.models.base.RequestRefused` in its slot) is the outcome
``refused``: stored like an overflow (never asked again with the same settings), scored as not
applicable (no metrics, never a failure) and never counted toward stopping the model.

With device evaluation (:mod:`icl.run.execution.device`) image answers stay tensors on the run's device
and are scored there, in a background thread that overlaps the model's next batch; batches are
still committed one by one, in order, on the main thread.

With a worker pool (``--ray``, :mod:`icl.run.execution.pool`) each batch is started (requests built, the
store asked, the model's first call sent to a worker) up to ``pool.ahead`` batches before it is
finished (answers collected, follow-ups, judge, scores, commit); batches finish in plan order on
this thread, which alone writes the store, so the results do not depend on which worker
answered what. Without a pool a batch is started and finished at once (the same code path).
"""

from __future__ import annotations

import sys
import traceback
from collections import deque
from functools import partial
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Optional, Sequence

from icl.helpers import Deferred, pending
from icl._lazy import extra_hint
from icl.benchmarks.base import Benchmark, Item
from icl.models.base import ContextOverflowError, RequestRefused
from icl.models.requests import AnalogyRequest, content_hash
from icl.run.execution import responses as R
from icl.run.execution.compute import CallCost, ComputeMeter, call_costs
from icl.run.execution.device import ScorePipeline, tensor_requests
from icl.run.execution.guard import ItemOutcome, ModelGuard, while_waiting
from icl._signals import check_stop
from icl.run.planning.plan import SETTLED, model_work, refusal
from icl.run.planning.models import RunModel
from icl.store import Failure, Response, Score, ScoreKey, Store

MAX_STEPS = 4  # answers per item (the first and its follow-ups)
DEFAULT_TIMEOUT_S = 3600.0  # per model call (a batch); the ``timeout`` model argument changes it


class ModelFailure(Exception):
    """A request the guarded model call did not answer: ``reason`` error|timeout|overflow|refused."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.icl_reason = reason


def _result(outcome: ItemOutcome) -> Any:
    """A guarded outcome as the value or the exception the engine records."""
    if outcome.ok:
        return outcome.value
    if outcome.status == "timeout":
        return ModelFailure("timeout", outcome.message or "timed out")
    reason = {"ContextOverflowError": "overflow", "RequestRefused": "refused"}.get(str(outcome.error_type), "error")
    return ModelFailure(reason, f"{outcome.error_type}: {outcome.message}")


def _overflow(exc: BaseException) -> bool:
    return isinstance(exc, ContextOverflowError) or getattr(exc, "icl_reason", None) == "overflow"


def _settled_outcome(exc: BaseException) -> bool:
    """An overflow or a refusal: a result of the request, not a failure of the model."""
    return _overflow(exc) or getattr(exc, "icl_reason", None) in SETTLED


def short_trace(exc: BaseException) -> str:
    """``Type: message [at file:line in func; ...]`` (the last two frames)."""
    frames = traceback.extract_tb(exc.__traceback__)[-2:]
    where = "; ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames)
    return f"{type(exc).__name__}: {exc}" + (f" [at {where}]" if where else "")


@dataclass
class ExecStats:
    computed: int = 0
    skipped: int = 0
    failed: int = 0
    model_calls: int = 0
    cached_responses: int = 0
    failed_models: list[str] = field(default_factory=list)
    # model label -> {item kind (task): items} the model was not asked: it serves another request type
    not_applicable: dict[str, dict[str, int]] = field(default_factory=dict)
    # model label -> why the run stopped asking it (failed to load, or failed its whole first batch)
    stopped: dict[str, str] = field(default_factory=dict)


@dataclass
class _Answer:
    """One item's answers so far (host values as stored; ``scored`` is what scoring reads)."""

    item: Item
    request: Any = None
    values: list[Any] = field(default_factory=list)
    scored: Any = None
    failed: Optional[str] = None  # reason
    error: Optional[str] = None
    cost: CallCost = CallCost()  # of its model calls in this run (none when answered from the store)
    judges: tuple[str, ...] = ("",)  # judge ids this item is scored for in this batch ("": no judge)
    judge_requests: list[Any] = field(default_factory=list)  # the same for every judge
    judgements: dict[str, list[str]] = field(default_factory=dict)  # judge id -> its answers
    judge_failed: dict[str, str] = field(default_factory=dict)  # judge id -> why that judge gave no answer


@dataclass
class _Open:
    """A started batch: its answers, what it will commit, and its first model call in flight."""

    model: RunModel
    answers: list[_Answer]
    first_call: bool
    responses: list[Response] = field(default_factory=list)
    links: list[tuple[str, str, str, str]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    first: Any = None  # the first step's question (:meth:`Engine._ask_start`), None when no item was built


class Engine:
    """Runs ``benchmark``'s ``items`` for ``models`` into ``store`` under ``run_id``."""

    def __init__(self, benchmark: Benchmark, models: Sequence[RunModel], judges: Sequence[RunModel], store: Store,
                 run_id: str, meter: ComputeMeter, device: str, eval_device: Optional[str], overlap: bool,
                 progress: bool = True, pool: Any = None, judge_pool: Any = None):
        self.bench, self.models, self.judges, self.store = benchmark, list(models), list(judges), store
        self.run_id, self.meter, self.device, self.eval_device = run_id, meter, device, eval_device
        self.progress = progress
        self.pool = pool  # the models' calls go to these workers (icl.run.execution.pool.RayPool); None: this process
        self.judge_pool = judge_pool  # the judge's own workers; None: this process
        self.stats = ExecStats()
        self._guards: dict[str, ModelGuard] = {}
        # (model id, item key) -> the judge ids still to score it, for items some judge has scored
        self._unscored: dict[tuple[str, str], tuple[str, ...]] = {}
        # models whose first batch with a request actually sent has been judged by the failure policy
        self._first_settled: set[str] = set()
        # scoring (and PNG encoding) overlaps the next batch on the device path, and on the host
        # for benchmarks whose scorer may run beside request()
        self.pipeline = ScorePipeline(eval_device, overlap and (eval_device is not None or
                                                                benchmark.thread_safe_scoring))
        meter.per_stream = self.pipeline.stream is not None

    @property
    def judge_ids(self) -> tuple[str, ...]:
        """The ids scores are keyed by: one per judge, or "" when the benchmark has none."""
        return tuple(j.model_id for j in self.judges) or ("",)

    def score_key(self, item: Item, model: RunModel, judge_id: str) -> ScoreKey:
        b = self.bench
        return ScoreKey(b.name, b.protocol, item.key, model.model_id, judge_id, b.scorer_version)

    def run(self, items: Sequence[Item]) -> ExecStats:
        from tqdm import tqdm

        b = self.bench
        pending = []
        for m in self.models:  # the work left: icl.run.planning.plan, the computation --check reports
            work = model_work(b, items, m.serves, self.judge_ids,
                              partial(self.store.done, b.name, b.protocol, m.model_id, scorer_version=b.scorer_version))
            self.stats.skipped += work.skipped  # counts are scores (item x judge)
            self._unscored.update({(m.model_id, k): v for k, v in work.unscored.items()})
            if work.not_applicable:
                self.stats.not_applicable[m.label] = work.not_applicable
            pending.append(work.todo)
        try:
            # a scored batch is committed while the model answers the next one (not after it)
            with tqdm(total=sum(map(len, pending)), unit="item", file=sys.stderr, disable=not self.progress,
                      dynamic_ncols=True) as bar, while_waiting(self.pipeline.commit_ready):
                ahead = self.pool.ahead if self.pool is not None else 1
                for m, todo in zip(self.models, pending):
                    bs = max(1, int(m.adapter.batch_size))
                    batches = [todo[start:start + bs] for start in range(0, len(todo), bs)]
                    started: deque[_Open] = deque()
                    finished = 0
                    while finished < len(batches):
                        while len(started) < ahead and finished + len(started) < len(batches):
                            check_stop()  # SIGTERM/SIGINT stop the run here, between batches (icl.run.execution.guard)
                            self.pipeline.commit_ready()
                            started.append(self._start(m, batches[finished + len(started)]))
                        bar.set_description(f"{b.name} {m.label}", refresh=False)
                        self._finish(started.popleft())
                        bar.update(len(batches[finished]))
                        finished += 1
                        if m.stopped is not None:  # one failure policy: the other models go on
                            self.stats.stopped[m.label] = m.stopped
                            bar.update(sum(map(len, batches[finished:])))
                            started.clear()  # batches sent ahead are dropped unstored
                            break
                self.pipeline.drain()
        except KeyboardInterrupt:  # SIGTERM, Ctrl-C: the batches scored so far are committed, nothing waited for
            self.pipeline.close(stopping=True)
            raise
        finally:
            self.pipeline.close()
            for g in self._guards.values():
                g.close()
        return self.stats

    # -- one batch ---------------------------------------------------------------------------
    def _start(self, model: RunModel, batch: Sequence[Item]) -> _Open:
        """Build the batch's requests and ask its first step (from the store, or the model)."""
        answers = [_Answer(it, judges=self._unscored.pop((model.model_id, it.key), self.judge_ids)) for it in batch]
        opened = _Open(model, answers, first_call=False)  # decided when it finishes (_finish)
        failures = opened.failures
        with self.meter.measure("*", "data", len(batch)):
            for a in answers:
                try:
                    a.request = self.bench.request(a.item, model.privileged)
                except Exception as exc:  # a bad item is recorded, the batch goes on
                    a.failed, a.error = "data", f"item {a.item.key!r}: {short_trace(exc)}"
                    failures.append(Failure("data", a.error, None, a.item.key, getattr(exc, "path", None),
                                            self.run_id))
        live = [a for a in answers if a.failed is None]
        if live:
            opened.first = self._ask_start(model, [a.request for a in live], opened.responses, opened.links, failures,
                                           [a.item.key for a in live], "answer:0")
        return opened

    def _finish(self, opened: _Open) -> None:
        """Collect the answers (follow-ups asked at once), judge, and queue scoring and commit."""
        model, answers = opened.model, opened.answers
        responses, links, failures = opened.responses, opened.links, opened.failures
        live = [a for a in answers if a.failed is None]
        for step in range(MAX_STEPS):
            if not live:
                break
            if step == 0:
                outs = self._ask_end(opened.first)
            else:
                outs = self._ask(model, [a.request for a in live], responses, links, failures,
                                 [a.item.key for a in live], f"answer:{step}")
            for a, (value, scored, reason, error, cost) in zip(live, outs):
                a.cost = a.cost.plus(cost)
                if reason is not None:
                    a.failed, a.error = reason, error
                    continue
                a.values.append(value)
                a.scored = scored
            live = [a for a in live if a.failed is None]
            if step + 1 == MAX_STEPS:
                break
            nxt = []
            for a in live:
                try:
                    follow = self.bench.followup(a.item, list(a.values))
                except Exception as exc:
                    a.failed, a.error = "error", f"follow-up of item {a.item.key!r}: {short_trace(exc)}"
                    continue
                if follow is not None:
                    a.request = follow
                    nxt.append(a)
            live = nxt
        # the failure policy counts the items the model was asked: a refusal is not a failure
        asked = [a for a in answers if a.failed not in ("data", "refused")]
        first_call = opened.first_call = bool(model.calls and asked) and model.model_id not in self._first_settled
        if first_call:
            self._first_settled.add(model.model_id)
        if model.load_error is not None or (first_call and all(
                a.failed in ("error", "timeout", "load") for a in asked)):
            # the model never answered: it is stopped, nothing of it is scored (a rerun asks again)
            model.stopped = model.load_error or f"model {model.label!r} failed its whole first batch ({asked[0].error})"
            self.pipeline.submit(lambda: (responses, links, [], failures), self._commit, [])
            return
        if self.judges:
            for a in answers:
                if a.failed is None:
                    try:
                        a.judge_requests = list(self.bench.judge_requests(a.item, a.values[-1]))
                    except Exception as exc:
                        a.failed, a.error = "error", f"judge requests of item {a.item.key!r}: {short_trace(exc)}"
        for judge in self.judges:  # each judge on its own, only about the items it has not scored
            self._judge(model, judge, [a for a in answers if a.failed is None and judge.model_id in a.judges],
                        responses, links, failures)

        def job() -> tuple:
            for r in responses:  # PNG encoding off the main thread when scoring overlaps
                if r.kind == "png" and not isinstance(r.body, bytes):
                    # until here `body` holds the image itself (see _response), not yet its PNG bytes
                    r.body = R.encode_png(r.body)  # type: ignore[arg-type]
            scores = self._score(model, answers, failures)
            return responses, links, scores, failures

        self.pipeline.submit(job, self._commit, [a.scored for a in answers if R.is_tensor(a.scored)],
                             waits=lambda batch: any(pending(s.metrics.values()) for s in batch[2]))

    def _ask(self, model: RunModel, reqs: list[Any], responses: list[Response], links: list,
             failures: list[Failure], item_keys: list[str], step: str) -> list[tuple]:
        """Answer ``reqs`` from the store or the model: per request (host value, value to
        score, failure reason, error, :class:`CallCost`)."""
        return self._ask_end(self._ask_start(model, reqs, responses, links, failures, item_keys, step))

    def _ask_start(self, model: RunModel, reqs: list[Any], responses: list[Response], links: list,
                   failures: list[Failure], item_keys: list[str], step: str) -> tuple:
        """What the store answers, and the model call for the rest (sent, not awaited)."""
        hashes = [content_hash(r) for r in reqs]
        links += [(k, model.model_id, step, h) for k, h in zip(item_keys, hashes)]
        # an answer, an overflow or a refusal (results, never re-sent), is reused
        cached = {h: r for h, r in self.store.responses(hashes, model.model_id).items()
                  if r.status == "ok" or r.reason in SETTLED}
        out: list[Optional[tuple]] = [None] * len(reqs)
        todo = []
        for i, h in enumerate(hashes):
            hit = cached.get(h)
            value = None
            if hit is not None and hit.status == "ok":
                try:
                    value = R.stored(hit.kind, hit.body)
                except R.InvalidOutput:  # a damaged stored answer is no answer: asked again, its row replaced
                    hit = None
            if hit is None:
                why = refusal(model.adapter, reqs[i]) if step.startswith("answer") else None
                if why is None:
                    todo.append(i)
                else:  # refused from the request alone: never sent, stored as not applicable
                    out[i] = self._response(model, reqs[i], h, RequestRefused(why), CallCost(), responses)
                continue
            self.stats.cached_responses += 1
            if hit.status != "ok":
                out[i] = (None, None, hit.reason, hit.error, CallCost())
                continue
            scored = value
            if self.eval_device is not None and hit.kind == "png":
                scored = _upload(value, self.eval_device)
            out[i] = (value, scored, None, None, CallCost())
        call = self._call_start(model, [reqs[i] for i in todo], [item_keys[i] for i in todo], failures) if todo else None
        return model, reqs, hashes, item_keys, out, todo, call, responses, failures

    def _ask_end(self, asked: tuple) -> list[tuple]:
        model, reqs, hashes, item_keys, out, todo, call, responses, failures = asked
        if todo:
            new = self._call_end(call)
            for i, (result, cost) in zip(todo, new):
                out[i] = self._response(model, reqs[i], hashes[i], result, cost, responses)
                if out[i][2] == "invalid":
                    failures.append(Failure("model", f"item {item_keys[i]!r}: {out[i][3]}", model.label,
                                            item_keys[i], None, self.run_id))
        return out  # type: ignore[return-value]

    def _response(self, model: RunModel, req: Any, h: str, result: Any, cost: CallCost,
                  responses: list[Response]) -> tuple:
        """Normalise one model result into a stored response and the value to score."""
        def response(status: str, kind: str, body: Any, error: Optional[str], reason: Optional[str]) -> Response:
            return Response(h, model.model_id, status, kind, body, error, reason, cost.seconds, self.run_id,
                            cost.peak_memory_bytes, cost.memory_kind, cost.energy_j, cost.generation)

        if isinstance(result, BaseException):
            # RequestRefused carries icl_reason "refused"
            reason = "overflow" if _overflow(result) else getattr(result, "icl_reason", "error")
            msg = f"model {model.label!r}: {short_trace(result)}"
            responses.append(response("failed", "none", None, msg, reason))
            return None, None, reason, msg, cost
        try:
            if R.expects_text(req):
                value = R.to_text(result)
                responses.append(response("ok", "text", value, None, None))
                return value, value, None, None, cost
            scored = R.to_uint8_image(result, R.max_pixels(req))
            host = R.to_host(scored)
        except R.InvalidOutput as exc:
            msg = f"model {model.label!r} returned an invalid answer: {exc}"
            responses.append(response("failed", "none", None, msg, "invalid"))
            return None, None, "invalid", msg, cost
        # encoded to PNG by the scoring job (see _finish)
        responses.append(response("ok", "png", host, None, None))
        if self.eval_device is not None and not R.is_tensor(scored):
            scored = _upload(host, self.eval_device)
        elif self.eval_device is None and R.is_tensor(scored):
            scored = host
        return host, scored, None, None, cost

    def _call_start(self, model: RunModel, reqs: list[Any], keys: list[str], failures: list[Failure]) -> tuple:
        """Send ``reqs`` to the model: to the pool's workers (awaited by :meth:`_call_end`), or
        here (the model loaded first, the call made now)."""
        pool = self.judge_pool if any(model is j for j in self.judges) else self.pool
        if pool is not None:
            if model.load_error is not None:
                return model, reqs, keys, failures, None, self._load_failed(model, len(reqs))
            self.stats.model_calls += 1
            model.calls += 1
            return model, reqs, keys, failures, (pool, pool.submit(model, reqs)), None
        return model, reqs, keys, failures, None, self._call(model, reqs, keys, failures)

    def _call_end(self, call: tuple) -> list[tuple]:
        """Per request (output or exception, :class:`CallCost`) of a call :meth:`_call_start` sent."""
        model, reqs, keys, failures, sent, done = call
        if sent is None:
            return done
        answer = sent[0].result(sent[1])
        if answer.load_error is not None:
            self.stats.model_calls -= 1  # as in this process, a model that never loaded was never called
            if model.load_error is None:  # as _load records a failed load in this process
                model.load_error = f"model {model.label!r} failed to load on worker {answer.worker}: {answer.load_error}"
                self.stats.failed_models.append(model.label)
                failures.append(Failure("load", model.load_error, model.label, None, None, self.run_id))
            return self._load_failed(model, len(reqs))
        if answer.load_s:
            self.meter.add(model.label, "load", 0, answer.load_s)
        self.meter.add(model.label, "model", len(reqs), answer.seconds, answer.peak)
        kind = "cuda-max-allocated" if self.device.startswith("cuda") else "process-max-rss"  # the worker's counter
        share = CallCost(answer.seconds / max(len(reqs), 1), answer.peak, kind)  # no energy, no records from workers
        return self._results(model, [_result(o) for o in answer.outcomes], keys, failures, share)

    def _load_failed(self, model: RunModel, n: int) -> list[tuple]:
        err = RuntimeError(model.load_error)
        err.icl_reason = "load"  # type: ignore[attr-defined]
        return [(err, CallCost())] * n

    def _call(self, model: RunModel, reqs: list[Any], keys: list[str], failures: list[Failure]) -> list[tuple]:
        """Call the model here (loading it first): per request (output or exception, :class:`CallCost`)."""
        if not self._load(model, failures):
            return self._load_failed(model, len(reqs))
        sent = reqs
        upload_to = self.eval_device if model.adapter.accepts_tensors and all(
            isinstance(r, AnalogyRequest) for r in reqs) else None
        tensors = upload_to is not None
        if upload_to is not None:
            sent = tensor_requests(reqs, upload_to)  # each image crosses once
        guard = self._guards.get(model.model_id)
        if guard is None:  # read-only input copies, per-item retries, a timeout (icl.run.execution.guard)
            guard = self._guards[model.model_id] = ModelGuard(
                model.adapter.predict, timeout_s=model.timeout or DEFAULT_TIMEOUT_S, name=model.label,
                copy_inputs=not tensors)
        self.stats.model_calls += 1
        model.calls += 1
        records = getattr(model.adapter, "records", None)
        seen = len(records) if isinstance(records, list) else 0
        with self.meter.measure(model.label, "model", len(reqs)) as timing:
            results = [_result(o) for o in guard(sent)]
        made = generation_records(records[seen:] if isinstance(records, list) else [])
        return self._results(model, results, keys, failures, call_costs(timing, self.meter.kind, len(reqs)),
                             [made.get(getattr(q, "id", None)) for q in reqs])

    def _results(self, model: RunModel, results: list[Any], keys: list[str], failures: list[Failure],
                 per: CallCost, generation: Sequence[Optional[dict]] = ()) -> list[tuple]:
        """Record the call's failures; per request (output or exception, its share ``per`` of the
        call's cost, with the generator's record of its image when there is one)."""
        for key, r in zip(keys, results):
            if isinstance(r, BaseException) and not _settled_outcome(r):
                failures.append(Failure("model", f"model {model.label!r}, item {key!r}: {short_trace(r)}",
                                        model.label, key, None, self.run_id))
        records = list(generation) or [None] * len(results)
        return [(r, replace(per, generation=g)) for r, g in zip(results, records)]

    def _load(self, model: RunModel, failures: list[Failure]) -> bool:
        if model.loaded:
            return True
        if model.load_error is not None:
            return False
        try:
            with self.meter.measure(model.label, "load", 0):
                model.adapter.load(self.device)
        except Exception as exc:
            model.load_error = (f"model {model.label!r} failed to load on {self.device!r}: {short_trace(exc)}"
                                f"{extra_hint(exc)}")
            self.stats.failed_models.append(model.label)
            failures.append(Failure("load", model.load_error, model.label, None, None, self.run_id))
            return False
        model.loaded = True
        return True

    def _judge(self, model: RunModel, judge: RunModel, live: list[_Answer], responses: list[Response], links: list,
               failures: list[Failure]) -> None:
        """Ask ``judge`` about every answered item of ``live`` (cached like any model's answers).
        Its answers are linked as (``item|model id``, the judge's id, ``judge:N``): each judge has
        its own links, so two judges never collide."""
        flat = [(a, r) for a in live for r in a.judge_requests]
        if not flat:
            return
        keys = [f"{a.item.key}|{model.model_id}" for a, _ in flat]
        steps: dict[str, int] = {}
        step_names = []
        for k in keys:
            steps[k] = steps.get(k, -1) + 1
            step_names.append(f"judge:{steps[k]}")
        outs: list[tuple] = []
        bs = max(1, int(judge.adapter.batch_size))
        with self.meter.measure(judge.label, "judge", len(flat)):
            for start in range(0, len(flat), bs):
                part = flat[start:start + bs]
                for (a, _), res in zip(part, self._ask(judge, [r for _, r in part], responses, [], failures,
                                                       keys[start:start + bs], "judge")):
                    outs.append((a, res))
        for a, (value, _, reason, error, _) in outs:
            if reason is not None:
                a.judge_failed.setdefault(judge.model_id, f"judge {judge.label!r}: {error}")
            else:
                a.judgements.setdefault(judge.model_id, []).append(value)
        # links of judge answers, one per (item, model, step)
        for (a, req), key, step in zip(flat, keys, step_names):
            links.append((key, judge.model_id, step, content_hash(req)))

    def _score(self, model: RunModel, answers: list[_Answer], failures: list[Failure]) -> list[Score]:
        """Scores of a batch, one per item and judge it still lacks (runs in the scoring thread
        with device evaluation). A judge that gave no answer fails that judge's score only."""
        scores = []
        for judge_id in self.judge_ids:
            mine = [a for a in answers if judge_id in a.judges]
            if not mine:
                continue
            rows = []
            for a in mine:
                failed, error = a.failed, a.error
                if failed is None and judge_id in a.judge_failed:
                    failed, error = "judge", a.judge_failed[judge_id]
                rows.append((a.item, a.scored, a.judgements.get(judge_id, []), failed, error))
            out = score_answers(self.bench, rows, self.eval_device, self.meter, model.label, self.run_id, failures,
                                defer=True)  # values a helper computes are waited for at the commit
            for a, (status, metrics, reason, error, score_s) in zip(mine, out):
                c = a.cost
                scores.append(Score(self.score_key(a.item, model, judge_id), status, metrics, error, reason,
                                    c.seconds, score_s, self.run_id, c.peak_memory_bytes, c.memory_kind, c.energy_j))
        return scores

    def _commit(self, batch: tuple) -> None:
        responses, links, scores, failures = batch
        labels = {m.model_id: m.label for m in self.models}
        scores = [_settled(s, failures, labels.get(s.key.model_id)) for s in scores]  # values from helpers
        self.store.write_batch(responses, links, scores, failures)
        n_ok = sum(s.status == "ok" and s.reason != "refused" for s in scores)  # a refusal is neither
        self.stats.computed += n_ok
        self.stats.failed += sum(s.status != "ok" for s in scores)


def generation_records(records: Sequence[Any]) -> dict[Any, dict]:
    """The records a generator kept of one call (``adapter.records``, :class:`icl.models.t2i.
    common.GenerationRecord`) by request id, as plain data (the last when a request was retried)."""
    out = {}
    for rec in records:
        data = asdict(rec) if hasattr(rec, "__dataclass_fields__") else dict(rec)
        out[data.pop("request_id", None)] = {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
    return out


def _numbers(metrics: Mapping[str, Any], defer: bool) -> dict[str, Any]:
    """Metric values as floats; a value a helper still computes (:class:`icl.helpers.Deferred`)
    is kept as it is when ``defer``, else waited for."""
    return {k: v if defer and isinstance(v, Deferred) else float(v) for k, v in metrics.items()}


def _settled(score: Score, failures: list[Failure], label: Optional[str]) -> Score:
    """``score`` with its deferred values waited for (:class:`icl.helpers.Deferred`); one that
    fails fails this score only (a failure event names it, and the model ``label``)."""
    if not any(isinstance(v, Deferred) for v in score.metrics.values()):
        return score
    try:
        return replace(score, metrics={k: float(v) for k, v in score.metrics.items()})
    except Exception as exc:
        msg = f"model {label!r}, item {score.key.item_key!r}: scoring failed: {short_trace(exc)}"
        failures.append(Failure("score", msg, label, score.key.item_key, None, score.run_id))
        return replace(score, status="failed", metrics={}, error=msg, reason="invalid")


def score_answers(bench: Benchmark, rows: Sequence[tuple], device: Optional[str], meter: Optional[ComputeMeter],
                  label: str, run_id: str, failures: list[Failure], defer: bool = False) -> list[tuple]:
    """Score ``(item, response, judgements, failed_reason, error)`` rows: per row (status,
    metrics, reason, error, seconds). Failed rows get ``score_failure``'s metrics; a scorer
    error fails only the rows it names (a batch error is retried row by row). ``defer``: values
    helper processes still compute stay :class:`icl.helpers.Deferred` (the caller waits)."""
    out: list[Optional[tuple]] = [None] * len(rows)
    live = []
    for i, (item, response, judgements, reason, error) in enumerate(rows):
        if reason == "refused":  # not applicable to this model: stored, no metrics, never a failure
            out[i] = ("ok", {}, reason, error, 0.0)
        elif reason is not None:
            metrics = bench.score_failure(item, reason)
            # an overflow the benchmark scores is a result (stored once, not a failure)
            status = "ok" if reason == "overflow" and metrics is not None else "failed"
            if reason == "overflow" and metrics is None:
                failures.append(Failure("model", str(error), label, item.key, None, run_id))
            out[i] = (status, {k: float(v) for k, v in (metrics or {}).items()}, reason, error, 0.0)
        else:
            live.append(i)
    if live:
        def run(idx: list[int]) -> list[dict]:
            kwargs = {"device": device} if device is not None else {}
            return bench.score_batch([rows[i][0] for i in idx], [rows[i][1] for i in idx],
                                     [list(rows[i][2]) for i in idx], **kwargs)

        measure = meter.measure(label, "score", len(live)) if meter is not None else _null()
        with measure as timing:
            try:
                results: list[Any] = list(run(live))
                if len(results) != len(live):
                    raise ValueError(f"score_batch returned {len(results)} results for {len(live)} items")
            except Exception:
                results = []
                for i in live:  # find which items the scorer cannot take
                    try:
                        results.append(run([i])[0])
                    except Exception as exc:
                        results.append(exc)
        per = getattr(timing, "elapsed", 0.0) / len(live)
        for i, res in zip(live, results):
            item = rows[i][0]
            if isinstance(res, BaseException):
                reason = getattr(res, "icl_reason", "invalid")
                msg = f"model {label!r}, item {item.key!r}: scoring failed: {short_trace(res)}"
                failures.append(Failure("score", msg, label, item.key, None, run_id))
                metrics = bench.score_failure(item, reason) or {}
                out[i] = ("failed", {k: float(v) for k, v in metrics.items()}, reason, msg, per)
            else:
                out[i] = ("ok", _numbers(res, defer), None, None, per)
    return out  # type: ignore[return-value]


class _null:
    elapsed = 0.0

    def __enter__(self) -> "_null":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _upload(image: Any, device: str) -> Any:
    import torch

    return torch.from_numpy(image).to(device)

