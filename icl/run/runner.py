"""``run(config)``: plan -> execute into the store -> summarise -> the common files;
``rescore(run_dir)``: the same files from stored responses, without any model.

Common files of every benchmark, in ``out``: ``results.json`` (benchmark, protocol, resolved
config, command line, git revision or installed version, library versions, backends that ran,
device, seeds, hashes of the plan and its frozen lists, timings, compute per model,
``schema_version`` and ``comparisons``), ``results.csv`` (the long table of every benchmark,
:mod:`icl.report.schema`), one CSV per summary table of the benchmark, ``comparisons.csv``,
``report.md`` and ``plots/``.

A run is its folder: results.json records ``out``, ``store`` and ``data_root`` as absolute
paths, and ``rescore`` works on the folder it is given (a store inside the recorded ``out``
moves with it) from any working directory, never creating a store.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, TextIO

from icl._lazy import extra_hint
from icl.benchmarks.base import Benchmark, Item
from icl.report import reproduction
from icl.report.html import synthetic_note
from icl.report.schema import METHOD, SCHEMA_VERSION, common_tables
from icl.run.execution import responses as R
from icl.run.execution.compute import ComputeMeter, summarise_costs
from icl.run.planning.config import ModelSpec, RunConfig
from icl.run.execution.device import eval_device
from icl.run.execution.engine import Engine, ExecStats, score_answers
from icl.run.planning.plan import refusal_cell
from icl.run.errors import ConfigError
from icl.store.atomic import OutputWriteError, is_user_fixable, write_text
from icl.run.outputs.files import DEFAULT_STORE, claim_folder, replacing, start_plots, write_artifacts, write_outputs
from icl.run.outputs.lock import FolderLock
from icl.models import hub
from icl.run.planning.models import RunModel, resolve_device
from icl.run.scaleout import shard as S
from icl.run.outputs.samples import SAMPLES, log_samples, write_samples
from icl.store import Failure, Score, ScoreKey, Store, StoreError
from icl.run.planning.setup import absolute, absolute_paths, check_judges, instantiate_models, open_benchmark, planned_items

MAX_FAILURES_SHOWN = 20


@dataclass
class Outcome:
    """What a run did; ``exit_code`` is 1 when any planned item failed."""

    out_dir: Path
    run_id: str
    stats: ExecStats
    tables: dict[str, list[dict[str, Any]]]
    rows: list[dict[str, Any]]
    failures: list[Failure] = field(default_factory=list)
    failed_items: int = 0
    missing_items: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    not_applicable: dict[str, dict[str, int]] = field(default_factory=dict)
    # model label -> cell (task and shots) -> {"items": n, "why": the first refusal's sentence}
    refused: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed_items or self.failures or self.missing_items else 0



def _check_before_loading(config: RunConfig, bench: Benchmark, items: Sequence[Item], models: Sequence[RunModel],
                          judges: Sequence[RunModel], stderr: TextIO) -> None:
    """Before any model is loaded, what ``--check`` lists of the run's files: the checkpoint of
    every model and judge the run will load (work left in the store), its safetensors headers and
    its networks' architecture against them (:func:`icl.run.planning.check.checkpoint_problems`): one line,
    exit 2. The disk its outputs need against the output folder's free space
    (:func:`icl.run.planning.check.disk_warning`, the line ``--check`` warns with) is an estimate: a
    warning line, and the run goes on (a disk that does fill stops it with one line, keeping
    every result it stored)."""
    import icl.run.planning.check as check

    loading, needed, remaining = check.to_load(config, bench, items, models, judges)
    if remaining:
        why = check.disk_warning(config.out_dir, needed, int(check.disk_free(config.out_dir)), remaining)
        if why is not None:
            print(f"icl.run: warning: {why}", file=stderr)
    found = check.checkpoint_problems(loading)
    if found:
        more = f" (and {len(found) - 1} more: python -m icl.run ... --check lists them)" if len(found) > 1 else ""
        raise ConfigError(f"{found[0][0]}: {found[0][1]}{more}")


def run(config: RunConfig, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> Outcome:
    """Run ``config``; prints the summary (stdout) and failures (stderr); returns the outcome."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if not config.progress:  # no bars at all: also transformers' and huggingface_hub's (read at their import)
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    t0 = time.perf_counter()
    absolute_paths(config)
    hub.forget()  # hf: references resolve afresh for each run, then stay fixed for all of it
    device = resolve_device(config.device)  # a device that is not there: one line before any planning
    bench = open_benchmark(config)
    _start_helpers(config, bench, device)  # before the planning: their imports overlap it
    items, extra = planned_items(bench, config)
    models, judges = instantiate_models(config, bench, device)
    check_judges(bench, items, models, judges)
    _check_before_loading(config, bench, items, models, judges, stderr)
    out = config.out_dir
    # a cluster that cannot be joined: one line before anything is written
    judge_workers = config.judge_workers if judges else None
    pool = open_pool(config, device, config.workers, "--workers", (config.workers or 1) + (judge_workers or 0))
    judge_pool = None
    try:
        if judge_workers:
            judge_pool = open_pool(config, device, judge_workers, "--judge-workers", beside=pool.units)
        with writable(out, config.store_path):
            out.mkdir(parents=True, exist_ok=True)
            with FolderLock(out, config.command):
                claim_folder(out, bench.name)
                return _run_locked(config, bench, items, device, models, judges, out, t0, stdout, stderr,
                                   extra, pool, judge_pool)
    finally:
        for p in (pool, judge_pool):
            if p is not None:
                p.close()


