"""Splits and context selection (PROTOCOL §1.1), recorded as a byte-reproducible CSV.

- ``split_ids``: sort the ids, permute them with ``derive_seed(global_seed, dataset, "*", "*",
  "split")``, then 25% train / 25% val / 50% test (floors for train and val, the rest test).
- ``select_contexts``: for each query, the train ids other than the query are permuted with
  ``derive_seed(global_seed, dataset, "*", query_id, "context")``. Semantic tasks
  (segmentation; detection when the dataset has several classes) take, K times, the candidate
  covering the most not-yet-covered query classes, ties to the earlier one in that
  permutation; every other task takes the first K of the permutation. So K-shot contexts
  extend the (K-1)-shot ones, and a query is never its own context.
"""

from __future__ import annotations

import csv
import hashlib
import os
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Sequence

from icl.data.dataset import Dataset
from icl.data.seeds import ANY, rng

PROTOCOL = "vibe-1"
# task -> annotation part whose classes drive class-aware selection
SEMANTIC_PARTS = {"segmentation": "segmentation", "detection": "boxes"}
SELECTOR_GREEDY = "class-greedy"
SELECTOR_RANDOM = "random"


@dataclass(frozen=True)
class ContextRow:
    """One context of one query: ``rank`` 0 is the first context shown."""

    dataset: str
    task: str
    query_id: str
    rank: int
    context_id: str
    selector: str
    seed: int
    protocol: str


def _dataset_name(dataset: Any) -> str:
    return dataset if isinstance(dataset, str) else dataset.meta.name


def split_ids(ids: Iterable[str], global_seed: int, dataset: str | Dataset) -> dict[str, list[str]]:
    """``{"train", "val", "test"}`` -> sorted ids (see module docstring)."""
    ordered = sorted(set(ids))
    perm = rng(global_seed, _dataset_name(dataset), ANY, ANY, "split").permutation(len(ordered))
    shuffled = [ordered[i] for i in perm]
    n_train = n_val = len(ordered) // 4
    return {
        "train": sorted(shuffled[:n_train]),
        "val": sorted(shuffled[n_train : n_train + n_val]),
        "test": sorted(shuffled[n_train + n_val :]),
    }


def uses_class_greedy(task: str, dataset: Dataset) -> bool:
    """Whether ``task`` on ``dataset`` selects contexts class-aware (PROTOCOL §1.1)."""
    if task not in SEMANTIC_PARTS:
        return False
    return task != "detection" or len(dataset.meta.classes) > 1


def _greedy(order: Sequence[str], wanted: frozenset[int], classes: dict[str, frozenset[int]], k: int) -> list[str]:
    remaining = list(order)
    uncovered = set(wanted)
    chosen: list[str] = []
    for _ in range(k):
        best = max(range(len(remaining)), key=lambda i: (len(classes[remaining[i]] & uncovered), -i))
        pick = remaining.pop(best)
        uncovered -= classes[pick]
        chosen.append(pick)
    return chosen


def select_contexts(
    dataset: Dataset, task: Any, query_ids: Iterable[str], train_ids: Iterable[str], k: int, global_seed: int
) -> list[ContextRow]:
    """K contexts per query, in query order then rank. ``task`` is a task name or an object with
    ``.name``. Raises ValueError when fewer than K candidates remain for a query."""
    name = task if isinstance(task, str) else task.name
    if k < 1:
        raise ValueError(f"k: expected >= 1, got {k}")
    train = sorted(set(train_ids))
    greedy = uses_class_greedy(name, dataset)
    part = SEMANTIC_PARTS.get(name, "")
    classes = {t: dataset.classes_present(t, part) for t in train} if greedy else {}
    ds = dataset.meta.name
    rows: list[ContextRow] = []
    for query in query_ids:
        pool = [t for t in train if t != query]
        if len(pool) < k:
            raise ValueError(f"{ds}/{name}: query {query!r} needs {k} contexts, only {len(pool)} train samples available")
        order = [pool[i] for i in rng(global_seed, ds, ANY, query, "context").permutation(len(pool))]
        if greedy:
            chosen = _greedy(order, dataset.classes_present(query, part), classes, k)
        else:
            chosen = order[:k]
        selector = SELECTOR_GREEDY if greedy else SELECTOR_RANDOM
        rows.extend(ContextRow(ds, name, query, r, c, selector, int(global_seed), PROTOCOL) for r, c in enumerate(chosen))
    return rows


_HEADER = [f.name for f in fields(ContextRow)]


def context_csv_bytes(rows: Iterable[ContextRow]) -> bytes:
    """The CSV text (header + rows in the given order, ``\\n`` line ends) as UTF-8 bytes, by the
    one table writer (:func:`icl._csv.csv_text`: a cell a spreadsheet would run as a
    formula gets a leading ``'``)."""
    from icl._csv import csv_text

    return csv_text([astuple(row) for row in rows], _HEADER).encode("utf-8")


def write_context_csv(rows: Iterable[ContextRow], path: str | Path) -> str:
    """Write the context CSV (atomically) and return its SHA-256 hex digest."""
    data = context_csv_bytes(rows)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def read_context_csv(path: str | Path) -> list[ContextRow]:
    """Rows of a context CSV written by :func:`write_context_csv`."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != _HEADER:
            raise ValueError(f"{path}: expected header {_HEADER}, got {reader.fieldnames}")
        return [
            ContextRow(r["dataset"], r["task"], r["query_id"], int(r["rank"]), r["context_id"], r["selector"],
                       int(r["seed"]), r["protocol"])
            for r in reader
        ]
