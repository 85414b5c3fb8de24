"""``python -m icl.benchmarks.best50``: score a predictions JSONL, or run a model, over a package.

    python -m icl.benchmarks.best50 --package DIR --predictions FILE.jsonl [--out DIR]
    python -m icl.benchmarks.best50 --package DIR --model NAME [--model-arg key=value ...] [--out DIR]
    python -m icl.benchmarks.best50 --fast [--out DIR]      # synthetic package, oracle baseline

Writes results.csv, results_k{K}.csv, per_sample.csv, results.json, report.md and plot_*.png
into ``--out`` (default ``./runs/best50``, ``./runs/best50-fast`` with ``--fast``), and
predictions.jsonl when a model or baseline runs.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

from icl.benchmarks.best50 import PROTOCOL_VERSION
from icl.benchmarks.best50.package import PackageError, load_package
from icl.benchmarks.best50.predictions import PredictionsError, read_predictions
from icl.benchmarks.best50.report import write_csv, write_report
from icl.benchmarks.best50.run import BASELINES, AdapterError, predict, select_samples
from icl.benchmarks.best50.score import CLEAN_EXCLUDE, COUNTS, METRICS, THRESHOLDS, score_records


def build_parser(prog: str = "python -m icl.benchmarks.best50") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--package", type=Path, help="package directory (inputs/inputs_k{K}.jsonl + images)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--predictions", type=Path, help="JSONL of predictions made elsewhere")
    src.add_argument("--model", help="icl.models adapter name to run over the package")
    src.add_argument("--baseline", choices=sorted(BASELINES), help="built-in baseline to run over the package")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the adapter (Python literal, else a string); repeatable")
    p.add_argument("--device", default="cpu", help="device for the adapter (default cpu)")
    p.add_argument("--out", type=Path,
                   help="output directory (default: ./runs/best50, or ./runs/best50-fast with --fast)")
    p.add_argument("--fast", action="store_true",
                   help="without --package: write a small synthetic package into OUT/package; without a "
                        "source: use the oracle baseline")
    p.add_argument("--ks", type=int, nargs="+", help="only these K (default: every K of the package)")
    p.add_argument("--limit", type=int, help="only the first N samples of each K (model/baseline runs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic package (--fast)")
    p.add_argument("--backend", help="icl.ops backend for matching (default: automatic)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    return p


def _model_kwargs(items: Sequence[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--model-arg {item!r}: expected KEY=VALUE")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(args: argparse.Namespace) -> dict[str, Path]:
    """Execute a parsed command line; return the written files."""
    import icl

    if args.out is None:  # the visual benchmark's default layout, ./runs/<name>
        args.out = Path("runs") / ("best50-fast" if args.fast else "best50")
    out: Path = args.out
    if args.package is None and args.fast:
        from icl.benchmarks.best50.synthetic import write_package

        args.package = write_package(out / "package", n_per_class=2, seed=args.seed)
    if args.predictions is None and args.model is None and args.baseline is None:
        if not args.fast:
            raise ValueError("give one of --predictions, --model or --baseline (or --fast)")
        args.baseline = "oracle"
    if args.package is None and args.predictions is None:
        raise ValueError("--model and --baseline need --package (or --fast)")
    package = load_package(args.package) if args.package is not None else None
    meta: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "icl_version": icl.__version__,
                            "thresholds": list(THRESHOLDS), "clean_exclude": list(CLEAN_EXCLUDE),
                            "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            "package": None if package is None else {"path": str(package.root.resolve()),
                                                                     "sha256": package.sha256}}
    if args.predictions is not None:
        pred_path, meta["source"] = args.predictions, "predictions"
    else:
        samples = select_samples(package, args.ks, args.limit)
        pred_path = predict(samples, out / "predictions.jsonl", model=args.model, baseline=args.baseline,
                            model_kwargs=_model_kwargs(args.model_arg), device=args.device, progress=sys.stderr.isatty())
        meta["source"] = "model" if args.model else "baseline"
        meta["model"] = args.model or f"baseline:{args.baseline}"
    start = time.perf_counter()
    records = read_predictions(pred_path, package)
    if args.ks:
        records = [r for r in records if r.k in set(args.ks)]
        if not records:
            raise ValueError(f"no predictions at K = {args.ks}")
    scores = score_records(records, THRESHOLDS, CLEAN_EXCLUDE, backend=args.backend)
    meta["predictions"] = {"path": str(Path(pred_path).resolve()), "sha256": _sha256(Path(pred_path)),
                           "records": len(records)}
    if package is not None:
        scored = {(r.k, r.sample_id) for r in records}
        meta["coverage"] = {str(k): {"package": len(ss), "scored": sum((k, s.sample_id) in scored for s in ss)}
                            for k, ss in sorted(package.samples.items()) if not args.ks or k in args.ks}
    meta["scoring_seconds"] = round(time.perf_counter() - start, 4)
    files = write_report(out, scores, meta, plots=not args.no_plots)
    for k in scores.ks:
        path = out / f"results_k{k}.csv"
        write_csv(path, scores.table(k), ("kind", "group", *COUNTS, *METRICS))
        files[path.name] = path
    if args.predictions is None:
        files["predictions.jsonl"] = Path(pred_path)
    _print_summary(scores, out)
    return files


def _print_summary(scores: Any, out: Path) -> None:
    print(f"best50 ({PROTOCOL_VERSION}): {len(scores.records)} samples scored; results in {out}")
    print(f"{'K':>3}  {'group':<16}" + "".join(f"{m:>12}" for m in METRICS))
    for r in scores.rows:
        if r["kind"] == "pooled":
            print(f"{r['k']:>3}  {'pooled ' + r['group']:<16}" + "".join(f"{r[m]:>12.4f}" for m in METRICS))


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
    """Command-line entry; returns the exit status (2 for invalid input, with the reason on stderr).

    ``prog`` names the command in usage messages (e.g. ``"python -m icl.run best50"``)."""
    args = (build_parser(prog) if prog else build_parser()).parse_args(argv)
    try:
        run(args)
    except (PackageError, PredictionsError, FileNotFoundError, ValueError, AdapterError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
