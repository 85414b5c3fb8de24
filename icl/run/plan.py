"""Plan a run: which (dataset, task) groups, queries, contexts and models.

Queries are the test split (``icl.data.contexts.split_ids``), in sorted id order, after
screening (``icl.run.screen``: samples a task rejects or that cannot be loaded are left out;
the latter are recorded as failures), the first ``limit`` of them when a limit is set; context
candidates are the screened train split. Contexts are selected once per (dataset, task) for the
largest shot count (``icl.data.contexts.select_contexts``); a K-shot sample uses the first K
contexts of that list. Every context list goes into one CSV (``contexts.csv``) whose SHA-256
is recorded with the results.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from icl.models import Adapter, get_model, list_models
from icl.run.errors import ConfigError
from icl.run.screen import DataIssue, screen

PROTOCOL = "vibe-1"
DEFAULT_MODELS = ("oracle", "copy-target", "identity")


@dataclass
class RunConfig:
    """Settings of one ``python -m icl.run`` invocation (see ``--help``)."""

    benchmark: str = "vibe"
    name: Optional[str] = None
    fast: bool = False
    limit: Optional[int] = None
    tasks: Optional[list[str]] = None
    datasets: Optional[list[str]] = None
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    shots: list[int] = field(default_factory=lambda: [1])
    data_root: Optional[Path] = None
    out: Optional[Path] = None
    store: Optional[Path] = None
    device: str = "cpu"
    dtype: Optional[str] = None
    evaluate: str = "auto"  # where predictions are decoded and scored: auto (device on CUDA), host, device
    overlap: bool = True  # device evaluation: score batch i while the model runs batch i + 1
    seed: int = 0
    jobs: int = 1
    qualitative: int = 3
    plots: bool = True
    progress: bool = True
    trace_memory: bool = False

    @property
    def run_name(self) -> str:
        return self.name or (f"{self.benchmark}-fast" if self.fast else self.benchmark)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out is not None else Path("runs") / self.run_name

    @property
    def store_path(self) -> Path:
        return Path(self.store) if self.store is not None else self.out_dir / "store.sqlite"


@dataclass
class Group:
    """One (dataset, task): its queries and, per query, the ordered context ids (max shots)."""

    dataset: str
    task: str
    queries: list[str]
    contexts: dict[str, list[str]]


@dataclass
class Plan:
    config: RunConfig
    datasets: dict[str, Any]
    tasks: dict[str, Any]
    models: dict[str, Adapter]
    groups: list[Group]
    context_csv: Path
    context_sha256: str
    qualitative: set[tuple[str, str, str]] = field(default_factory=set)
    issues: list[DataIssue] = field(default_factory=list)
    filtered: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        return sum(len(g.queries) for g in self.groups) * len(self.models) * len(self.config.shots)


def context_hash(context_ids: list[str]) -> str:
    """Short SHA-256 of an ordered context list (part of every stored sample's key)."""
    return hashlib.sha256("\n".join(context_ids).encode("utf-8")).hexdigest()[:16]


def _pick(kind: str, wanted: Optional[list[str]], known: list[str]) -> list[str]:
    if not wanted:
        return known
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ConfigError(f"unknown {kind} {', '.join(map(repr, unknown))}; known {kind}: {', '.join(known)}")
    return list(dict.fromkeys(wanted))


def load_models(config: RunConfig) -> dict[str, Adapter]:
    """Instantiate the requested models (not loaded yet), applying ``--dtype``."""
    names = _pick("models", config.models, list_models())
    models = {}
    for name in names:
        model = get_model(name)
        if config.dtype:
            model.precision = config.dtype
        models[name] = model
    return models


def make_plan(config: RunConfig) -> Plan:
    """Resolve names, open datasets, split, screen samples, select contexts, write ``contexts.csv``."""
    from icl.data import DataError
    from icl.data.contexts import select_contexts, split_ids, write_context_csv
    from icl.data.registry import get_dataset, list_datasets
    from icl.benchmarks.vibe.tasks.registry import get_task, list_tasks

    if config.limit is not None and config.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {config.limit}")
    if not config.shots or min(config.shots) < 1:
        raise ConfigError(f"--shots must be positive integers, got {config.shots}")
    task_names = _pick("tasks", config.tasks, list(list_tasks()))
    dataset_names = _pick("datasets", config.datasets, sorted(list_datasets(config.data_root)))
    models = load_models(config)
    tasks = {name: get_task(name) for name in task_names}
    datasets, issues = {}, []
    for name in dataset_names:
        try:
            datasets[name] = get_dataset(name, root=config.data_root, fast=config.fast)
        except DataError as exc:  # a dataset that fails validation is recorded and skipped
            issues.append(DataIssue(name, exc.sample_id or "*", ("*",), exc.path, str(exc)))
    k = max(config.shots)
    groups, rows = [], []
    filtered: dict[str, dict[str, dict[str, str]]] = {}
    for dname in datasets:
        ds = datasets[dname]
        mine = [tasks[t] for t in task_names if tasks[t].applies_to(ds.meta)]
        if not mine:
            continue
        splits = split_ids(ds.ids(), config.seed, dname)
        test = screen(ds, mine, splits["test"], config.limit)
        train = screen(ds, mine, splits["train"])
        issues += test.issues + train.issues
        for task in mine:
            queries = test.usable[task.name][: config.limit]
            dropped = {**test.filtered[task.name], **train.filtered[task.name]}
            if dropped:
                filtered.setdefault(dname, {})[task.name] = dict(sorted(dropped.items()))
            if not queries:
                continue
            try:
                selected = select_contexts(ds, task, queries, train.usable[task.name], k, config.seed)
            except ValueError as exc:  # fewer usable train samples than shots
                raise ConfigError(f"dataset {dname!r}, task {task.name!r}: {exc}") from exc
            contexts: dict[str, list[str]] = {q: [] for q in queries}
            for row in sorted(selected, key=lambda r: (r.query_id, r.rank)):
                contexts[row.query_id].append(row.context_id)
            groups.append(Group(dname, task.name, queries, contexts))
            rows.extend(selected)
    if not groups:
        raise ConfigError(f"no (dataset, task) pair to run: tasks {task_names} apply to none of {dataset_names}")
    out = config.out_dir
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "contexts.csv"
    sha = write_context_csv(rows, csv_path)
    return Plan(config, datasets, tasks, models, groups, csv_path, sha, _qualitative(groups, config.qualitative),
                issues, filtered)


def _qualitative(groups: list[Group], per_task: int) -> set[tuple[str, str, str]]:
    """(dataset, task, query) triples shown in the grids: per task, round robin over datasets."""
    picked: set[tuple[str, str, str]] = set()
    for task in sorted({g.task for g in groups}):
        mine = [g for g in groups if g.task == task]
        depth = max(len(g.queries) for g in mine)
        order = [(g.dataset, task, g.queries[i]) for i in range(depth) for g in mine if i < len(g.queries)]
        picked.update(order[:per_task])
    return picked
