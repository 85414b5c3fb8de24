"""Command line: ``python -m icl.run [BENCHMARK] [options]`` (also the ``icl`` script).

BENCHMARK is ``vibe`` (the visual in-context benchmark, default) or ``best50`` (cross-image
in-context detection; its own options follow, see ``icl best50 --help``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from icl.models import PRECISIONS
from icl.run.device import EVAL_MODES
from icl.run.errors import ConfigError
from icl.run.plan import DEFAULT_MODELS, RunConfig

BENCHMARKS = ("vibe", "best50")


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of names")
    return names


def _ints(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return sorted(set(values))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m icl.run",
        description="Run the visual in-context benchmark (vibe): plan datasets x tasks x models x shots, "
                    "compute into a resumable store, write results.csv/json, ranks.csv, report.md and plots. "
                    "'best50' as first argument runs the cross-image detection benchmark instead.",
    )
    p.add_argument("--fast", action="store_true", help="small built-in data (a smoke run; seconds)")
    p.add_argument("--limit", type=_positive, help="at most N test queries per (dataset, task)")
    p.add_argument("--tasks", type=_names, help="comma-separated task names (default: all)")
    p.add_argument("--datasets", type=_names, help="comma-separated dataset names (default: all)")
    p.add_argument("--models", type=_names, default=list(DEFAULT_MODELS),
                   help=f"comma-separated model names (default: {','.join(DEFAULT_MODELS)})")
    p.add_argument("--shots", type=_ints, default=[1], help="comma-separated shot counts K (default: 1)")
    p.add_argument("--data-root", type=Path, help="dataset folder / built-in data cache (default: ICL_DATA_ROOT "
                                                  "or ~/.cache/icl/data)")
    p.add_argument("--name", help="run name (default: vibe, or vibe-fast with --fast)")
    p.add_argument("--out", type=Path, help="output folder (default: ./runs/<name>)")
    p.add_argument("--store", type=Path, help="results database (default: <out>/store.sqlite); share it to resume "
                                              "or merge runs")
    p.add_argument("--device", default="cpu", help="device models load onto: cpu, cuda, cuda:1, ... (default: cpu)")
    p.add_argument("--dtype", choices=PRECISIONS, help="override every model's precision")
    p.add_argument("--eval", dest="evaluate", choices=EVAL_MODES, default="auto",
                   help="where predictions are decoded and scored: 'device' keeps them as tensors on --device "
                        "(batched, overlapped with the model), 'host' copies them to numpy; 'auto' (default) is "
                        "device on CUDA, else host (torch outputs are then scored where they are)")
    p.add_argument("--no-overlap", dest="overlap", action="store_false",
                   help="with device evaluation, score each batch before the model runs the next")
    p.add_argument("--seed", type=int, default=0, help="global seed of splits, contexts and noise (default: 0)")
    p.add_argument("--jobs", type=_positive, default=1, help="threads that load and encode data (default: 1)")
    p.add_argument("--qualitative", type=int, default=3, help="samples per task in the qualitative grids (default: 3)")
    p.add_argument("--no-plots", dest="plots", action="store_false", help="skip the PNG plots")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("--trace-memory", action="store_true",
                   help="peak memory per stage with tracemalloc (slower) instead of the process peak RSS")
    p.add_argument("--list", action="store_true", help="list tasks, datasets and models, then exit")
    return p


def config_from_args(args: argparse.Namespace, benchmark: str = "vibe") -> RunConfig:
    return RunConfig(
        benchmark=benchmark, name=args.name, fast=args.fast, limit=args.limit, tasks=args.tasks,
        datasets=args.datasets, models=args.models, shots=args.shots, data_root=args.data_root, out=args.out,
        store=args.store, device=args.device, dtype=args.dtype, evaluate=args.evaluate, overlap=args.overlap,
        seed=args.seed, jobs=args.jobs,
        qualitative=max(args.qualitative, 0), plots=args.plots, progress=args.progress,
        trace_memory=args.trace_memory,
    )


def _run_best50(rest: list[str]) -> int:
    try:
        cli = importlib.import_module("icl.benchmarks.best50.cli")
    except ModuleNotFoundError as exc:
        if exc.name and "icl.benchmarks.best50.cli".startswith(exc.name):
            print("icl.run: the best50 benchmark is not available in this installation "
                  f"(module {exc.name!r} not found)", file=sys.stderr)
            return 2
        raise
    return int(cli.main(rest, prog="python -m icl.run best50") or 0)


def _list(data_root: Optional[Path]) -> int:
    from icl.data.registry import list_datasets
    from icl.models import list_models
    from icl.benchmarks.vibe.tasks.registry import list_tasks

    print("tasks:    " + ", ".join(list_tasks()))
    print("datasets: " + ", ".join(sorted(list_datasets(data_root))))
    print("models:   " + ", ".join(list_models()))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point; returns the exit code (0 ok, 1 some samples failed, 2 bad usage, 130 interrupted)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    benchmark = "vibe"
    if args_in and not args_in[0].startswith("-"):
        benchmark = args_in.pop(0)
        if benchmark not in BENCHMARKS:
            print(f"icl.run: unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
            return 2
    if benchmark == "best50":
        return _run_best50(args_in)
    parser = build_parser()
    args = parser.parse_args(args_in)
    if args.list:
        return _list(args.data_root)
    from icl.run.runner import run

    # Device evaluation runs OpenMP regions from two threads at once (torch's runtime and
    # icl._C's); idle teams spinning by default steal the cores the other needs (measured 3x
    # slower on 2 cores). The runtime reads this when torch loads, i.e. later; yours wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    config = config_from_args(args, benchmark)
    try:
        outcome = run(config)
    except ConfigError as exc:
        print(f"icl.run: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"icl.run: interrupted; finished batches are kept in {config.store_path}, rerun the same "
              "command to resume", file=sys.stderr)
        return 130
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