def _start_helpers(config: RunConfig, bench: Benchmark, device: str) -> None:
    """Start the helper processes the run will hand work to (:mod:`icl.helpers`): their
    interpreters and imports then overlap the run instead of following it."""
    from icl import helpers

    pools = list(bench.helper_pools(eval_device(device, config.evaluate) is None))
    if config.plots and type(bench).plots is not Benchmark.plots:
        pools.append("figures")
    helpers.settle_guesses(pools)  # the command line's guess (icl.run.__main__), now that the run knows
    for name in pools:
        helpers.warm(name)



@contextmanager
def writable(out: Path, store: Path) -> Iterator[None]:
    """Read-only folders and full disks as one :class:`OutputWriteError` line (exit 2): the
    store keeps every committed batch (SQLite rolls the failed one back)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        code = (errno.ENOSPC if "full" in text else errno.EROFS if "readonly" in text
                else errno.EACCES if "unable to open" in text else _io_error() if "disk i/o error" in text else None)
        if code is None:
            raise
        raise OutputWriteError(store, OSError(code, str(exc))) from None
    except OutputWriteError:
        raise
    except OSError as exc:
        if not is_user_fixable(exc):
            raise
        raise OutputWriteError(Path(exc.filename) if exc.filename else out, exc) from None


def _io_error() -> int:
    """What SQLite's "disk I/O error" most likely was: a write past the process's file size limit
    (``ulimit -f``: SQLite reports EFBIG as an I/O error, not as a full disk) when one is set,
    else an I/O error of the device."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return errno.EFBIG if soft != resource.RLIM_INFINITY else errno.EIO


