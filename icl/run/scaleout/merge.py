"""``python -m icl.run merge OUT SHARD_DIR...``: the shards of one run (``--shard I/N``, each in
its own folder) joined into OUT, with the files the unsharded run writes.

Before anything is written, every shard is checked against the first, one line per refusal:
the same benchmark, protocol, scorer version, models (ids and whole identities), judge,
settings, data fingerprints and unsharded plan (its SHA-256, recorded by each shard and
recomputed here from the data), icl version and git revision (where both shards recorded one);
every shard 0..N-1 given exactly once; each shard complete (a stored score for every (item of
the shard, model) pair) and its store unchanged since the shard ended (the digest of its scores
and answers, :func:`icl.run.scaleout.shard.content_sha256`, recorded in its results.json; a shard of an
earlier icl, without one, is merged with a warning). An icl other than the shards' merging
them is told in a warning line. Then every row of every shard's
store is copied into OUT's store in one transaction (:meth:`icl.store.Store.copy_from`: table
by table, so columns and tables added later travel too; a key holding different content in two
stores is refused) and the runner's own :func:`icl.run.runner.finish` writes the files.

OUT is new, or an earlier merge (or unsharded run) of the same run: merging again copies
nothing twice and rewrites the same files. The shard folders are only read.

The merged folder equals the unsharded run's file for file (tables, figures, per-run files),
except what records a process rather than the results: the lock, the store's run ids,
results.json's provenance and measurements (and report.md / report.html, which show them), and
in ``samples.jsonl`` each line's ``compute`` (measured by the shard that computed the item), the
one field of that file allowed to differ; merge says so when it writes one.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, TextIO

from icl.benchmarks.base import Benchmark, Item
from icl.run.scaleout import shard as S
from icl.run.planning.config import RunConfig
from icl.run.execution.engine import ExecStats
from icl.run.errors import ConfigError
from icl.run.outputs.files import INCOMPLETE, claim_folder, replacing, write_artifacts
from icl.run.outputs.lock import LOCK_NAME, FolderLock
from icl.run.runner import Outcome, applicable_items, run_store, finish, print_summary, recorded_judges, recorded_models, recorded_roles, writable
from icl.run.planning.setup import absolute, open_benchmark, plan_items
from icl.run.outputs.samples import SAMPLES
from icl.store import ComputeRecord, Failure, Store, StoreError
from icl.store.copy import open_read_only

# settings that may differ between the shards of one run: where each wrote, and what merge sets
PER_SHARD_SETTINGS = ("out", "store", "name", "shard", "plots", "data_root",
                      "ray", "workers", "judge_workers", "gpus_per_worker", "worker_retries")  # how, not what
SHOWN_KEYS = 3


@dataclass
class Shard:
    folder: Path
    meta: dict[str, Any]
    store: Path

    @property
    def index(self) -> int:
        return int(self.meta["shard"]["index"])

    @property
    def count(self) -> int:
        return int(self.meta["shard"]["count"])

    @property
    def name(self) -> str:
        return f"shard {self.index}/{self.count} ({self.folder})"


def merge(out: Path, shard_dirs: Sequence[Path], stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None,
          command: Optional[list[str]] = None, plots: Optional[bool] = None,
          data_root: Optional[Path] = None) -> Outcome:
    """Merge the shards in ``shard_dirs`` into ``out`` (see the module); ``plots`` and
    ``data_root`` override the shards' settings."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    t0 = time.perf_counter()
    out = absolute(Path(out))
    folders = [absolute(Path(d)) for d in shard_dirs]
    _check_folders(out, folders)
    shards = [_read_shard(d) for d in folders]
    for other in shards[1:]:
        _check_same(shards[0], other)
    _check_indices(shards)
    _check_code(shards, stderr)
    config = RunConfig.from_resolved(shards[0].meta["config"])
    config.shard, config.out, config.store = None, out, None
    config.command = command or ["python", "-m", "icl.run", "merge", str(out), *map(str, folders)]
    if plots is not None:
        config.plots = plots
    if data_root is not None:
        config.data_root = absolute(Path(data_root))
    if config.store_path in {s.store for s in shards}:
        raise ConfigError(f"merge: OUT's store {config.store_path} is a shard's store; merge into another folder")
    bench = open_benchmark(config)
    items = plan_items(bench)
    recorded = shards[0].meta["shard"]["plan"]
    if S.plan_sha256(items) != recorded.get("sha256"):
        raise ConfigError(f"merge: the plan built now ({len(items)} items) is not the one the shards were cut from "
                          f"({recorded.get('items')} items, SHA-256 {recorded.get('sha256')}): the data or icl changed "
                          f"since; merge with the data and icl the shards ran with")
    meta = shards[0].meta
    models = recorded_models(meta)  # the run's order: tables and figures as the unsharded run draws them
    roles = recorded_roles(meta)
    judges = recorded_judges(meta)
    _check_complete(bench, items, shards, models, [j["judge_id"] for j in judges] or [""], roles, stderr)
    _check_out(out, shards[0])
    t_plan = time.perf_counter()
    with writable(out, config.store_path):
        out.mkdir(parents=True, exist_ok=True)
        with FolderLock(out, config.command):
            claim_folder(out, bench.name)
            with Store(config.store_path) as store:
                try:
                    copied = store.copy_from([s.store for s in shards])
                except StoreError as exc:
                    raise ConfigError(f"merge: {exc}") from None
                t_copy = time.perf_counter()
                run_id = store.start_run(dict(config=config.resolved(), protocol=bench.protocol,
                                              merged=[str(s.folder) for s in shards]))
                _record_shard_runs(store, bench, shards, run_id)
                stats = _stats(shards)
                with replacing(out, config.command):  # INCOMPLETE until every file is written
                    outcome = finish(config, bench, items, models, judges, store, run_id, stats,
                                     write_artifacts(bench, out), dict(plan_s=t_plan - t0, merge_s=t_copy - t_plan),
                                     identities={m["model_id"]: m.get("identity") for m in meta["models"].values()},
                                     device=meta.get("device", "cpu"), t0=t0, roles=roles,
                                     extra=dict(merged=_provenance(shards)))
    print_summary(bench, outcome, stdout, stderr)
    added = sum(sum(c.added.values()) for c in copied)
    present = sum(sum(c.present.values()) for c in copied)
    print(f"merged {len(shards)} shards into {out}: {added} rows copied, {present} already there; "
          f"{t_copy - t_plan:.2f} s copying", file=stdout)
    if (out / SAMPLES).is_file():
        print(f"{SAMPLES} equals the unsharded run's but for each line's compute, the one field allowed to differ "
              f"(measured by the shard that computed the item; docs/runs.md)", file=stdout)
    return outcome


