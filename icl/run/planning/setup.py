"""Setting a run up, shared by the run and ``--check``: the benchmark opened with its options, the
plan (all items, or one shard's), the models and judges instantiated (not loaded) with their
problems, the judges checked against what the run will ask them, and absolute paths."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from icl.benchmarks.base import Benchmark, Item
from icl.benchmarks.registry import UnknownBenchmarkError, get_benchmark, list_benchmarks
from icl.report import reproduction
from icl.run.planning.check_parts import Found, missing_package, missing_package_message, package_fix
from icl.run.planning.config import RunConfig, closest, parse_models
from icl.run.errors import CannotServe, ConfigError
from icl.models import hub
from icl.run.planning.models import RunModel, make_model
from icl.models.weights import WeightsError
from icl.run.scaleout import shard as S



def open_benchmark(config: RunConfig) -> Benchmark:
    """The configured benchmark instance (ConfigError for unknown names or options)."""
    try:
        cls = get_benchmark(config.benchmark)
    except UnknownBenchmarkError:
        raise ConfigError(f"unknown benchmark {config.benchmark!r}{closest(config.benchmark, list_benchmarks())}") \
            from None
    options = dict(cls.fast_config()) if config.fast else {"fast": False}
    options.update(config.options)
    options.pop("fast", None)
    try:
        bench = cls({**options, "fast": config.fast, "data_root": config.data_root})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config.options = dict(bench.config)  # every effective setting goes into results.json
    return bench


def plan_items(bench: Benchmark) -> list[Item]:
    try:
        items = list(bench.items())
    except (ValueError, LookupError) as exc:  # bad names, impossible settings
        raise ConfigError(str(exc)) from None
    keys = [it.key for it in items]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ConfigError(f"benchmark {bench.name!r} planned item {dup!r} twice (item keys must be unique)")
    return items


def planned_items(bench: Benchmark, config: RunConfig) -> tuple[list[Item], dict[str, Any]]:
    """The plan items this run computes: all, or with ``--shard I/N`` those of shard I (and
    the ``shard`` record for results.json)."""
    items = plan_items(bench)
    if config.shard is None:
        return items, {}
    mine = S.select(items, *config.shard)
    return mine, dict(shard=S.describe(items, mine, *config.shard))


def problem_reporter(problems: Optional[list[Found]]) -> Callable[..., None]:
    """How a planning step reports a problem: raised as a ConfigError (one line, a run), or
    appended to ``problems`` as (where, message, the error that said it) and the step goes on
    (``--check`` lists them all, each fixed as its error's type says)."""
    def report(where: str, message: str, cause: Optional[BaseException] = None) -> None:
        if problems is None:
            raise ConfigError(message, cause)
        problems.append((where, message, cause))
    return report


def instantiate_models(config: RunConfig, bench: Benchmark, device: str, problems: Optional[list[Found]] = None,
            identity_device: Optional[str] = None) -> tuple[list[RunModel], list[RunModel]]:
    """The run's models and judges, instantiated (not loaded). A problem raises ConfigError, or
    with ``problems`` is listed there and the model left out (``--check``). ``identity_device``:
    the device the identities are computed for (``--check`` of a declared CUDA device on a
    machine without one computes them for the CPU and matches the store's CUDA identities)."""
    report = problem_reporter(problems)
    specs = config.models if config.models is not None else [s for m in bench.models_by_default(bench.config)
                                                             for s in parse_models(m)]
    if not specs:
        report("models", f"benchmark {bench.name!r} has no default models: give --models")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        report("models", f"--models lists {next(x for x in labels if labels.count(x) > 1)!r} twice")
    where = identity_device or device
    models = []
    for s in specs:
        try:
            m = make_model(s, where, config.dtype, bench.request_types, bench.name)
        except ConfigError as exc:
            report(f"model {s.label}", str(exc), exc)
            continue
        why = bench.refuses(m.adapter)  # refused now, in one line, never stopped mid-run
        if why is not None:
            refused = f"model {s.label!r} cannot run benchmark {bench.name!r}: {why}"
            report(f"model {s.label}", refused, CannotServe(refused))
            continue
        try:  # the paper row it stands for: only said explicitly (published_as, or the official checkpoint)
            m.published = reproduction.paper_row(reproduction.load(bench), s.name, s.args,
                                                 sorted({f for f, _ in hub.OFFICIAL}))
        except ValueError as exc:
            report(f"model {s.label}", f"model {s.name!r}: {exc}")
            continue
        models.append(m)
    judge_specs = config.judges or [s for j in bench.default_judges for s in parse_models(j)]
    try:  # the benchmark refuses judges that cannot judge its data (or more judges than it takes)
        asked = tuple(t for t in bench.request_types if any(m.serves(t) for m in models))
        bench.check_judge(tuple(j.name for j in judge_specs), asked)
    except ValueError as exc:
        report("judges", str(exc))
    from icl.models.requests import ChatRequest

    judges = []
    for j in judge_specs:
        try:
            judges.append(make_model(j, where, None, (ChatRequest,), bench.name))
        except ConfigError as exc:
            report(f"judge {j.label}", f"judge {j.label!r}: {exc}" if problems is not None else str(exc), exc)
    seen: dict[str, str] = {}
    for judge in judges:  # one judge twice would score the same answers twice under one key
        if judge.model_id in seen:
            report(f"judge {judge.label}", f"--judge lists {judge.label!r} twice" + (
                f" (the same model as {seen[judge.model_id]!r})" if seen[judge.model_id] != judge.label else ""))
        seen[judge.model_id] = judge.label
    return models, judges


def check_judges(bench: Benchmark, items: Sequence[Item], models: Sequence[RunModel],
                  judges: Sequence[RunModel], problems: Optional[list[Found]] = None,
                  judge_named: bool = False) -> None:
    """Before any generation (one line, exit 2): every judge's files read (``check_loadable``), and
    every judge takes what the run will ask it (``Benchmark.judge_probe``: the judge requests of a
    stand-in answer; ``Adapter.would_refuse``); a run whose answers need a judge has one. With
    ``problems`` every problem is listed there instead (``--check``; ``judge_named``: a judge was
    named but left out for a problem already listed)."""
    report = problem_reporter(problems)
    asked = tuple(t for t in bench.request_types if any(m.serves(t) for m in models))
    probe = bench.judge_probe(items, asked)
    if probe and not judges and not judge_named:
        report("judges", f"benchmark {bench.name!r} scores its answers with a judge: give --judge")
    for j in judges:
        try:
            j.adapter.check_loadable()
        except (WeightsError, ValueError, OSError) as exc:
            report(f"judge {j.label}", f"judge {j.label!r}: {exc}", exc)
            continue
        except ImportError as exc:  # a package its files need (a processor's torchvision): named, with its fix
            package = missing_package(exc)
            report(f"judge {j.label}", f"judge {j.label!r} {missing_package_message(exc)}"
                   + (f"; {package_fix(package)}" if package else ""), exc)
            continue
        why = next((w for w in map(j.adapter.would_refuse, probe) if w), None)
        if why is not None:
            report(f"judge {j.label}", f"judge {j.label!r} cannot judge benchmark {bench.name!r}: {why}")


def absolute(path: Path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(path)))


def absolute_paths(config: RunConfig) -> None:
    """``out``, ``store`` and ``data_root`` as absolute paths, so results.json names the run's
    own files wherever ``rescore`` is started from."""
    config.out = absolute(config.out_dir)
    if config.store is not None:
        config.store = absolute(config.store)
    if config.data_root is not None:
        config.data_root = absolute(config.data_root)