def _run_locked(config: RunConfig, bench: Benchmark, items: list[Item], device: str, models: list[RunModel],
                judges: list[RunModel], out: Path, t0: float, stdout: TextIO, stderr: TextIO,
                extra: Mapping[str, Any], pool: Any = None, judge_pool: Any = None) -> Outcome:
    artifacts = write_artifacts(bench, out)
    t_plan = time.perf_counter()
    where = eval_device(device, config.evaluate)
    meter = ComputeMeter(device, trace_memory=config.trace_memory)
    with Store(config.store_path) as store:
        # the scores it plans (as results.json counts them), so that a viewer shows progress while it runs
        run_id = store.start_run(dict(config=config.resolved(), protocol=bench.protocol,
                                      planned=len(items) * len(models) * max(1, len(judges))))
        for m in [*models, *judges]:
            store.put_model(m.model_id, m.label, m.identity)
        store.add_failures([Failure("data", f"{where_}: {msg}", None, None, path, run_id)
                            for where_, msg, path in bench.data_failures()])
        engine = Engine(bench, models, judges, store, run_id, meter, device, where, config.overlap, config.progress,
                        pool, judge_pool)
        try:
            stats = engine.run(items)
        finally:
            store.add_compute(meter.records(run_id))
            meter.close()
        t_exec = time.perf_counter()
        if pool is not None:
            ray = dict(pool.describe(), **({} if judge_pool is None else {"judge": judge_pool.describe()}))
            extra = dict(extra, ray=ray)
        with replacing(out, config.command):  # INCOMPLETE until every file is written
            outcome = finish(config, bench, items, [(m.label, m.model_id) for m in models], judge_records(judges),
                             store, run_id, stats, artifacts, dict(plan_s=t_plan - t0, execute_s=t_exec - t_plan),
                             identities={m.model_id: m.identity for m in models}, device=device, t0=t0,
                             roles={m.label: model_role(m) for m in models}, extra=extra)
    print_summary(bench, outcome, stdout, stderr)
    if "shard" in extra:
        print(S.note(extra["shard"]), file=stdout)
    return outcome


def open_pool(config: RunConfig, device: str, workers: Optional[int], flag: str, local_cpus: int = 0,
              beside: int = 0) -> Any:
    # the models' workers may each span several GPUs; the judge's take one each
    """Ray workers of a ``--ray`` run (:mod:`icl.run.execution.pool`), else None (Ray is not imported);
    ``local_cpus``: CPUs of a local instance started here (default ``workers``)."""
    if not config.ray:
        return None
    try:
        from icl.run.execution.pool import RayPool
    except ImportError as exc:
        raise ConfigError(f"--ray: {exc}{extra_hint(exc)}") from None
    return RayPool(config.ray, workers, device, config.worker_retries, flag, local_cpus or None, beside,
                   config.gpus_per_worker if flag == "--workers" else 1)


#: what results.json keeps of each model's role, read back by rescore, export and merge
ROLE_KEYS = ("serves", "reference", "published_as")


def model_role(m: RunModel) -> dict[str, Any]:
    """What the summary needs of a model besides its scores: the request types it serves,
    whether it is a reference point (kept out of ranks) and the paper row it stands for
    (``published_as``, :func:`icl.report.reproduction.paper_row`, only when matched); recorded
    in results.json for rescore."""
    role: dict[str, Any] = dict(serves=sorted(t.__name__ for t in m.adapter.serves), reference=m.reference)
    if m.published is not None:
        role["published_as"] = m.published
    return role


