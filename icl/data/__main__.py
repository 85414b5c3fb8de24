"""``python -m icl.data``: list datasets, generate built-ins, validate a dataset directory."""

from __future__ import annotations

import argparse
import sys

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
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
