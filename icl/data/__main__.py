"""``python -m icl.data``: list datasets, generate built-ins, validate a dataset directory, convert a
public release (``convert NAME RAW_DIR OUT_DIR``, or every recognised release with ``convert all
RAW_ROOT OUT_DIR``; docs/datasets.md), fetch published data by name (``fetch NAME``)."""

from __future__ import annotations

import argparse
import sys

from icl._parse import EnvError, check_environment
from icl.data.convert import list_converters
from icl.data.dataset import DataError, load_dataset
from icl.data.registry import get_dataset, list_datasets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl.data", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="registered datasets and those found under the data root")
    p_list.add_argument("--root", help="data root (default $ICL_DATA_ROOT or ~/.cache/icl/data)")
    p_get = sub.add_parser("get", help="open a dataset by name (generating a built-in if needed) and validate it")
    p_get.add_argument("name")
    p_get.add_argument("--root")
    p_get.add_argument("--fast", action="store_true", help="the small variant of a built-in")
    p_val = sub.add_parser("validate", help="validate every file of a dataset directory (docs/data-format.md)")
    p_val.add_argument("path")
    p_conv = sub.add_parser("convert", help="convert a public release into canonical datasets (docs/datasets.md)")
    p_conv.add_argument("name", help="release: " + ", ".join(list_converters()) + "; or all (every release "
                        "recognised among RAW_DIR's folders)")
    p_conv.add_argument("raw_dir", help="the release as downloaded and unpacked (for all: the folder holding them)")
    p_conv.add_argument("out_dir", help="where the datasets go (one directory each; usually the data root); "
                        "never the raw folder, inside it or around it")
    p_conv.add_argument("--seed", type=int, default=0, help="global seed of the random choices (default: 0)")
    p_fetch = sub.add_parser("fetch", help="published data by name: a Hub release into the Hugging Face cache, "
                             "unpacked and checked; for a release published elsewhere, where to get it")
    p_fetch.add_argument("name", help="vlicl (VL-ICL, its text variants too), cobsat (CoBSAT's images), or one of "
                         "the visual benchmark's releases (instructions only)")
    p_fetch.add_argument("--out", help="where the unpacked release goes (default <data root>/NAME); pass it as "
                         "--data-root")
    p_fetch.add_argument("--revision", help="a commit (or tag, branch) of the Hub dataset instead of the one icl "
                         "pins or the folder's fetch-manifest.json recorded")
    args = parser.parse_args(argv)
    try:
        check_environment()
        return _command(args)
    except EnvError as exc:  # an ICL_* variable with a bad value (icl._parse): one line, as a bad argument
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace) -> int:
    if args.command == "fetch":
        from icl.run.planning.fetch import FetchError, fetch

        try:
            fetch(args.name, args.out, revision=args.revision)
        except FetchError as exc:
            print(f"fetch: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # SIGTERM / Ctrl-C during the download (icl._signals.stop_on_signals)
            print(f"fetch {args.name}: interrupted; what was downloaded is kept in the Hugging Face cache, run "
                  f"the same command to resume", file=sys.stderr)
            return 130
        return 0
    if args.command == "convert":
        return _convert(args.name, args.raw_dir, args.out_dir, args.seed)

    if args.command == "list":
        for name in list_datasets(args.root):
            print(name)
        return 0
    try:
        ds = get_dataset(args.name, root=args.root, fast=args.fast) if args.command == "get" else load_dataset(args.path)
        n = ds.validate()
    except DataError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    meta = ds.meta
    print(f"{meta.name} {meta.version}: {n} samples, tasks {', '.join(meta.tasks)}, at {ds.root}")
    return 0


def _convert(name: str, raw_dir: str, out_dir: str, seed: int) -> int:
    """Exit 0 when converted, 1 for a release that cannot be converted, 2 for an OUT_DIR that
    overlaps RAW_DIR; each refusal is one line on stderr."""
    from icl.data.convert import ConvertError, UnsafeOutput, convert, convert_all

    try:
        if name == "all":
            outcomes = convert_all(raw_dir, out_dir, global_seed=seed,
                                   on_start=lambda folder, conv: print(f"{folder.name}: converting as {conv}",
                                                                       file=sys.stderr))
        else:
            reports = convert(name, raw_dir, out_dir, global_seed=seed)
    except UnsafeOutput as exc:
        print(f"convert {name}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"convert {name}: interrupted; the datasets being built were discarded, the previous ones kept",
              file=sys.stderr)
        return 130
    except ConvertError as exc:
        print(f"convert {name}: {exc}", file=sys.stderr)
        return 1
    if name != "all":
        _print_reports(reports)
        return 0
    failed = 0
    for outcome in outcomes:
        if outcome.error is not None:
            failed += outcome.name is not None
            print(f"{outcome.folder.name}: {'skipped' if outcome.name is None else 'failed'}: {outcome.error}",
                  file=sys.stderr)
        _print_reports(outcome.reports)
    return 1 if failed else 0


def _print_reports(reports: list) -> None:
    for report in reports:
        print(report.summary())
        for path, why in sorted(report.bad.items()):
            print(f"  bad raw file {path}: {why}", file=sys.stderr)
        warning = report.shortfall()
        if warning:
            print(warning, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
