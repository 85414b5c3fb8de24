"""Command line: ``python -m icl.run [BENCHMARK] [options]`` (also the ``icl`` script).

    python -m icl.run --fast                 # the smoke run of every registered benchmark
    python -m icl.run --fast vibe            # ... of one of them
    python -m icl.run vibe --models painter:weights=/w/painter.pth,dtype=bf16,copy-target --shots 1,3
    python -m icl.run best50 --package DIR --models hf-vlm --model-arg hf-vlm:weights=/w/qwen
    python -m icl.run vibe --config run.toml --device cuda   # flags override the file
    python -m icl.run rescore runs/vibe      # every score and file again from stored responses
    python -m icl.run export runs/vibe       # samples.jsonl and the image answers from the store
    python -m icl.run vibe --shard 0/4 --out runs/vibe.0   # shard 0 of 4 (counted from 0)
    python -m icl.run merge runs/vibe runs/vibe.0 runs/vibe.1 runs/vibe.2 runs/vibe.3
    python -m icl.run vibe --list            # tasks, datasets, models
    python -m icl.run vibe --models ... --check   # everything the run decides before a model call (no GPU)
    python -m icl.run view runs/             # browse the runs in a web browser (127.0.0.1:8765)

BENCHMARK defaults to ``vibe``. Exit status: 0 everything computed, 1 some items failed, 2 a usage
or configuration error (one line, no traceback), 130 interrupted (finished batches are kept);
with --check: 0 runnable, 2 problems (all listed).
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn, Optional, Sequence

from icl._parse import EnvError, check_environment, parse_bool
from icl.run.planning.config import ModelSpec, RunConfig, apply_model_args, closest, parse_models, parse_shard
from icl.run.errors import ConfigError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors exit 2 with one line
        raise ConfigError(f"{message} (see {self.prog} --help)")


def common_parser(prog: str) -> argparse.ArgumentParser:
    from icl.models import PRECISIONS
    from icl.run.execution.device import EVAL_MODES

    p = _Parser(prog=prog, description=__doc__.split("\n\n")[0], add_help=False, allow_abbrev=False,
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("-h", "--help", action="store_true", help="show this help (with the benchmark's options)")
    p.add_argument("--version", action="store_true", help="print the icl version and exit")
    p.add_argument("--fast", action="store_true", help="the benchmark's smoke run on built-in data (seconds)")
    p.add_argument("--models", help="comma-separated models, each NAME or NAME:key=value,key=value; a value "
                                    "that starts with {, [, \" or ' runs to its matching close, commas "
                                    "included (default: the benchmark's baselines)")
    p.add_argument("--model-arg", action="append", default=[], metavar="[MODEL:]KEY=VALUE",
                   help="a model argument (JSON scalar, string, or a JSON object/list kept as text, e.g. "
                        "call_args={\"a\":1,\"b\":2}); repeatable; without MODEL: every model")
    p.add_argument("--judge", action="append", default=None, metavar="NAME[:key=value,...]",
                   help="judge model for benchmarks scored by one; repeatable (or a comma list) for benchmarks "
                        "that take several judges (each judge scores every answer; the benchmark combines them)")
    p.add_argument("--config", type=Path, help="run.toml with these settings (flags override it)")
    p.add_argument("--data-root", type=Path, help="dataset folder / built-in data cache (default: ICL_DATA_ROOT "
                                                  "or ~/.cache/icl/data)")
    p.add_argument("--name", help="run name (default: BENCHMARK, or BENCHMARK-fast with --fast)")
    p.add_argument("--out", type=Path, help="output folder (default: ./runs/<name>)")
    p.add_argument("--store", type=Path, help="results database (default: <out>/store.sqlite)")
    p.add_argument("--device", help="device models load onto: auto (CUDA when visible, else CPU; default), cpu, "
                                    "cuda, cuda:N")
    p.add_argument("--dtype", choices=PRECISIONS, help="every model's precision (a model's dtype argument wins)")
    p.add_argument("--eval", dest="evaluate", choices=EVAL_MODES,
                   help="where answers are scored: 'device' keeps image answers on --device (batched, overlapped "
                        "with the model), 'host' on the CPU; 'auto' (default) is device on CUDA, else host")
    p.add_argument("--no-overlap", dest="overlap", action="store_false", default=None,
                   help="with device evaluation, score each batch before the model runs the next")
    p.add_argument("--plots", dest="plots", type=_bool_arg("--plots"), default=None, metavar="BOOL",
                   help="draw the plots (true, default) or not (false)")
    p.add_argument("--no-plots", dest="plots", action="store_false", default=None, help="the same as --plots false")
    p.add_argument("--log-samples", dest="log_samples", type=_bool_arg("--log-samples"), default=None,
                   metavar="BOOL", help="write samples.jsonl, one line per item and model (default: true for runs "
                                        "under 100,000 planned items x models, else false)")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None, help="no progress bar")
    p.add_argument("--trace-memory", action="store_true", default=None,
                   help="peak memory per stage with tracemalloc (slower) instead of the process peak RSS")
    p.add_argument("--shard", metavar="I/N", help="run only shard I of N of the plan (counted from 0, as "
                   "$SLURM_ARRAY_TASK_ID with --array=0-(N-1)); each shard needs its own --out; join them with "
                   "python -m icl.run merge OUT SHARD_DIR...")
    p.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="run the models on Ray workers: 'auto' (the default value) joins $RAY_ADDRESS or starts a "
                        "local instance; else a cluster address (ray://host:10001, host:6379). Results are those of "
                        "a run without it (docs/scale.md)")
    p.add_argument("--workers", type=_positive("--workers"), metavar="N",
                   help="Ray workers, each holding one model (default: one per GPU of the cluster, else one)")
    p.add_argument("--judge-workers", type=_positive("--judge-workers"), metavar="N",
                   help="Ray workers of the judge, for benchmarks scored by one (default: the judge runs in this "
                        "process)")
    p.add_argument("--gpus-per-worker", type=_positive("--gpus-per-worker"), metavar="K",
                   help="GPUs each Ray worker holds, for a model spread over them (e.g. device_map=auto; default 1)")
    p.add_argument("--worker-retries", type=_positive("--worker-retries", 0), metavar="N",
                   help="times a batch whose worker died is sent to another worker before its items fail "
                        "(default 2)")
    p.add_argument("--log-level", default="WARNING", help="logging level (DEBUG, INFO, WARNING, ERROR)")
    p.add_argument("--profile", type=Path, metavar="FILE",
                   help="write a cProfile of the whole command to FILE (pstats: python -m pstats FILE); "
                        "also for rescore, export and merge")
    p.add_argument("--reproduce", metavar="TABLE",
                   help="plan a source paper's table: its tasks, datasets, shots and the models of its rows that "
                        "have an official checkpoint (e.g. --reproduce 'Table 18'; with --check: the plan, weights "
                        "and cost; docs/reproducing.md)")
    p.add_argument("--list", action="store_true", help="list the benchmark's tasks, datasets and models, then exit")
    p.add_argument("--check", action="store_true", default=None,
                   help="check the run without running it: plan and resume counts, data, weights, checkpoints "
                        "against their architecture, disk, lock, cost; every problem listed, check.json written, "
                        "exit 0 (runnable) or 2 (no GPU needed; docs/runs.md 'Before a long run')")
    p.add_argument("--calibrate", type=_positive("--calibrate"), metavar="N",
                   help="with --check: run the first N remaining items of each model without stored compute for "
                        "real (a scratch store in a temporary folder, removed after) to estimate its time (an "
                        "HTTP model's calibration sends N requests)")
    p.add_argument("--prefetch", action="store_true",
                   help="download the Hub weights (weights=hf:...) of the models and judges into the Hugging Face "
                        "cache, print their commits and sizes and the offline command line, then exit")
    return p


def add_benchmark_options(p: argparse.ArgumentParser, cls: Any) -> None:
    group = p.add_argument_group(f"{cls.name} options")
    for o in cls.options:
        kwargs: dict[str, Any] = dict(dest=f"opt_{o.name}", default=None, help=o.help)
        if o.parse is not bool:
            kwargs["type"] = _typed(o)
        if o.choices:
            kwargs["choices"] = o.choices
        group.add_argument(f"--{o.name.replace('_', '-')}", **kwargs)


def _bool_arg(name: str) -> Any:
    def parse(text: str) -> bool:
        try:
            return parse_bool(text, name)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "boolean"
    return parse


def _positive(name: str, least: int = 1) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{name}: expected an integer >= {least}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def _typed(o: Any) -> Any:
    def parse(text: str) -> Any:
        try:
            return o.parse(text)
        except (ValueError, TypeError) as exc:
            raise argparse.ArgumentTypeError(f"--{o.name.replace('_', '-')}: {exc}") from None

    parse.__name__ = o.name
    return parse


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {path}: not valid TOML ({exc})") from None


_COMMON_KEYS = ("models", "judge", "data_root", "name", "out", "store", "device", "dtype", "evaluate", "overlap",
                "plots", "progress", "trace_memory", "fast", "shard", "ray", "workers", "judge_workers",
                "gpus_per_worker", "worker_retries", "log_samples", "check", "calibrate")


def _reproduce(bench_name: str, cls: Any, args: argparse.Namespace, options: dict[str, Any],
               models: Optional[list[ModelSpec]]) -> tuple[dict[str, Any], list[ModelSpec]]:
    """``--reproduce TABLE``: the table's grid (the benchmark's published.json says which
    options, shots and rows; :func:`icl.report.reproduction.grid`) on top of the user's
    settings; an option the user set otherwise is a conflict. The user's models run beside the
    table's official ones. Leaves the plan's description in ``args.reproduce_note``."""
    from icl.models import hub
    from icl.report import reproduction

    published = reproduction.load(cls)
    if published is None:
        raise ConfigError(f"--reproduce: benchmark {bench_name!r} ships no published numbers (docs/reproducing.md)")
    official = {family: o.ref for (family, arg), o in hub.OFFICIAL.items() if arg == "weights"}
    try:
        g = reproduction.grid(published, str(args.reproduce), official, options.get("variant"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    options = dict(options)
    for k, v in g.options.items():
        if k in options and options[k] != v:
            raise ConfigError(f"--reproduce {g.table!r} sets {k} to {v!r}; leave --{k.replace('_', '-')} out")
        options[k] = v
    planned = [s for m in g.models for s in parse_models(m)] + list(models or [])
    if not planned:
        raise ConfigError(f"--reproduce {g.table!r}: no row of it has an official checkpoint in icl; give --models "
                          f"NAME:...,published_as=ROW (rows: {', '.join(r for r, _ in g.unplanned)})")
    given = {str(s.args["published_as"]): s.label for s in models or [] if s.args.get("published_as")}
    g.unplanned = [(row, why) for row, why in g.unplanned if row not in given]  # the user's models stand for them
    args.reproduce_note = g.describe(published.short, given)
    return options, planned


def build_config(bench_name: str, args: argparse.Namespace, cls: Any, argv: Sequence[str]) -> RunConfig:
    """Resolve file settings, then flags, into a RunConfig."""
    file: dict[str, Any] = _read_toml(args.config) if args.config else {}
    known_opts = {o.name: o for o in cls.options}
    options = dict(file.pop("options", {}) or {})
    for key in list(file):
        if key in known_opts:
            options[key] = file.pop(key)
    unknown = sorted(set(file) - set(_COMMON_KEYS) - {"model_args"})
    if unknown:
        raise ConfigError(f"--config {args.config}: unknown setting(s) {', '.join(unknown)}"
                          f"{closest(unknown[0], [*_COMMON_KEYS, *known_opts])}")
    for name in options:
        if name not in known_opts:
            raise ConfigError(f"benchmark {bench_name!r} has no option {name!r}{closest(name, list(known_opts))}")
    for o in cls.options:  # tuples for list options read from TOML
        if isinstance(options.get(o.name), list):
            options[o.name] = tuple(options[o.name])
    for o in cls.options:
        value = getattr(args, f"opt_{o.name}", None)
        if value is not None:
            options[o.name] = value
    models: Optional[list[ModelSpec]] = None
    model_text = args.models if args.models is not None else file.get("models")
    if isinstance(model_text, list):
        model_text = ",".join(model_text)
    if model_text is not None:
        models = parse_models(str(model_text))
    pairs = _model_arg_pairs(file.get("model_args", []), args.config) + list(args.model_arg)
    if pairs:
        if models is None:
            models = [s for m in cls.models_by_default(options) for s in parse_models(m)]
        models = apply_model_args(models, pairs)
    if getattr(args, "reproduce", None) is not None:
        options, models = _reproduce(bench_name, cls, args, options, models)
    judges = parse_judges(args.judge if args.judge is not None else file.get("judge"), args.config)

    def pick(name: str, default: Any) -> Any:
        value = getattr(args, name, None)
        return value if value is not None else file.get(name, default)

    def boolean(name: str, default: bool) -> bool:
        flag = getattr(args, name, None)
        if flag is not None and not (name == "fast" and flag is False):  # --fast is store_true
            return bool(flag)
        try:
            return parse_bool(file.get(name, default), f"--config {args.config}: {name}")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def path(name: str) -> Optional[Path]:
        v = pick(name, None)
        return Path(v) if v is not None else None

    log_samples = pick("log_samples", None)
    if log_samples is not None:
        try:
            log_samples = parse_bool(log_samples, f"--config {args.config}: log_samples")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    shard_text = pick("shard", None)
    shard = None if shard_text is None else parse_shard(shard_text, "--shard" if args.shard is not None
                                                         else f"--config {args.config}: shard")
    ray, retries = pick("ray", None), pick("worker_retries", 2)
    workers, judge_workers = pick("workers", None), pick("judge_workers", None)
    per_worker = pick("gpus_per_worker", None)
    for name, value, least in (("workers", workers, 1), ("judge_workers", judge_workers, 1),
                               ("gpus_per_worker", per_worker, 1), ("worker_retries", retries, 0)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise ConfigError(f"{name}: expected an integer >= {least}, got {value!r}")
        if name != "worker_retries" and value is not None and not ray:
            raise ConfigError(f"--{name.replace('_', '-')} needs --ray (the models run in this process without it)")
    check = boolean("check", False)
    calibrate = pick("calibrate", None)
    where = "--calibrate" if args.calibrate is not None else f"--config {args.config}: calibrate"
    if calibrate is not None:
        if not isinstance(calibrate, int) or isinstance(calibrate, bool) or calibrate < 1:
            raise ConfigError(f"{where}: expected a positive integer (items per model), got {calibrate!r}")
        if not check:
            raise ConfigError(f"{where} needs --check (it estimates a run's time before the run; a run measures "
                              f"its own)")
    from icl.run.execution.device import EVAL_MODES

    evaluate = pick("evaluate", "auto")
    if evaluate not in EVAL_MODES:
        raise ConfigError(f"evaluate must be one of {', '.join(EVAL_MODES)}, got {evaluate!r}")
    return RunConfig(benchmark=bench_name, options=options, models=models, judges=judges,
                     fast=boolean("fast", False), data_root=path("data_root"),
                     name=pick("name", None), out=path("out"), store=path("store"),
                     device=str(pick("device", "auto")), dtype=pick("dtype", None), evaluate=evaluate,
                     overlap=boolean("overlap", True), plots=boolean("plots", True), progress=boolean("progress", True),
                     trace_memory=boolean("trace_memory", False), shard=shard, ray=None if ray is None else str(ray),
                     workers=workers, judge_workers=judge_workers, gpus_per_worker=per_worker or 1,
                     worker_retries=retries, log_samples=log_samples, check=check,
                     calibrate=calibrate, command=list(argv))


def parse_judges(value: Any, where: Any = None) -> list[ModelSpec]:
    """The judges of ``--judge`` (repeated) or ``judge`` in run.toml (a string or a list of
    strings): each text a model list (:func:`parse_models`); None: none given."""
    if value is None:
        return []
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ConfigError(f"--config {where}: judge must be a model spec or a list of them, got {value!r}")
    return [s for t in texts for s in parse_models(t)]


def _model_arg_pairs(value: Any, where: Any) -> list[str]:
    """``model_args`` of run.toml as ``[MODEL:]key=value`` strings: a list of such strings, or a
    table (``[model_args]``) of scalars (every model) and of per-model tables
    (``[model_args.painter]`` / ``painter = {weights = "..."}``)."""
    import json

    def text(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v)

    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"--config {where}: model_args as a list must hold 'MODEL:key=value' strings")
        return list(value)
    if not isinstance(value, dict):
        raise ConfigError(f"--config {where}: model_args must be a table ([model_args]) or a list of strings, "
                          f"got {type(value).__name__}")
    out = []
    for key, v in value.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(v2, (dict, list)):
                    raise ConfigError(f"--config {where}: model_args.{key}.{k2} must be a number, string or boolean")
                out.append(f"{key}:{k2}={text(v2)}")
        elif isinstance(v, list):
            raise ConfigError(f"--config {where}: model_args.{key} must be a number, string, boolean or a table")
        else:
            out.append(f"{key}={text(v)}")
    return out


def _list(bench: Any) -> int:
    from icl.benchmarks.registry import list_benchmarks
    from icl.models import list_models

    try:
        described = bench.describe()
    except (ValueError, LookupError, OSError) as exc:
        raise ConfigError(f"{bench.name} --list: {exc}") from None
    for key, values in described.items():
        print(f"{key + ':':<10} " + ", ".join(map(str, values)))
    print(f"{'models:':<10} " + ", ".join(list_models()))
    print(f"{'benchmarks:':<10} " + ", ".join(list_benchmarks()))
    return 0


def _usage() -> str:
    from icl.benchmarks.registry import list_benchmarks

    return (f"usage: python -m icl.run BENCHMARK [options] | --fast [BENCHMARK] | rescore RUN_DIR | "
            f"export RUN_DIR | merge OUT SHARD_DIR... | view [DIR ...]\n"
            f"benchmarks: {', '.join(list_benchmarks())}\n"
            f"python -m icl.run BENCHMARK --help lists its options; python -m icl.run --fast runs every benchmark "
            f"on built-in synthetic data")


def _split(argv: list[str]) -> tuple[Optional[str], list[str]]:
    """The benchmark name (first argument, or right after a leading --fast) and the rest."""
    from icl.benchmarks.registry import list_benchmarks

    if argv and not argv[0].startswith("-"):
        return argv[0], argv[1:]
    if len(argv) > 1 and argv[0] == "--fast" and not argv[1].startswith("-") and argv[1] in list_benchmarks():
        return argv[1], ["--fast", *argv[2:]]
    return None, argv


def main(argv: Optional[Sequence[str]] = None, *, free_space: Any = None) -> int:
    """Entry point; returns the exit status. ``free_space``: how ``--check`` reads a folder's free
    bytes (default :func:`icl.run.planning.check.disk_free`; tests give a small disk). ``--profile FILE`` (anywhere, taken out before the
    command is read, so not recorded in results.json) runs the command under :mod:`cProfile` and
    writes its pstats to FILE: ``python -m cProfile -m icl.run`` writes nothing, as the process
    ends with ``os._exit`` (:func:`leave`). The models' batches run in worker threads
    (:mod:`icl.run.execution.guard`), each profiled on its own and added to the main thread's stats: the
    main thread's wait for a batch (``_thread.lock.acquire`` under ``guard._wait``) and the
    batch itself (``guarded`` in ``guard.py``) are then both counted."""
    argv, profile = take_profile(list(sys.argv[1:] if argv is None else argv))
    if profile is None:
        return _checked_main(argv, free_space)
    import cProfile
    import pstats

    from icl.run.execution.guard import profile_workers

    prof = cProfile.Profile()
    with profile_workers() as workers:
        prof.enable()
        try:
            return _checked_main(argv, free_space)
        finally:
            prof.disable()
            stats = pstats.Stats(prof)
            for worker in workers:  # the models' batches run in the guards' worker threads
                if worker.getstats():
                    stats.add(worker)
            stats.dump_stats(str(profile))
            print(f"icl.run: profile written to {profile} (python -m pstats {profile}; the model worker "
                  f"threads' calls included, {len(workers)} thread(s))", file=sys.stderr)


def take_profile(argv: list[str]) -> tuple[list[str], Optional[Path]]:
    """``argv`` less ``--profile FILE`` / ``--profile=FILE``, and FILE (None without; the last one
    wins)."""
    rest: list[str] = []
    profile: Optional[Path] = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--profile" and i + 1 < len(argv):
            profile, i = Path(argv[i + 1]), i + 2
            continue
        if arg.startswith("--profile="):
            profile = Path(arg.split("=", 1)[1])
        else:
            rest.append(arg)
        i += 1
    return rest, profile


def _checked_main(argv: list[str], free_space: Any = None) -> int:
    if not argv:  # a bare command asks what it can do
        print(_usage(), file=sys.stderr)
        return 2
    bad = non_utf8_argument(argv)
    if bad:  # before anything starts: such text cannot enter results.json, the store or a report
        print(f"icl.run: {bad}", file=sys.stderr)
        return 2
    if argv[0] == "view":  # the run browser reads run folders only: none of a run's machinery
        from icl.view.cli import main as view

        return view(argv[1:])
    from icl.store.atomic import OutputWriteError  # light: the helpers still start before anything heavy
    from icl._signals import sigterm_as_interrupt
    from icl.run.outputs.lock import LockError

    try:
        check_environment()  # a bad ICL_* value is one line now, not a failure of every item later
        _start_declared_helpers(argv)  # first: before the imports of the run
        with sigterm_as_interrupt():  # SIGTERM stops like Ctrl-C: finished batches are kept
            return _main(argv, free_space)
    except (ConfigError, EnvError, LockError, OutputWriteError) as exc:
        print(f"icl.run: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a reader that stopped (| head): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        if "--prefetch" in argv:  # stopped during a download (icl.models.hub honours the stop flag)
            print("icl.run: --prefetch interrupted; the files downloaded so far are kept in the Hugging Face cache, "
                  "rerun the same command to resume", file=sys.stderr)
            return 130
        print("icl.run: interrupted; finished batches are kept in the store, rerun the same command to resume",
              file=sys.stderr)
        return 130
    except Exception as exc:
        if type(exc).__name__ == "RayLost" and type(exc).__module__ == "icl.run.execution.pool":  # without importing Ray
            print(f"icl.run: --ray: {exc}", file=sys.stderr)
            return 1
        raise


def non_utf8_argument(argv: Sequence[str]) -> str:
    """Why an argument of ``argv`` is refused (one line naming it), or "" when every one is text.
    Bytes that are not UTF-8 (in ``--out``, a model argument, a dataset name, ...) reach Python as
    lone surrogates (``surrogateescape``), which no file icl writes can hold."""
    from icl._text import unicode_problem

    for i, arg in enumerate(argv):
        if not unicode_problem(arg):
            continue
        name, value = f"argument {i + 1}", arg
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
        elif i > 0 and argv[i - 1].startswith("-") and not arg.startswith("-"):
            name = argv[i - 1]
        raw = os.fsencode(value)
        try:
            raw.decode("utf-8")
            why = unicode_problem(value)  # a surrogate passed as such (from Python), not as bytes
        except UnicodeDecodeError as exc:
            why = f"not UTF-8 (byte 0x{raw[exc.start]:02x} at position {exc.start})"
        shown = raw.decode("utf-8", "backslashreplace")  # undecodable bytes as \xNN
        return f"{name} '{shown}': {why}; give paths, models and names as UTF-8 text"
    return ""


#: arguments with which a command runs no benchmark (help, version, listing)
_NO_RUN = frozenset({"-h", "--help", "--version", "--list"})


def _start_declared_helpers(argv: list[str]) -> None:
    """Start the helper pools the benchmark(s) of this command declare
    (:func:`icl.benchmarks.registry.declared_helpers`) before anything heavy is imported, so that
    their imports (torch, for the LPIPS helper) overlap the run's. A guess from the arguments
    alone: the run itself decides when it begins and stops the pools it does not use
    (``--device`` naming an accelerator, a task set without LPIPS, no weights)."""
    from icl import helpers
    from icl.benchmarks.registry import DEFAULT_BENCHMARK, declared_helpers, list_benchmarks

    name, rest = _split(argv)
    if name in ("rescore", "export", "merge") or any(a.split("=", 1)[0] in _NO_RUN for a in rest):
        return
    device = next((rest[i + 1] for i, a in enumerate(rest[:-1]) if a == "--device"),
                  next((a.split("=", 1)[1] for a in rest if a.startswith("--device=")), "cpu"))
    if device.split(":")[0] not in ("cpu", "auto"):
        return
    names = list_benchmarks() if name is None and "--fast" in rest else [name or DEFAULT_BENCHMARK]
    for pool in dict.fromkeys(p for n in names for p in declared_helpers(n)):
        helpers.warm(pool, guess=True)


def _main(argv: list[str], free_space: Any = None) -> int:
    from icl.benchmarks.registry import DEFAULT_BENCHMARK, UnknownBenchmarkError, get_benchmark, list_benchmarks

    typed = ["python", "-m", "icl.run", *argv]  # recorded in results.json as the user typed it
    name, rest = _split(argv)
    if name == "rescore":
        return _rescore(rest, typed)
    if name == "export":
        return _export(rest, typed)
    if name == "merge":
        return _merge(rest, typed)
    pre = common_parser("python -m icl.run")
    known, _ = pre.parse_known_args(rest)
    logging.basicConfig(level=getattr(logging, str(known.log_level).upper(), logging.WARNING),
                        format="%(levelname)s %(name)s: %(message)s")
    if known.version:
        import icl

        print(f"icl {icl.__version__}")
        return 0
    if name is None and known.fast and not known.help and not known.list:
        return _fast_all(rest, list_benchmarks(), typed, free_space)
    name = name or DEFAULT_BENCHMARK
    try:
        cls = get_benchmark(name)
    except UnknownBenchmarkError:
        commands = [*list_benchmarks(), "rescore", "export", "merge"]
        raise ConfigError(f"unknown benchmark {name!r}{closest(name, commands)}") from None
    except (ImportError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    parser = common_parser(f"python -m icl.run {name}")
    add_benchmark_options(parser, cls)
    if known.help:
        parser.print_help()
        print(f"\nbenchmarks: {', '.join(list_benchmarks())} (python -m icl.run BENCHMARK --help)")
        return 0
    args = parser.parse_args(rest)
    config = build_config(name, args, cls, typed)
    if getattr(args, "reproduce_note", None):
        print(args.reproduce_note)
    if args.list:
        from icl.run.planning.setup import open_benchmark

        return _list(open_benchmark(config))
    if args.prefetch:
        from icl.run.planning.prefetch import prefetch

        return prefetch(config, typed, sys.stdout)
    if config.check:
        from icl.run.planning.check import check

        if config.calibrate:  # the calibration runs models as the run does (see below)
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        return check(config, sys.stdout, free_space)
    # Device evaluation runs OpenMP regions from two threads at once (torch's runtime and
    # icl._C's); idle teams spinning by default steal the cores the other needs.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from icl.run.runner import run

    config.whole_process = True
    return run(config).exit_code


def _fast_all(rest: list[str], names: list[str], typed: list[str], free_space: Any = None) -> int:
    """``--fast`` without a benchmark: every registered benchmark's smoke run, one summary. A
    plugin benchmark that cannot be imported is skipped with one line (the others run)."""
    from icl.benchmarks.registry import get_benchmark
    from icl.report.html import write_index
    from icl.run.runner import process_age, run

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    configs, broken = [], []
    for name in list(names):  # every setting checked before anything runs
        try:
            cls = get_benchmark(name)
        except (ImportError, TypeError) as exc:
            print(f"icl.run: --fast skips benchmark {name!r}: {exc}", file=sys.stderr)
            broken.append(name)
            continue
        parser = common_parser("python -m icl.run --fast")
        args, unknown = parser.parse_known_args(rest)
        if unknown:
            raise ConfigError(f"--fast without a benchmark takes only the common options; {unknown[0]!r} is not one "
                              f"(give the benchmark: python -m icl.run --fast BENCHMARK {' '.join(unknown)})")
        config = build_config(name, args, cls, typed)
        if args.out is not None:
            config.out = args.out / config.run_name
        configs.append(config)
    names = [n for n in names if n not in broken]
    if configs and configs[0].check:  # --check of every benchmark's smoke run
        from icl.run.planning.check import check

        worst = 0
        for name, config in zip(names, configs):
            print(f"== {name} ==")
            worst = max(worst, check(config, sys.stdout, free_space))
        return max(worst, 2 if broken else 0)
    lines, worst, ran = [], 0, []
    for name, config in zip(names, configs):
        print(f"== {name} ==")
        outcome = run(config)
        worst = max(worst, outcome.exit_code)
        ran.append((name, outcome.out_dir, outcome.exit_code))
        lines.append(f"  {name:<10} {'ok' if outcome.exit_code == 0 else 'FAILED':<7} {outcome.stats.computed} "
                     f"computed, {outcome.stats.skipped} reused, {outcome.failed_items} failed -> {outcome.out_dir}")
    whole = process_age()
    print("icl.run --fast summary" + (f" ({whole:.1f} s in all, start-up included):" if whole else ":"))
    print("\n".join(lines + [f"  {n:<10} SKIPPED (the plugin cannot be imported)" for n in broken]))
    index = write_index(ran)
    print(f"  report: {index}" if index else "  no index report.html (the runs' folders differ, or a file of yours "
                                             "holds the name)")
    return max(worst, 1 if broken else 0)


def _run_dir(verb: str, description: str, rest: list[str]) -> Path:
    """The RUN_DIR argument of a subcommand working on a finished run."""
    p = _Parser(prog=f"python -m icl.run {verb}", description=description)
    p.add_argument("run_dir", type=Path, help="a run's output folder (holding results.json and its store)")
    return p.parse_args(rest).run_dir


def _rescore(rest: list[str], typed: list[str]) -> int:
    from icl.run.runner import rescore

    run_dir = _run_dir("rescore", "Recompute every score, table, plot and report of a run from its stored "
                                  "responses (no model is loaded).", rest)
    return rescore(run_dir, command=typed).exit_code


def _export(rest: list[str], typed: list[str]) -> int:
    from icl.run.runner import export

    run_dir = _run_dir("export", "Write a finished run's samples.jsonl, requests.jsonl and image answers "
                                 "(samples/*.png) from its store (no model is loaded).", rest)
    print(f"icl.run export: wrote {export(run_dir, command=typed)}")
    return 0


def _merge(rest: list[str], typed: list[str]) -> int:
    p = _Parser(prog="python -m icl.run merge",
                description="Merge the stores of the shards of one run (--shard I/N, each in its own folder) into "
                            "OUT and write the files the unsharded run would. The shard folders are only read.")
    p.add_argument("out", type=Path, help="the merged run's folder (new, or an earlier merge of the same run)")
    p.add_argument("shards", type=Path, nargs="+", metavar="SHARD_DIR", help="every shard's output folder")
    p.add_argument("--no-plots", dest="plots", action="store_false", default=None, help="draw no plots")
    p.add_argument("--data-root", type=Path, help="the data as seen from this machine (default: the shards' own)")
    args = p.parse_args(rest)
    from icl.run.scaleout.merge import merge

    return merge(args.out, args.shards, command=typed, plots=args.plots, data_root=args.data_root).exit_code


#: seconds an interrupted run's teardown may take (``atexit`` handlers: Ray's shutdown waits
#: for a raylet that SLURM's SIGTERM to the whole job step has already ended)
STOP_TEARDOWN_S = 3.0


def _end_now(status: int) -> None:
    pool = sys.modules.get("icl.run.execution.pool")  # imported only for --ray
    if pool is not None:
        pool.tell_watcher()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def leave(status: int) -> None:
    """End the process with ``status`` as the interpreter would, less its teardown: thread pools
    shut down and other threads joined, every ``atexit`` handler run (logging's flush, weakref
    finalizers, temporary folders), the standard streams flushed; then exit without freeing the
    ~1,400 modules one by one (torch, matplotlib: 0.5-2.5 s of a ``vibe --fast`` process, all
    after the results were written). Without the interpreter's thread shutdown hook, a plain exit."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:
        sys.exit(status)
    if status == 130:  # interrupted (SIGTERM, Ctrl-C): what finished is stored; the teardown gets 3 s
        watchdog = threading.Timer(STOP_TEARDOWN_S, _end_now, (status,))
        watchdog.daemon = True  # not joined by the shutdown below
        watchdog.start()
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (| head): nothing left to tell
            pass
    os._exit(status)


if __name__ == "__main__":
    leave(main())
