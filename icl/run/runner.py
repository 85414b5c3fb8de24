"""``run(config)``: plan, execute into the store, then aggregate and write the report."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, TextIO

from icl.report import Report, TaskSpec, write_report
from icl.run.compute import ComputeMeter
from icl.run.execute import ExecStats, Executor
from icl.run.meta import git_revision, package_versions
from icl.run.plan import PROTOCOL, Plan, RunConfig, make_plan
from icl.store import Failure, Store

MAX_FAILURES_SHOWN = 20


@dataclass
class Outcome:
    """What a run did; ``exit_code`` is 1 when any planned sample failed."""

    out_dir: Path
    run_id: str
    stats: ExecStats
    report: Report
    failures: list[Failure] = field(default_factory=list)
    failed_samples: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed_samples or self.failures else 0


def task_specs(plan: Plan) -> dict[str, TaskSpec]:
    return {name: TaskSpec(name, tuple(t.metrics), tuple(t.rank_metrics), frozenset(t.lower_is_better))
            for name, t in plan.tasks.items()}


def _settings(config: RunConfig) -> dict[str, Any]:
    d = asdict(config)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


def run(config: RunConfig, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> Outcome:
    """Run the benchmark described by ``config``; prints the summary (stdout) and failures
    (stderr), returns the outcome."""
    t0 = time.perf_counter()
    plan = make_plan(config)
    t_plan = time.perf_counter()
    meter = ComputeMeter(config.device, trace_memory=config.trace_memory)
    with Store(config.store_path) as store:
        run_id = store.start_run(dict(settings=_settings(config), protocol=PROTOCOL,
                                      context_sha256=plan.context_sha256))
        store.add_failures([Failure("data", f"dataset {i.dataset!r}, sample {i.sample_id!r} (tasks "
                                            f"{', '.join(i.tasks)}): {i.message}", None, i.dataset,
                                    i.tasks[0] if len(i.tasks) == 1 else None, i.sample_id, None, i.path, run_id)
                            for i in plan.issues])
        executor = Executor(plan, store, run_id, meter)
        try:
            stats = executor.run()
        finally:
            store.add_compute(meter.records(run_id))
            meter.close()
        t_exec = time.perf_counter()
        rows = store.results(executor.planned_keys())
        failures = store.failures(run_id)
        compute = [dict(asdict(c), samples_per_s=c.samples_per_s) for c in store.compute(store.run_ids())
                   if c.model in plan.models or c.model == "*"]
    failed_rows = [r for r in rows if r.status != "ok"]
    timings = dict(plan_s=t_plan - t0, execute_s=t_exec - t_plan)
    meta = dict(
        benchmark=config.benchmark, name=config.run_name, protocol=PROTOCOL, run_id=run_id,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), git_revision=git_revision(),
        packages=package_versions(), seed=config.seed, seeds=dict(global_seed=config.seed), shots=config.shots,
        device=config.device, settings=_settings(config), context_csv=plan.context_csv.name,
        context_csv_sha256=plan.context_sha256, store=str(config.store_path),
        models={n: dict(version=m.version, precision=m.precision, batch_size=m.batch_size, privileged=m.privileged)
                for n, m in plan.models.items()},
        datasets={n: dict(version=d.meta.version) for n, d in plan.datasets.items()},
        filtered=plan.filtered,
        counts=dict(planned=plan.n_samples, computed=stats.computed, skipped=stats.skipped, failed=len(failed_rows),
                    model_calls=stats.model_calls),
        timings=timings,
    )
    report = write_report(config.out_dir, rows, task_specs(plan), meta, compute, [f.message for f in failures],
                          plots=config.plots,
                          qualitative_dir=config.out_dir / "qualitative", model_order=list(plan.models))
    timings.update(report_s=time.perf_counter() - t_exec, total_s=time.perf_counter() - t0)
    _record_timings(config.out_dir / "results.json", timings)
    outcome = Outcome(config.out_dir, run_id, stats, report, failures, len(failed_rows), timings)
    _print_summary(outcome, failed_rows, stdout or sys.stdout, stderr or sys.stderr)
    return outcome


def _record_timings(path: Path, timings: dict[str, float]) -> None:
    """Put the final timings (known only once the report is written) into results.json."""
    data = json.loads(path.read_text())
    data["timings"] = timings
    path.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")


def _print_summary(o: Outcome, failed_rows: list, stdout: TextIO, stderr: TextIO) -> None:
    print(o.report.summary, file=stdout)
    s = o.stats
    print(f"{s.computed} samples computed, {s.skipped} already in the store, {len(failed_rows)} failed; "
          f"{o.timings['total_s']:.1f} s (plan {o.timings['plan_s']:.1f}, execute {o.timings['execute_s']:.1f}, "
          f"report {o.timings['report_s']:.1f}); files in {o.out_dir}", file=stdout)
    if o.report.missing:
        print(f"WARNING: {len(o.report.missing)} metric aggregates are missing (shown as 'missing'; "
              "details in report.md):", file=stderr)
        for line in o.report.missing_summary:
            print(f"  {line}", file=stderr)
    if failed_rows or o.failures:
        data = sum(1 for f in o.failures if f.stage == "data")
        print(f"FAILED: {len(failed_rows)} scored samples failed, {data} data files could not be used, "
              f"{len(o.failures) - data} other failures in this run (data failures one per sample; "
              "others grouped by stage, model, dataset, task):", file=stderr)
        groups: dict[tuple, list[str]] = {}
        for f in o.failures:
            sample = f.query_id if f.stage == "data" else None
            groups.setdefault((f.stage, f.model or "-", f.dataset or "-", f.task or "-", sample), []).append(f.message)
        for (stage, model, dataset, task, _), messages in list(groups.items())[:MAX_FAILURES_SHOWN]:
            count = f"{len(messages)} x, first: " if len(messages) > 1 else ""
            print(f"  [{stage}] model {model}, dataset {dataset}, task {task}: {count}{messages[0]}", file=stderr)
        if len(groups) > MAX_FAILURES_SHOWN:
            print(f"  ... and {len(groups) - MAX_FAILURES_SHOWN} more groups (report.md, the store's failures table)",
                  file=stderr)