def recorded_roles(meta: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The roles (:data:`ROLE_KEYS`) of a finished run's models, from its results.json."""
    return {label: {k: m[k] for k in ROLE_KEYS if k in m} for label, m in meta["models"].items()}


def applicable_items(bench: Benchmark, items: Sequence[Item], role: Optional[Mapping[str, Any]]) -> list[Item]:
    if not role or "serves" not in role:
        return list(items)
    served = set(role["serves"])
    return [it for it in items if any(t.__name__ in served for t in bench.request_type(it).__mro__)]


def judge_records(judges: Sequence[RunModel]) -> list[dict[str, Any]]:
    """The run's judges as results.json records them (``judges``): label, judge_id, identity, and
    the adapter's ``note`` when it has one (a random-weights judge says so)."""
    return [dict(label=j.label, judge_id=j.model_id, identity=j.identity,
                 **({"note": j.adapter.note} if j.adapter.note else {})) for j in judges]


def recorded_judges(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The judges of a finished run's results.json: ``judges``, or the one ``judge_id`` /
    ``judge`` of runs made before several judges were possible."""
    if meta.get("judges") is not None:
        return [dict(j) for j in meta["judges"]]
    if not meta.get("judge_id"):
        return []
    identity = meta.get("judge") or {}
    spec = (meta.get("config") or {}).get("judge")  # None when the benchmark's default judge ran
    label = (ModelSpec(spec["name"], dict(spec.get("args") or {})).label if isinstance(spec, Mapping)
             else identity.get("adapter") or "judge")
    return [dict(label=label, judge_id=meta["judge_id"], identity=meta.get("judge"))]


def recorded_models(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(label, model id)`` of a finished run's models in the run's own order (``model_order``;
    results.json writes its ``models`` map with sorted keys), so that rescore, export and merge
    draw tables and figures as the run did. A results.json without ``model_order`` (written
    before it was recorded) gives the map's order."""
    models = meta["models"]
    order = [label for label in meta.get("model_order") or () if label in models]
    order += [label for label in models if label not in order]
    return [(label, models[label]["model_id"]) for label in order]


def finish(config: RunConfig, bench: Benchmark, items: Sequence[Item], models: Sequence[tuple[str, str]],
           judges: Sequence[Mapping[str, Any]], store: Store, run_id: str, stats: ExecStats,
           artifacts: Mapping[str, str], timings: dict[str, float], identities: Mapping[str, Any], device: str,
           t0: Optional[float] = None, roles: Optional[Mapping[str, Mapping[str, Any]]] = None,
           extra: Optional[Mapping[str, Any]] = None) -> Outcome:
    """Read the planned scores back, summarise, write the common files (``judges``:
    :func:`judge_records`, one score per item, model and judge; ``t0``: when the run started, for
    the total in results.json; ``roles``: per model label, :func:`model_role`)."""
    t_report = time.perf_counter()
    roles = dict(roles or {})
    bench.reference_models = {label for label, r in roles.items() if r.get("reference")}
    rows, failed, missing = [], 0, 0
    not_applicable: dict[str, dict[str, int]] = {}
    refused: dict[str, dict[str, dict[str, Any]]] = {}  # items the model refused: not applicable, no row
    asked_items: dict[str, list[Item]] = {}
    costs: dict[str, list[Score]] = {}
    for label, model_id in models:
        mine = asked_items[label] = applicable_items(bench, items, roles.get(label))
        if len(mine) < len(items):
            skipped: dict[str, int] = {}
            asked = {it.key for it in mine}
            for it in items:
                if it.key not in asked:
                    kind = f"{bench.item_kind(it)} ({bench.request_type(it).__name__})"
                    skipped[kind] = skipped.get(kind, 0) + 1
            not_applicable[label] = skipped
        slots: list[Optional[Mapping[str, Any]]] = [*judges] or [None]
        for judge in slots:  # one score per judge (the ``judge`` column names it)
            judge_id = judge["judge_id"] if judge else ""
            column = {"judge": judge["label"]} if judge else {}
            keys = [ScoreKey(bench.name, bench.protocol, it.key, model_id, judge_id, bench.scorer_version)
                    for it in mine]
            found = {s.key.item_key: s for s in store.scores(keys)}
            for it in mine:
                s = found.get(it.key)
                if s is None:
                    missing += 1
                    continue
                if s.reason == "refused":  # the model refused it: not applicable, never a row or a 0
                    if judge is slots[0]:
                        cell = refused.setdefault(label, {}).setdefault(
                            refusal_cell(bench, it), {"items": 0, "why": _refusal_text(s.error)})
                        cell["items"] += 1
                    continue
                failed += s.status != "ok"
                if judge is slots[0]:  # compute is the model's, one per item whatever the judges
                    costs.setdefault(label, []).append(s)
                rows.append({"model": label, "model_id": model_id, "key": it.key, "status": s.status,
                             "reason": s.reason, **column, **dict(it.group), **s.metrics})
    # the long results.csv (one schema for every benchmark)
    common = common_tables(bench, rows, {k for it in items for k in it.group})
    # the papers' numbers beside ours, for the models matched to a paper row (roles' published_as)
    published = reproduction.load(bench)
    paper_rows = {label: r["published_as"] for label, r in roles.items() if r.get("published_as")}
    reproduction.annotate(published, paper_rows, common["results"])
    # a plugin's own table named like a common one keeps its rows under "<benchmark>_<name>"
    own = {(f"{bench.name}_{k}" if k in common or k == "reproduction" else k): v
           for k, v in bench.summarise(rows).items()}
    tables = {"results": common["results"], **own, "comparisons": common["comparisons"]}
    if published is not None:
        tables["reproduction"] = reproduction.reproduction_rows(published, paper_rows, common["results"],
                                                                bench.result_rows(rows), bench.results_spec)
    failures = store.failures(run_id)
    timings["summarise_s"] = time.perf_counter() - t_report
    if t0 is not None:
        timings["total_s"] = time.perf_counter() - t0  # up to the files, which follow
        age = process_age() if config.whole_process else None
        if age is not None:  # interpreter start and imports before run(), when this run is the process
            timings["startup_s"] = max(0.0, age - timings["total_s"])
    def answers(item_key: str) -> dict[str, Any]:
        out = {}
        for label, model_id in models:
            r = store.final_answers([item_key], model_id).get(item_key)
            if r is not None and r.status == "ok":
                try:
                    out[label] = R.stored(r.kind, r.body)
                except R.InvalidOutput:  # a damaged stored answer: drawn as none (its score says failed)
                    continue
        return out

    # the figures first: helper processes draw them while the other files are written here
    plots = start_plots(config.out_dir, bench, tables, answers, config.plots)
    try:
        meta = _meta(config, bench, items, models, judges, store, run_id, stats, artifacts, timings, identities,
                     device, roles, extra, rows, failed, missing, not_applicable, asked_items, costs, common, answers,
                     refused)
    except BaseException:
        plots.abandon()
        raise
    write_outputs(config.out_dir, bench, tables, meta, failures, answers, plots=plots)
    timings["report_s"] = time.perf_counter() - t_report
    return Outcome(config.out_dir, run_id, stats, tables, rows, failures, failed, missing, timings, not_applicable,
                   refused)


def _refusal_text(error: Optional[str]) -> str:
    """The refusal's own sentence out of a stored error (``model 'x': RequestRefused: ...``)."""
    text = str(error or "refused")
    return text.split("RequestRefused: ", 1)[-1]


def _meta(config: RunConfig, bench: Benchmark, items: Sequence[Item], models: Sequence[tuple[str, str]],
          judges: Sequence[Mapping[str, Any]], store: Store, run_id: str, stats: ExecStats,
          artifacts: Mapping[str, str], timings: dict[str, float], identities: Mapping[str, Any], device: str,
          roles: Mapping[str, Mapping[str, Any]], extra: Optional[Mapping[str, Any]], rows: list, failed: int,
          missing: int, not_applicable: Mapping[str, Mapping[str, int]], asked_items: Mapping[str, list[Item]],
          costs: Mapping[str, list[Score]], common: Mapping[str, Any], answers: Callable[[str], dict[str, Any]],
          refused: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """results.json of a finished run, less the provenance and tables; writes the per-sample log
    and the benchmark's per-run files on the way (their digests are in it)."""
    compute = [dict(asdict(c), samples_per_s=c.samples_per_s) for c in store.compute([run_id])]
    if extra and isinstance(extra.get("shard"), dict):  # what merge checks the shard's store against
        extra = {**extra, "shard": {**extra["shard"], "content_sha256": S.content_sha256(
            store, bench.name, bench.protocol, bench.scorer_version, [it.key for it in items],
            [mid for _, mid in models])}}
    if log_samples(config.log_samples, len(items) * len(models)):  # per-sample log (icl.run.outputs.samples)
        t_samples = time.perf_counter()
        artifacts = {**artifacts, **write_samples(config.out_dir, bench, items, models, judges, store,
                                                  asked_items)}
        timings["samples_s"] = time.perf_counter() - t_samples
    return dict(
        benchmark=bench.name, protocol=bench.protocol, scorer_version=bench.scorer_version, run_id=run_id,
        config=config.resolved(), command=config.command, device=device,
        models={label: dict(model_id=mid, identity=identities.get(mid), **roles.get(label, {}))
                for label, mid in models},
        model_order=[label for label, _ in models],  # ``models`` is written with sorted keys
        not_applicable=not_applicable, refused=dict(refused or {}), stopped_models=dict(stats.stopped),
        data=bench.data_origin(),
        judges=[dict(j) for j in judges],  # ``judge``/``judge_id``: the first, as earlier versions read them
        judge=judges[0]["identity"] if judges else None, judge_id=judges[0]["judge_id"] if judges else None,
        plan=dict(items=len(items), sha256=S.plan_sha256(items)),
        artifacts={**artifacts, **_result_files(config.out_dir, bench, rows, answers)},
        fingerprints=bench.fingerprints(),
        counts=dict(planned=len(items) * len(models) * max(1, len(judges)), computed=stats.computed, skipped=stats.skipped,
                    failed=failed, missing=missing, model_calls=stats.model_calls,
                    cached_responses=stats.cached_responses),
        timings=timings, compute=compute, compute_per_sample=summarise_costs(costs), schema_version=SCHEMA_VERSION,
        statistics=METHOD, comparisons=common["comparisons"],
        **dict(extra or {}),
    )


def _result_files(out: Path, bench: Benchmark, rows: list, answers: Any) -> dict[str, str]:
    """Write the benchmark's per-run files (e.g. predictions.jsonl); name -> SHA-256."""
    files = bench.result_files(rows, answers)
    for name, text in files.items():
        write_text(out / name, text)
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()}


def process_age() -> Optional[float]:
    """Seconds since this process started (Linux ``/proc``; None elsewhere): the whole run's
    time, start-up, imports and files included."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _run_seconds(t: Mapping[str, float]) -> Optional[float]:
    """From ``run()`` to its last file: ``total_s`` stops before the files, ``report_s`` covers
    the summary and the files."""
    if "total_s" not in t:
        return None
    return t["total_s"] + max(0.0, t.get("report_s", 0.0) - t.get("summarise_s", 0.0))


def print_summary(bench: Benchmark, o: Outcome, stdout: TextIO, stderr: TextIO) -> None:
    text = bench.summary(o.tables)
    if text:
        print(text, file=stdout)
    s = o.stats
    t = o.timings
    note = synthetic_note(bench.data_origin())
    if note:  # never passed off as the benchmark, on the terminal either
        print(f"{bench.name}: {note}; a smoke test of the toolkit, not the benchmark's results", file=stdout)
    unit = "scores (item x judge)" if len({r.get("judge") for r in o.rows}) > 1 else "items"  # counts are scores
    print(f"{bench.name}: {s.computed} {unit} computed, {s.skipped} already in the store, {o.failed_items} failed"
          + (f" ({s.cached_responses} answers reused from the store)" if s.cached_responses else "")
          + (f"; {whole:.1f} s" if (whole := (process_age() if "startup_s" in t else None) or _run_seconds(t))
             else "") + f"; files in {o.out_dir}",
          file=stdout)
    for label, kinds in o.not_applicable.items():
        types = sorted({k.rsplit(" (", 1)[-1].rstrip(")") for k in kinds})
        print(f"{sum(kinds.values())} items of {len(kinds)} task(s) skipped for {label}: it does not serve "
              f"{', '.join(types)} ({', '.join(sorted(kinds))}); not applicable, not scored", file=stdout)
    for label, cells in o.refused.items():
        for cell, r in cells.items():
            print(f"{r['items']} items of {cell} not applicable to {label}: it refuses them ({r['why']}); "
                  "stored, not scored", file=stdout)
    for label, why in s.stopped.items():
        print(f"STOPPED {label}: {why}; its other items were not asked (rerun to retry)", file=stderr)
    if o.failed_items or o.failures:
        data = sum(1 for f in o.failures if f.stage == "data")
        print(f"FAILED: {o.failed_items} items failed, {data} data failures, {len(o.failures) - data} other failure "
              f"events in this run (grouped by stage and model):", file=stderr)
        groups: dict[tuple, list[str]] = {}
        for f in o.failures:  # data failures one per file or item, the others by stage and model
            groups.setdefault((f.stage, f.model or "-", (f.path or f.item or f.message) if f.stage == "data" else None),
                              []).append(f.message)
        for (stage, model, _), messages in list(groups.items())[:MAX_FAILURES_SHOWN]:
            count = f"{len(messages)} x, first: " if len(messages) > 1 else ""
            print(f"  [{stage}] model {model}: {count}{messages[0]}", file=stderr)
        if len(groups) > MAX_FAILURES_SHOWN:
            print(f"  ... and {len(groups) - MAX_FAILURES_SHOWN} more groups (report.md, the store's failures table)",
                  file=stderr)


def rescore(run_dir: Path, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None,
            command: Optional[list[str]] = None) -> Outcome:
    """Recompute every score and file of ``run_dir`` from its stored responses (no model is
    loaded or called). results.json keeps the run's ``command`` and adds ``rescore_command``."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    run_dir = absolute(Path(run_dir))
    meta, config = _recorded_run(run_dir, "rescore")
    rescore_command = command or ["python", "-m", "icl.run", "rescore", str(run_dir)]
    t0 = time.perf_counter()
    bench = open_benchmark(config)
    items, shard = planned_items(bench, config)
    models = recorded_models(meta)
    judges = recorded_judges(meta)
    stats = ExecStats()
    with writable(config.out_dir, config.store_path), \
            FolderLock(config.out_dir, rescore_command), \
            _claimed_store(config.out_dir, bench.name, config.store_path) as store:
        run_id = store.start_run(dict(config=config.resolved(), protocol=bench.protocol, rescore=str(run_dir)))
        store.add_failures([Failure("data", f"{where_}: {msg}", None, None, path, run_id)
                            for where_, msg, path in bench.data_failures()])
        for label, model_id in models:
            final = store.final_answers([it.key for it in items], model_id)
            answered = [(it, final[it.key]) for it in items if it.key in final]
            for judge_id in [j["judge_id"] for j in judges] or [""]:  # each judge's own answers and scores
                judged = store.judge_answers([it.key for it, _ in answered], model_id, judge_id) if judge_id else {}
                batch: list[tuple] = []
                scores: list[Score] = []
                failures: list[Failure] = []
                for it, r in answered:
                    judgements = [jr.body for jr in judged.get(it.key, []) if jr is not None and jr.status == "ok"]
                    value, reason, error = None, (None if r.status == "ok" else (r.reason or "error")), r.error
                    if r.status == "ok":
                        try:
                            value = R.stored(r.kind, r.body)
                        except R.InvalidOutput as exc:  # a damaged stored answer fails its item (a run asks again)
                            reason, error = "invalid", f"model {label!r}: the stored answer: {exc}"
                            failures.append(Failure("model", f"item {it.key!r}: {error}", label, it.key, None, run_id))
                    batch.append((it, value, judgements, reason, error, r))
                results = score_answers(bench, [b[:5] for b in batch], None, None, label, run_id, failures)
                for b, (status, metrics, reason, error, score_s) in zip(batch, results):
                    key = ScoreKey(bench.name, bench.protocol, b[0].key, model_id, judge_id, bench.scorer_version)
                    r = b[5]  # the answer's stored cost goes with its new score
                    scores.append(Score(key, status, metrics, error, reason, r.seconds, score_s, run_id,
                                        r.peak_memory_bytes, r.memory_kind, r.energy_j))
                    stats.computed += status == "ok" and reason != "refused"
                    stats.failed += status != "ok"
                store.write_batch(scores=scores, failures=failures)
        meta_timings = dict(meta.get("timings") or {})
        with replacing(config.out_dir, rescore_command):  # INCOMPLETE until every file is replaced
            outcome = finish(config, bench, items, models, judges, store, run_id, stats,
                             write_artifacts(bench, config.out_dir), meta_timings,
                             identities={m["model_id"]: m.get("identity") for m in meta["models"].values()},
                             device=meta.get("device", "cpu"), t0=t0,
                             roles=recorded_roles(meta),
                             extra=dict(rescore_command=rescore_command, **shard))
    print_summary(bench, outcome, stdout, stderr)
    return outcome


def _recorded_run(run_dir: Path, verb: str) -> tuple[dict[str, Any], RunConfig]:
    """results.json of the run in ``run_dir`` and its config, pointing at the run's files where
    they are now (ConfigError, one line, for a folder that is not a finished run)."""
    path = run_dir / "results.json"
    if not run_dir.is_dir():
        raise ConfigError(f"{verb} {run_dir}: no such folder (give a run's output folder)")
    if not path.is_file():
        raise ConfigError(f"{verb} {run_dir}: not a run folder (no results.json in it)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        config = RunConfig.from_resolved(meta["config"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: not a finished run's results.json ({type(exc).__name__}: {exc})") from None
    config.out, config.store = run_dir, run_store(meta["config"], run_dir)
    origin = _origin(meta["config"].get("out"), run_dir)
    if config.data_root is not None and not config.data_root.is_absolute() and origin is not None:
        config.data_root = origin / config.data_root  # recorded relative by earlier versions
    if not config.store.is_file():
        raise ConfigError(f"{verb} {run_dir}: no store at {config.store} (results.json names it); {verb} reads "
                          f"a run's stored responses and never creates a store")
    config.command = meta.get("command")
    return meta, config


def export(run_dir: Path, command: Optional[list[str]] = None) -> Path:
    """Write ``samples.jsonl``, ``requests.jsonl`` and ``samples/*.png`` of the finished run in
    ``run_dir`` from its store (no model is loaded; results.json is left as it is); returns
    the path of ``samples.jsonl``."""
    run_dir = absolute(Path(run_dir))
    meta, config = _recorded_run(run_dir, "export")
    bench = open_benchmark(config)
    items, _ = planned_items(bench, config)
    models = recorded_models(meta)
    roles = recorded_roles(meta)
    with writable(config.out_dir, config.store_path), \
            FolderLock(config.out_dir, command or ["python", "-m", "icl.run", "export", str(run_dir)]), \
            _claimed_store(config.out_dir, bench.name, config.store_path) as store:
        write_samples(config.out_dir, bench, items, models, recorded_judges(meta), store,
                      {label: applicable_items(bench, items, roles.get(label)) for label, _ in models})
    return config.out_dir / SAMPLES


def run_store(recorded: Mapping[str, Any], run_dir: Path) -> Path:
    """The store of the run now in ``run_dir``: the recorded store, moved along with the folder
    when it lay inside the recorded ``out`` (the default), else as recorded."""
    out, store = recorded.get("out"), recorded.get("store")
    if not store:
        return run_dir / DEFAULT_STORE
    if out:
        inside = os.path.relpath(os.path.normpath(store), os.path.normpath(out))
        if not inside.startswith(os.pardir) and not os.path.isabs(inside):
            return run_dir / inside
    return Path(store)


def _origin(recorded_out: Optional[str], run_dir: Path) -> Optional[Path]:
    """The working directory of a run whose ``out`` was recorded relative (earlier versions),
    when ``run_dir`` still ends with that relative path; None otherwise."""
    if not recorded_out or os.path.isabs(recorded_out):
        return None
    parts = Path(os.path.normpath(recorded_out)).parts
    if os.pardir in parts or run_dir.parts[-len(parts):] != parts:
        return None
    return Path(*run_dir.parts[:-len(parts)])


def _claimed_store(out: Path, benchmark: str, path: Path) -> Store:
    """The run's store, opened after the folder's checks (:func:`claim_folder`), never created."""
    claim_folder(out, benchmark)
    try:
        return Store(path, create=False)
    except StoreError as exc:
        raise ConfigError(f"rescore: {exc}") from None
