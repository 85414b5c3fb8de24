"""Plan shards for batch schedulers (``--shard I/N``): which plan items a shard runs.

An item belongs to shard ``derive_seed("*", "*", "*", item_key, "shard") % N`` (PROTOCOL §1.1's
stable hash of the item's key alone), so an item stays in its shard whatever else the plan
holds: a plan that grows (more tasks, shots, seeds) adds items to shards, never moves one.
Shards are counted from 0, as ``$SLURM_ARRAY_TASK_ID`` with ``sbatch --array=0-(N-1)``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

from icl.benchmarks.base import Item
from icl.data.seeds import ANY, derive_seed

PURPOSE = "shard"


def shard_of(item_key: str, count: int) -> int:
    """The shard (0..count-1) of the item keyed ``item_key``."""
    return derive_seed(ANY, ANY, ANY, item_key, PURPOSE) % count


def select(items: Sequence[Item], index: int, count: int) -> list[Item]:
    """The items of shard ``index`` of ``count``, in plan order."""
    return [it for it in items if shard_of(it.key, count) == index]


def plan_sha256(items: Sequence[Item]) -> str:
    """SHA-256 of the plan's item keys in plan order (results.json ``plan.sha256``)."""
    return hashlib.sha256("\n".join(it.key for it in items).encode()).hexdigest()


def describe(plan: Sequence[Item], mine: Sequence[Item], index: int, count: int) -> dict[str, Any]:
    """What a shard's results.json records under ``shard``: which shard, its item count and
    the whole (unsharded) plan it was cut from, which ``merge`` checks."""
    return dict(index=index, count=count, items=len(mine), plan=dict(items=len(plan), sha256=plan_sha256(plan)),
                partial=True)


def note(shard: Mapping[str, Any]) -> str:
    """The line saying a shard's tables are partial (its summary and report.md)."""
    return (f"shard {shard['index']}/{shard['count']}: {shard['items']} of the plan's {shard['plan']['items']} items; "
            f"its tables are partial: merge the shards (python -m icl.run merge OUT SHARD_DIR...)")


def content_sha256(conn: Any, benchmark: str, protocol: str, scorer_version: str, item_keys: Sequence[str],
                   model_ids: Sequence[str]) -> str:
    """SHA-256 of what a store holds for ``item_keys`` x ``model_ids`` (``conn``: a read-only
    SQLite connection to it, or the :class:`icl.store.Store`, anything with ``execute`` or ``read``): every score of them (status, reason, metrics, error, by judge)
    and every answer linked to them (the model's and its judges': status, reason, kind, body,
    error); timings and other measurements left out. A shard records it when it ends
    (``shard.content_sha256``); ``merge`` recomputes it and refuses a store changed since."""
    run = getattr(conn, "read", None) or conn.execute
    keys, models = set(item_keys), set(model_ids)
    h = hashlib.sha256()
    scores = sorted(r for r in run(
        "SELECT item_key, model_id, judge_id, status, reason, metrics, error FROM scores WHERE benchmark=? AND "
        "protocol=? AND scorer_version=?", (benchmark, protocol, scorer_version)) if r[0] in keys and r[1] in models)
    for row in scores:
        h.update(repr(row).encode())
    links = sorted(r for r in run("SELECT item_key, model_id, step, request_hash FROM links")
                   if r[0].split("|", 1)[0] in keys and (r[1] in models or "|" in r[0]))
    for item_key, model_id, step, request_hash in links:
        h.update(repr((item_key, model_id, step, request_hash)).encode())
        for row in run("SELECT status, reason, kind, body, error FROM responses WHERE request_hash=? AND "
                                "model_id=?", (request_hash, model_id)):
            body = row[3]
            digest = hashlib.sha256(body if isinstance(body, bytes) else str(body).encode()).hexdigest()
            h.update(repr((row[0], row[1], row[2], digest, row[4])).encode())
    return h.hexdigest()
