"""Plan a run: which (dataset, task) groups, queries, contexts and models.

Queries are the test split (``icl.data.contexts.split_ids``), in sorted id order, after
screening (``icl.benchmarks.vibe.screen``: samples a task rejects or that cannot be loaded are left out;
the latter are recorded as failures), the first ``limit`` of them when a limit is set; context
candidates are the screened train split. Contexts are selected once per (dataset, task) for the
largest shot count (``icl.data.contexts.select_contexts``); a K-shot sample uses the first K
contexts of that list. Every context list goes into one CSV (``contexts.csv``) whose SHA-256
is recorded with the results.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from icl.benchmarks.vibe.screen import DataIssue, screen

PROTOCOL = "vibe-1"
DEFAULT_MODELS = ("oracle", "copy-target", "identity")


class PlanError(ValueError):
    """Bad benchmark settings (unknown task or dataset names; impossible options)."""


@dataclass
class Group:
    """One (dataset, task): its queries and, per query, the ordered context ids (max shots)."""

    dataset: str
    task: str
    queries: list[str]
    contexts: dict[str, list[str]]


@dataclass
class Plan:
    """Datasets, tasks, (dataset, task) groups and their context lists; ``shots`` sorted."""

    datasets: dict[str, Any]
    tasks: dict[str, Any]
    groups: list[Group]
    shots: list[int]
    seed: int
    context_rows: list[Any]
    issues: list[DataIssue] = field(default_factory=list)
    filtered: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)


def context_hash(context_ids: list[str]) -> str:
    """Short SHA-256 of an ordered context list (part of every stored sample's key)."""
    return hashlib.sha256("\n".join(context_ids).encode("utf-8")).hexdigest()[:16]


def _pick(kind: str, wanted: Optional[Sequence[str]], known: list[str]) -> list[str]:
    if not wanted:
        return known
    unknown = [w for w in wanted if w not in known]
    if unknown:
        near = {w: difflib.get_close_matches(w, known, n=2, cutoff=0.5) for w in unknown}
        hints = "; ".join(f"{w!r}: did you mean {' or '.join(map(repr, n))}?" for w, n in near.items() if n)
        raise PlanError(f"unknown {kind} {', '.join(map(repr, unknown))}" + (f" ({hints})" if hints else "")
                        + f"; known {kind}: {', '.join(known)}")
    return list(dict.fromkeys(wanted))


def make_plan(tasks: Optional[Sequence[str]], datasets: Optional[Sequence[str]], shots: Sequence[int],
              limit: Optional[int], seed: int, data_root: Optional[Path], fast: bool) -> Plan:
    """Resolve names, open datasets, split, screen samples, select contexts (for the largest
    shot count; a K-shot sample uses the first K)."""
    from icl.data import DataError
    from icl.data.images import display_path
    from icl.data.contexts import select_contexts, split_ids
    from icl.data.registry import builtin_datasets, data_root as resolve_root, get_dataset, list_datasets
    from icl.benchmarks.vibe.tasks.registry import get_task, list_tasks

    if limit is not None and limit < 1:
        raise PlanError(f"--limit must be >= 1, got {limit}")
    if not shots or min(shots) < 1:
        raise PlanError(f"--shots must be positive integers, got {list(shots)}")
    shots = sorted(set(int(s) for s in shots))
    task_names = _pick("tasks", tasks, list(list_tasks()))
    dataset_names = _pick("datasets", datasets, sorted(list_datasets(data_root)))
    # Synthetic built-ins serve --fast or an explicit --datasets; they never join real data
    builtin = set(builtin_datasets())
    if not datasets:
        dataset_names = [d for d in dataset_names if (d in builtin) == fast]
        if not dataset_names:
            raise PlanError(f"no converted vibe dataset under {resolve_root(data_root)}: convert a release with "
                            "`python -m icl.data convert NAME RAW_DIR DATA_ROOT` (docs/datasets.md), or run --fast "
                            "for the built-in synthetic data")
    elif {d for d in dataset_names if d in builtin} and {d for d in dataset_names if d not in builtin}:
        raise PlanError(f"--datasets mixes built-in synthetic data ({', '.join(sorted(builtin & set(dataset_names)))}) "
                        f"with real datasets ({', '.join(sorted(set(dataset_names) - builtin))}); run them separately")
    task_objs = {name: get_task(name) for name in task_names}
    opened, issues = {}, []
    for name in dataset_names:
        try:
            opened[name] = get_dataset(name, root=data_root, fast=fast)
        except DataError as exc:  # a dataset that fails validation is recorded and skipped
            issues.append(DataIssue(display_path(name), exc.sample_id or "*", ("*",), exc.path, str(exc)))
    k = max(shots)
    groups, rows = [], []
    filtered: dict[str, dict[str, dict[str, str]]] = {}
    for dname in opened:
        ds = opened[dname]
        mine = [task_objs[t] for t in task_names if task_objs[t].applies_to(ds.meta)]
        if not mine:
            continue
        # a damaged sample leaves the dataset before the split: the rest runs as without it
        intact = []
        for sid in ds.ids():
            err = ds.precheck(sid)
            if err is None:
                intact.append(sid)
            else:
                issues.append(DataIssue(dname, sid, tuple(t.name for t in mine), err.path, str(err)))
        # a file that names no sample (an invalid id) is a data failure too, never a silent drop
        issues += [DataIssue(dname, "*", tuple(t.name for t in mine), e.path, str(e))
                   for e in ds.problems if e.sample_id is None]
        splits = split_ids(intact, seed, dname)
        test = screen(ds, mine, splits["test"], limit)
        train = screen(ds, mine, splits["train"])
        issues += test.issues + train.issues
        for task in mine:
            queries = test.usable[task.name][:limit]
            dropped = {**test.filtered[task.name], **train.filtered[task.name]}
            if dropped:
                filtered.setdefault(dname, {})[task.name] = dict(sorted(dropped.items()))
            if not queries:
                continue
            try:
                selected = select_contexts(ds, task, queries, train.usable[task.name], k, seed)
            except ValueError as exc:  # fewer usable train samples than shots
                raise PlanError(f"dataset {dname!r}, task {task.name!r}: {exc}") from exc
            contexts: dict[str, list[str]] = {q: [] for q in queries}
            for row in sorted(selected, key=lambda r: (r.query_id, r.rank)):
                contexts[row.query_id].append(row.context_id)
            groups.append(Group(dname, task.name, queries, contexts))
            rows.extend(selected)
    if not groups:
        if issues:  # the data failures left nothing to run: they are the reason, not the tasks
            raise PlanError(_nothing_usable(issues))
        raise PlanError(f"no (dataset, task) pair to run: tasks {task_names} apply to none of {dataset_names}")
    return Plan(opened, task_objs, groups, shots, seed, rows, issues, filtered)


def _nothing_usable(issues: Sequence[DataIssue], shown: int = 3) -> str:
    """One line for a plan that data failures left empty: the failures themselves (each names
    its file and what is wrong), datasets refused whole first, then a count of the rest."""
    ordered = sorted(issues, key=lambda i: i.tasks != ("*",))  # stable: a refused dataset's tasks are ("*",)
    text = "; ".join(f"dataset {i.dataset!r}: {i.message}" for i in ordered[:shown])
    if len(ordered) > shown:
        text += f"; and {len(ordered) - shown} more data failure(s) of the same datasets"
    return f"nothing to run: {text}"


def qualitative(groups: list[Group], per_task: int) -> set[tuple[str, str, str]]:
    """(dataset, task, query) triples shown in the grids: per task, round robin over datasets."""
    picked: set[tuple[str, str, str]] = set()
    for task in sorted({g.task for g in groups}):
        mine = [g for g in groups if g.task == task]
        depth = max(len(g.queries) for g in mine)
        order = [(g.dataset, task, g.queries[i]) for i in range(depth) for g in mine if i < len(g.queries)]
        picked.update(order[:per_task])
    return picked