def _check_folders(out: Path, folders: Sequence[Path]) -> None:
    seen: set[Path] = set()
    for d in folders:
        if d in seen:
            raise ConfigError(f"merge: shard folder {d} is given twice")
        seen.add(d)
        if d == out or out.is_relative_to(d) or d.is_relative_to(out):
            raise ConfigError(f"merge: OUT {out} and shard folder {d} overlap; OUT must be a folder apart from every "
                              f"shard folder (shard folders are never written)")


def _read_shard(folder: Path) -> Shard:
    path = folder / "results.json"
    if not folder.is_dir():
        raise ConfigError(f"merge: shard folder {folder} does not exist")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["config"]["benchmark"]
    except FileNotFoundError:
        raise ConfigError(f"merge: {folder} has no results.json: not a finished shard (a shard writes it when it "
                          f"ends; run it again to finish it)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"merge: {path}: not a run's results.json ({type(exc).__name__}: {exc})") from None
    if (folder / INCOMPLETE).exists():
        raise ConfigError(f"merge: {folder} holds {INCOMPLETE}: writing its files was cut short (they are not one "
                          f"set); run the command it names again to finish the shard")
    if not isinstance(meta.get("shard"), dict):
        raise ConfigError(f"merge: {folder} is not a shard (its run had no --shard I/N); merge joins the shards "
                          f"of one run")
    if _running(folder):
        raise ConfigError(f"merge: {folder} is in use by a running icl process (its {LOCK_NAME} is held); wait for "
                          f"the shard to end")
    shard = Shard(folder, meta, run_store(meta["config"], folder))
    if not shard.store.is_file():
        raise ConfigError(f"merge: {shard.name}: no store at {shard.store} (its results.json names it)")
    return shard


def _running(folder: Path) -> bool:
    """Whether a run holds ``folder``'s lock (tested with a shared lock on a read-only
    descriptor, so the shard's folder is not written)."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _identity(meta: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """What must be equal for two folders to hold parts of one run: (what, value, shown)."""
    config = meta.get("config") or {}
    models = {label: (m.get("model_id"), m.get("identity")) for label, m in (meta.get("models") or {}).items()}
    return [
        ("benchmark", meta.get("benchmark"), str(meta.get("benchmark"))),
        ("protocol", meta.get("protocol"), str(meta.get("protocol"))),
        ("scorer version", meta.get("scorer_version"), str(meta.get("scorer_version"))),
        ("models", models, ", ".join(f"{label} = {mid}" for label, (mid, _) in models.items())),
        ("judges", [(j["judge_id"], j.get("identity")) for j in recorded_judges(meta)],
         ", ".join(j["label"] + " = " + j["judge_id"] for j in recorded_judges(meta)) or "none"),
        ("data fingerprints", meta.get("fingerprints"), json.dumps(meta.get("fingerprints"), sort_keys=True)),
        ("settings", {k: v for k, v in config.items() if k not in PER_SHARD_SETTINGS}, ""),
    ]


def _differs(a: Mapping[str, Any], b: Mapping[str, Any]) -> Optional[str]:
    """How ``b`` differs from ``a`` (the first difference), or None."""
    for (what, va, shown_a), (_, vb, shown_b) in zip(_identity(a), _identity(b)):
        if va == vb:
            continue
        if what == "settings":
            keys = sorted(k for k in set(va) | set(vb) if va.get(k) != vb.get(k))
            return "settings " + ", ".join(f"{k} {va.get(k)!r} vs {vb.get(k)!r}" for k in keys)
        if what == "models" and shown_a == shown_b:
            shown_a, shown_b = "(the same ids)", "other identities under the same ids"
        return f"{what} {shown_a} vs {shown_b}"
    return None


def _code(meta: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The icl that ran a shard: its version and checkout revision (None: not recorded, or
    not a git checkout)."""
    return [("icl version", meta.get("icl_version")), ("git revision", meta.get("git_revision"))]


def _check_same(first: Shard, other: Shard) -> None:
    why = _differs(first.meta, other.meta)
    for (what, a), (_, b) in zip(_code(first.meta), _code(other.meta)):
        if why is None and a is not None and b is not None and a != b:
            why = f"{what} {a} vs {b} (shards of one run are computed by one icl)"
    if why is None and other.count != first.count:
        why = f"number of shards {first.count} vs {other.count}"
    if why is None and other.meta["shard"].get("plan") != first.meta["shard"].get("plan"):
        a, b = first.meta["shard"].get("plan") or {}, other.meta["shard"].get("plan") or {}
        why = f"unsharded plan {a.get('items')} items {a.get('sha256')} vs {b.get('items')} items {b.get('sha256')}"
    if why is not None:
        raise ConfigError(f"merge: {other.folder} is not a shard of the same run as {first.folder}: {why}")


def _check_indices(shards: Sequence[Shard]) -> None:
    by_index: dict[int, Shard] = {}
    for s in shards:
        if s.index in by_index:
            raise ConfigError(f"merge: {by_index[s.index].folder} and {s.folder} are both shard {s.index}/{s.count}: "
                              f"they overlap; give each shard once")
        by_index[s.index] = s
    count = shards[0].count
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        plan = shards[0].meta["shard"]["plan"].get("items")
        raise ConfigError(f"merge: shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing (given: "
                          f"{', '.join(str(i) for i in sorted(by_index))} of a {count}-way split of {plan} items); "
                          f"give every shard's folder")


def _check_complete(bench: Benchmark, items: Sequence[Item], shards: Sequence[Shard],
                    models: Sequence[tuple[str, str]], judge_ids: Sequence[str], roles: Mapping[str, Any],
                    stderr: TextIO) -> None:
    """Every (item of the shard, applicable model, judge) has a stored score in the shard's store."""
    for s in shards:
        mine = S.select(items, s.index, s.count)
        if s.meta["shard"].get("items") != len(mine):
            raise ConfigError(f"merge: {s.name} recorded {s.meta['shard'].get('items')} items, its part of the plan "
                              f"now has {len(mine)}")
        try:
            with open_read_only(s.store) as conn:
                found = set(conn.execute(
                    "SELECT item_key, model_id, judge_id FROM scores WHERE benchmark=? AND protocol=? AND "
                    "scorer_version=?", (bench.name, bench.protocol, bench.scorer_version)))
        except StoreError as exc:
            raise ConfigError(f"merge: {s.name}: {exc}") from None
        for label, model_id in models:
            lacking = [it.key for it in applicable_items(bench, mine, roles.get(label))
                       if any((it.key, model_id, j) not in found for j in judge_ids)]
            if lacking:
                shown = ", ".join(repr(k) for k in lacking[:SHOWN_KEYS]) + (", ..." if len(lacking) > SHOWN_KEYS else "")
                raise ConfigError(f"merge: {s.name} is incomplete: {len(lacking)} of its {len(mine)} items have no "
                                  f"score of model {label} ({shown}); run the shard again to finish it (nothing merged)")
        _check_content(bench, s, mine, models, stderr)


def _check_content(bench: Benchmark, s: Shard, mine: Sequence[Item], models: Sequence[tuple[str, str]],
                   stderr: TextIO) -> None:
    """The shard's store holds what it held when the shard ended (:func:`icl.run.scaleout.shard.content_sha256`,
    recorded in its results.json): a store edited since (by hand, by another tool) is refused."""
    recorded = s.meta["shard"].get("content_sha256")
    if recorded is None:
        print(f"icl.run: merge: warning: {s.name} records no digest of its store's content (written by an "
              f"earlier icl): a store edited since the shard ended cannot be told", file=stderr)
        return
    try:
        with open_read_only(s.store) as conn:
            now = S.content_sha256(conn, bench.name, bench.protocol, bench.scorer_version, [it.key for it in mine],
                                   [mid for _, mid in models])
    except StoreError as exc:
        raise ConfigError(f"merge: {s.name}: {exc}") from None
    if now != recorded:
        raise ConfigError(f"merge: {s.name}: its store {s.store} no longer holds what the shard computed (its "
                          f"scores or answers were changed after it ended, e.g. edited by hand: content SHA-256 "
                          f"{now[:12]}... vs {recorded[:12]}... recorded); run the shard again into a new folder "
                          f"(nothing merged)")


def _check_code(shards: Sequence[Shard], stderr: TextIO) -> None:
    """Warn loudly when the icl merging is not the one that computed the shards (the plan,
    recomputed here, and the settings are checked; the scores are the shards')."""
    import icl
    from icl.run.outputs.meta import git_revision

    here = dict(_code(dict(icl_version=icl.__version__, git_revision=git_revision())))
    for what, value in _code(shards[0].meta):
        if value is not None and here[what] is not None and value != here[what]:
            print(f"icl.run: merge: warning: the shards were computed by {what} {value}, this is {here[what]}; "
                  f"the merged tables are drawn by this one", file=stderr)


def _check_out(out: Path, first: Shard) -> None:
    """OUT is new, or holds this same run (an earlier merge, or the run unsharded)."""
    try:
        meta = json.loads((out / "results.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        raise ConfigError(f"merge: {out / 'results.json'} is unreadable ({exc}); merge into another folder") from None
    if isinstance(meta, dict) and isinstance(meta.get("shard"), dict):
        raise ConfigError(f"merge: OUT {out} holds shard {meta['shard'].get('index')}/{meta['shard'].get('count')}; "
                          f"merge into a folder of its own")
    if not isinstance(meta, dict) or meta.get("benchmark") != first.meta.get("benchmark"):
        return  # another benchmark's folder: claim_folder refuses it with its own line
    why = _differs(first.meta, meta)
    plan = first.meta["shard"]["plan"]
    if why is None and (meta.get("plan") or {}).get("sha256") != plan.get("sha256"):
        why = f"plan {plan.get('sha256')} vs {(meta.get('plan') or {}).get('sha256')}"
    if why is not None:
        raise ConfigError(f"merge: OUT {out} holds another run (its {why}); merge into a new folder")


def _record_shard_runs(store: Store, bench: Benchmark, shards: Sequence[Shard], run_id: str) -> None:
    """The merged run's failures and compute records, as one run would have them: the data
    failures once, each shard's item failures, and compute summed over the shards."""
    failures = [Failure("data", f"{where}: {msg}", None, None, path, run_id) for where, msg, path in bench.data_failures()]
    totals: dict[tuple[str, str], ComputeRecord] = {}
    for s in shards:
        shard_run = str(s.meta.get("run_id") or "-")  # never None: failures(None) would be every run's
        failures += [Failure(f.stage, f.message, f.model, f.item, f.path, run_id)
                     for f in store.failures(shard_run) if f.stage != "data"]
        for c in store.compute([shard_run]):
            t = totals.setdefault((c.model, c.stage), ComputeRecord(run_id, c.model, c.stage, c.device, 0, 0.0, None,
                                                                    c.memory_kind))
            t.samples += c.samples
            t.wall_s += c.wall_s  # process time summed over the shards, not the wall time of the array
            if c.peak_memory_bytes is not None:
                t.peak_memory_bytes = max(t.peak_memory_bytes or 0, c.peak_memory_bytes)
            if c.device != t.device:
                t.device = "mixed"
    store.add_failures(failures)
    store.add_compute(totals.values())


def _stats(shards: Sequence[Shard]) -> ExecStats:
    stats = ExecStats()
    for s in shards:
        counts = s.meta.get("counts") or {}
        for name in ("computed", "skipped", "failed", "model_calls", "cached_responses"):
            setattr(stats, name, getattr(stats, name) + int(counts.get(name) or 0))
        stats.stopped.update(s.meta.get("stopped_models") or {})
    return stats


def _provenance(shards: Sequence[Shard]) -> dict[str, Any]:
    return dict(count=shards[0].count, shards=[
        dict(index=s.index, folder=str(s.folder), items=s.meta["shard"].get("items"), run_id=s.meta.get("run_id"),
             command=s.meta.get("command"), created=s.meta.get("created"), device=s.meta.get("device"),
             git_revision=s.meta.get("git_revision"), icl_version=s.meta.get("icl_version"),
             backends=s.meta.get("backends"))
        for s in sorted(shards, key=lambda s: s.index)])
