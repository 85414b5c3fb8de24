"""``--shard I/N`` and ``python -m icl.run merge OUT SHARD_DIR...`` (issue 27): three shards
merged equal the unsharded run byte for byte, every refusal is one line that writes nothing, and
an item's shard depends on its key alone (PROTOCOL §1.1's stable hash).

The runs are real (``main`` in this process, real SQLite stores, the benchmarks' built-in
``--fast`` data); refusals start from real shards, changed where a real run cannot produce the
mismatch cheaply (another protocol or scorer version needs other code)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from icl.models import Adapter, register_model
from icl.models.registry import unregister_model
from icl.run.__main__ import main
from icl.run.outputs.lock import FolderLock
from icl.run.outputs.samples import stable_digest
from icl.run.scaleout.shard import select, shard_of

COMMON = ["--no-progress", "--device", "cpu"]
# files a merged run writes differently from the unsharded run by nature: its lock record, its
# store (rows carry the run that wrote them), results.json (compared key by key) and report.md
# (which shows results.json's run id, time and counts)
OWN_FILES = {".icl.lock", "store.sqlite", "results.json", "report.md", "report.html"}  # the reports show results.json
# results.json keys that differ, and why: run_id, created, command, timings (another process at
# another time); compute (the shards' wall times summed); backends (the kernels that ran in the
# merging process, the shards' own are under merged.shards); merged (the shards it came from);
# compute_per_sample (the shards' own measurements of each item)
RESULTS_DIFFER = {"run_id", "created", "command", "timings", "compute", "backends", "merged", "compute_per_sample"}
# counts that count processes' work: each shard calls the model and reuses its own responses
PROCESS_COUNTS = {"model_calls", "cached_responses"}


def files(folder: Path) -> dict[str, bytes]:
    """Every file's bytes; samples.jsonl's without each line's compute (measured by whichever
    process computed or rescored the item)."""
    return {name: stable_digest(p).encode() if name == "samples.jsonl" else p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()
            and (name := str(p.relative_to(folder))) not in OWN_FILES}


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` with its bytes' digest and modification time."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None,
                                         p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def run_ok(args: list[str], code: int = 0) -> None:
    assert main(args) == code, args


def sharded(root: Path, args: list[str], code: int = 0) -> dict[str, Path]:
    """The unsharded run, its three shards and their merge, under ``root`` (``code``: the exit
    status of the unsharded run and of the merge)."""
    dirs = dict(single=root / "single", s0=root / "s0", s1=root / "s1", s2=root / "s2", merged=root / "merged")
    run_ok([*args, *COMMON, "--out", str(dirs["single"])], code)
    for i in range(3):  # a shard without a failed item ends with 0
        assert main([*args, *COMMON, "--shard", f"{i}/3", "--out", str(dirs[f"s{i}"])]) in {0, code}
    before = {i: snapshot(dirs[f"s{i}"]) for i in range(3)}
    run_ok(["merge", str(dirs["merged"]), *(str(dirs[f"s{i}"]) for i in range(3))], code)
    for i in range(3):
        assert snapshot(dirs[f"s{i}"]) == before[i], f"merge changed shard folder s{i}"
    return dirs


def assert_same_run(single: Path, merged: Path) -> None:
    a, b = files(single), files(merged)
    assert sorted(a) == sorted(b)
    assert any(name.endswith(".csv") for name in a)
    for name in a:
        assert a[name] == b[name], f"{name} differs between the unsharded and the merged run"
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (single, merged))
    assert set(rb) - set(ra) == {"merged"}
    for key in set(ra) - RESULTS_DIFFER:
        if key == "failures":  # the same events; a run lists them as its batches met them
            assert ra[key]["count"] == rb[key]["count"] and sorted(ra[key]["items"]) == sorted(rb[key]["items"])
        elif key == "config":
            assert {k: v for k, v in ra[key].items() if k not in ("out", "store")} == \
                   {k: v for k, v in rb[key].items() if k not in ("out", "store")}
        elif key == "counts":
            assert {k: v for k, v in ra[key].items() if k not in PROCESS_COUNTS} == \
                   {k: v for k, v in rb[key].items() if k not in PROCESS_COUNTS}
        else:
            assert ra[key] == rb[key], f"results.json {key}"
    assert [(c["model"], c["stage"], c["samples"]) for c in ra["compute"]] == \
           [(c["model"], c["stage"], c["samples"]) for c in rb["compute"]]
    assert [s["index"] for s in rb["merged"]["shards"]] == [0, 1, 2]


@pytest.fixture(scope="module")
def best50(tmp_path_factory) -> dict[str, Path]:
    return sharded(tmp_path_factory.mktemp("best50"), ["best50", "--fast", "--no-plots"])


def test_best50_merged_equals_single(best50):
    assert_same_run(best50["single"], best50["merged"])
    shards = [json.loads((best50[f"s{i}"] / "results.json").read_text())["shard"] for i in range(3)]
    assert sum(s["items"] for s in shards) == shards[0]["plan"]["items"] == 64
    assert all(s["items"] > 0 and s["count"] == 3 and s["partial"] for s in shards)
    single = json.loads((best50["single"] / "results.json").read_text())
    assert shards[0]["plan"] == single["plan"]  # the unsharded plan's hash, recorded by every shard
    assert "partial" in (best50["s0"] / "report.md").read_text()


@pytest.mark.slow
def test_vibe_merged_equals_single(tmp_path, fast_data):
    dirs = sharded(tmp_path, ["vibe", "--fast", "--data-root", str(fast_data), "--no-plots"])
    assert_same_run(dirs["single"], dirs["merged"])


@pytest.mark.slow
def test_vlicl_merged_equals_single(tmp_path):
    dirs = sharded(tmp_path, ["vlicl", "--fast"])  # with plots: the PNGs compared too
    assert (dirs["merged"] / "predictions.jsonl").is_file()
    assert_same_run(dirs["single"], dirs["merged"])


@pytest.mark.slow
def test_merge_and_rescore_keep_the_run_model_order_in_plots(tmp_path, fast_data, capsys):
    """Two models given out of alphabetical order, plots on: merge and rescore drew 39 of 41
    figures with the models in alphabetical order (taken from results.json's sorted ``models``
    keys), so their PNGs and SVGs differed from the unsharded run's. results.json records
    ``model_order``, and both folders equal the run file for file, figures included."""
    args = ["vibe", "--fast", "--data-root", str(fast_data), "--tasks", "flip,edges", "--datasets", "scenes-a",
            "--limit", "2", "--models", "oracle,identity"]
    dirs = sharded(tmp_path, args)
    # samples.jsonl differs in each line's compute only (files() compares it without), and merge says so
    assert ("samples.jsonl equals the unsharded run's but for each line's compute, the one field allowed to differ"
            in capsys.readouterr().out)
    single = json.loads((dirs["single"] / "results.json").read_text())
    assert single["model_order"] == ["oracle", "identity"] and list(single["models"]) == ["identity", "oracle"]
    figures = [n for n in files(dirs["single"]) if n.endswith((".png", ".svg")) and n.startswith("plots/")]
    assert any(n.endswith(".svg") for n in figures) and any(n.endswith(".png") for n in figures)
    assert_same_run(dirs["single"], dirs["merged"])
    rescored = tmp_path / "rescored"
    shutil.copytree(dirs["single"], rescored)
    run_ok(["rescore", str(rescored)])
    a, b = files(dirs["single"]), files(rescored)
    assert sorted(a) == sorted(b)
    assert [n for n in a if a[n] != b[n]] == []
    assert json.loads((rescored / "results.json").read_text())["model_order"] == ["oracle", "identity"]


class SomeFail(Adapter):
    """The query as the answer, but a wrong-shaped one for about a third of the items, chosen by
    a hash of the item (never by its place in a batch, so any sharding fails the same items)."""

    name = "some-fail"
    batch_size = 4

    def predict(self, requests):
        def fails(r) -> bool:
            return hashlib.sha256(f"{r.dataset}/{r.query_id}/{r.shots}".encode()).digest()[0] % 3 == 0

        return [np.zeros(r.query.shape[:2], np.uint8) if fails(r) else r.query for r in requests]


def test_failed_items_merge_like_one_run(tmp_path, fast_data):
    register_model("some-fail", SomeFail)
    try:
        dirs = sharded(tmp_path, ["vibe", "--fast", "--data-root", str(fast_data), "--no-plots", "--tasks", "edges",
                                  "--models", "some-fail,identity"], code=1)
    finally:
        unregister_model("some-fail")
    assert_same_run(dirs["single"], dirs["merged"])
    meta = json.loads((dirs["merged"] / "results.json").read_text())
    assert meta["counts"]["failed"] > 0 and meta["failures"]["count"] >= meta["counts"]["failed"]


def test_merge_again_is_idempotent(best50, tmp_path, capsys):
    out = tmp_path / "m"
    shutil.copytree(best50["merged"], out)
    shards = [str(best50[f"s{i}"]) for i in range(3)]
    capsys.readouterr()
    run_ok(["merge", str(out), *shards])
    assert ": 0 rows copied" in capsys.readouterr().out
    assert files(out) == files(best50["merged"])
    # the unsharded run's folder is the same run: merging into it adds nothing either
    single = tmp_path / "single"
    shutil.copytree(best50["single"], single)
    run_ok(["merge", str(single), *shards])
    assert files(single) == files(best50["single"])


def test_rescore_of_a_shard_stays_a_shard(best50, tmp_path):
    s1 = tmp_path / "s1"
    shutil.copytree(best50["s1"], s1)
    assert main(["rescore", str(s1)]) == 0
    meta = json.loads((s1 / "results.json").read_text())
    assert meta["shard"]["items"] == meta["plan"]["items"] < 64
    assert files(s1) == files(best50["s1"])


def refused(capsys, args: list[str], *words: str) -> str:
    capsys.readouterr()
    assert main(["merge", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("icl.run: merge"), err
    for w in words:
        assert w in err, err
    return err


def _edit(folder: Path, change) -> None:
    meta = json.loads((folder / "results.json").read_text())
    change(meta)
    (folder / "results.json").write_text(json.dumps(meta))


def _model(meta: dict) -> dict:
    return next(iter(meta["models"].values()))


MISMATCHES = {
    "benchmark": (lambda m: m.update(benchmark="vibe"), "benchmark best50 vs vibe"),
    "protocol": (lambda m: m.update(protocol="best50-0"), "protocol best50-1 vs best50-0"),
    "scorer": (lambda m: m.update(scorer_version="0"), "scorer version"),
    "model id": (lambda m: _model(m).update(model_id="x" * 20), "models oracle = "),
    "model identity": (lambda m: _model(m)["identity"].update(weights="other"), "other identities"),
    "judge": (lambda m: m.update(judges=[dict(label="j", judge_id="some-judge", identity=None)]),
              "judges none vs j = some-judge"),
    "settings": (lambda m: m["config"]["options"].update(limit=3), "settings options"),
    "plan": (lambda m: m["shard"]["plan"].update(sha256="0" * 64), "unsharded plan"),
    "split": (lambda m: m["shard"].update(count=4), "number of shards 3 vs 4"),
}


@pytest.mark.parametrize("what", sorted(MISMATCHES))
def test_mismatched_shard_refused(best50, tmp_path, capsys, what):
    change, words = MISMATCHES[what]
    s2 = tmp_path / "s2"
    shutil.copytree(best50["s2"], s2)
    _edit(s2, change)
    refused(capsys, [str(tmp_path / "out"), str(best50["s0"]), str(best50["s1"]), str(s2)], words,
            "is not a shard of the same run")
    assert not (tmp_path / "out").exists()


def test_real_mismatches_refused(best50, tmp_path, capsys):
    """Shards of another model or other settings, run for real."""
    other = tmp_path / "other"
    run_ok(["best50", "--fast", *COMMON, "--no-plots", "--models", "copy-last", "--shard", "2/3", "--out", str(other)])
    refused(capsys, [str(tmp_path / "o"), str(best50["s0"]), str(best50["s1"]), str(other)], "models oracle")
    limited = tmp_path / "limited"
    run_ok(["best50", "--fast", *COMMON, "--no-plots", "--limit", "2", "--shard", "2/3", "--out", str(limited)])
    refused(capsys, [str(tmp_path / "o"), str(best50["s0"]), str(best50["s1"]), str(limited)], "settings", "limit")
    assert not (tmp_path / "o").exists()


def test_shards_overlapping_missing_or_unfinished_refused(best50, tmp_path, capsys):
    s = [str(best50[f"s{i}"]) for i in range(3)]
    out = str(tmp_path / "out")
    twin = tmp_path / "twin"
    shutil.copytree(best50["s1"], twin)
    refused(capsys, [out, s[0], s[1], str(twin), s[2]], "both shard 1/3", "overlap")
    refused(capsys, [out, s[0], s[2]], "shard(s) 1/3 missing")
    refused(capsys, [out, s[0], s[1], s[1], s[2]], "given twice")
    refused(capsys, [out, s[0], s[1], str(best50["single"])], "is not a shard")
    (twin / "results.json").unlink()
    refused(capsys, [out, s[0], str(twin), s[2]], "no results.json")
    refused(capsys, [out, s[0], s[1], str(tmp_path / "nowhere")], "does not exist")
    assert not (tmp_path / "out").exists()


def test_incomplete_shard_refused(best50, tmp_path, capsys):
    s1 = tmp_path / "s1"
    shutil.copytree(best50["s1"], s1)
    con = sqlite3.connect(s1 / "store.sqlite")
    with con:
        gone = con.execute("SELECT item_key FROM scores ORDER BY item_key LIMIT 2").fetchall()
        con.execute("DELETE FROM scores WHERE item_key IN (?, ?)", [k for (k,) in gone])
    con.close()
    err = refused(capsys, [str(tmp_path / "out"), str(best50["s0"]), str(s1), str(best50["s2"])],
                  "shard 1/3", "incomplete: 2 of its", "model oracle")
    assert repr(gone[0][0]) in err
    assert not (tmp_path / "out").exists()


def test_running_shard_refused(best50, tmp_path, capsys):
    s1 = tmp_path / "s1"
    shutil.copytree(best50["s1"], s1)
    with FolderLock(s1, ["test"]):
        refused(capsys, [str(tmp_path / "out"), str(best50["s0"]), str(s1), str(best50["s2"])], "running")


def test_conflicting_rows_refused_and_nothing_merged(best50, tmp_path, capsys):
    """Two stores holding different content under one key (here the model's identity row)."""
    s1 = tmp_path / "s1"
    shutil.copytree(best50["s1"], s1)
    con = sqlite3.connect(s1 / "store.sqlite")
    with con:
        con.execute("UPDATE models SET identity = '{\"other\": 1}'")
    con.close()
    out = tmp_path / "out"
    refused(capsys, [str(out), str(best50["s0"]), str(s1), str(best50["s2"])], "table models", "differs in identity")
    assert not (out / "results.json").exists()
    con = sqlite3.connect(out / "store.sqlite")
    assert con.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 0  # one transaction, rolled back
    con.close()


def test_out_must_be_apart_and_the_same_run(best50, tmp_path, capsys):
    s = [str(best50[f"s{i}"]) for i in range(3)]
    refused(capsys, [s[0], *s], "overlap")
    refused(capsys, [str(best50["s0"] / "sub"), *s], "overlap")
    twin = tmp_path / "twin"
    shutil.copytree(best50["s1"], twin)
    refused(capsys, [str(twin), *s], "holds shard 1/3")
    refused(capsys, [str(best50["s0"].parent), *s], "overlap")
    other = tmp_path / "other"
    run_ok(["best50", "--fast", *COMMON, "--no-plots", "--limit", "2", "--out", str(other)])
    before = snapshot(other)
    refused(capsys, [str(other), *s], "holds another run", "limit")
    assert snapshot(other) == before


def test_shard_option_validated(tmp_path, capsys):
    for text, words in [("3/3", "0..2"), ("a/3", "integers"), ("-1/3", "integers"), ("1", "I/N"), ("0/0", "at least 1"),
                        ("1.0/2", "integers")]:
        capsys.readouterr()
        assert main(["best50", "--fast", *COMMON, f"--shard={text}", "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--shard" in err and words in err, err
    assert not (tmp_path / "x").exists()
    toml = tmp_path / "run.toml"
    toml.write_text('shard = "5/2"\n')
    assert main(["best50", "--fast", *COMMON, "--config", str(toml), "--out", str(tmp_path / "x")]) == 2
    assert "shard '5/2'" in capsys.readouterr().err


def test_shard_is_a_stable_hash_of_the_key():
    """PROTOCOL §1.1: SHA-256 of "{global_seed}/{dataset}/{split}/{sample_id}/{purpose}", first 8
    bytes little endian; here "*/*/*/{item key}/shard", modulo N."""
    key = "scenes-a@1/edges@1/q0003/k1/c0123abcd/s0"
    digest = hashlib.sha256(f"*/*/*/{key}/shard".encode()).digest()
    assert shard_of(key, 7) == int.from_bytes(digest[:8], "little") % 7


def test_growing_plan_moves_no_item(fast_data):
    """A plan with more tasks and shots keeps every earlier item in its shard (real vibe plans)."""
    from icl.run.planning.config import RunConfig
    from icl.run.planning.setup import open_benchmark, plan_items

    def plan(tasks: str, shots: str) -> list:
        config = RunConfig("vibe", options=dict(tasks=tasks, shots=shots), fast=True, data_root=fast_data)
        return plan_items(open_benchmark(config))

    small, big = plan("edges", "1"), plan("edges,depth,flip", "1,2")
    assert len(big) > 2 * len(small) > 0 and {it.key for it in small} < {it.key for it in big}
    for count in (2, 3, 8):
        parts = [select(big, i, count) for i in range(count)]
        assert sorted(it.key for p in parts for it in p) == sorted(it.key for it in big)  # a partition
        small_keys = {it.key for it in small}
        for i in range(count):
            assert [it.key for it in select(small, i, count)] == [it.key for it in parts[i] if it.key in small_keys]
    sizes = [len(select(big, i, 3)) for i in range(3)]
    assert min(sizes) > 0.2 * len(big), sizes


def test_a_store_edited_by_hand_is_refused(best50, tmp_path, capsys):
    """A score changed in a shard's store after the shard ended (complete, no key conflict:
    only the digest the shard recorded tells)."""
    s1 = tmp_path / "s1"
    shutil.copytree(best50["s1"], s1)
    con = sqlite3.connect(s1 / "store.sqlite")
    with con:
        key, metrics = con.execute("SELECT item_key, metrics FROM scores ORDER BY item_key LIMIT 1").fetchone()
        edited = json.dumps({k: 1.0 for k in json.loads(metrics)})
        assert edited != metrics
        con.execute("UPDATE scores SET metrics = ? WHERE item_key = ?", (edited, key))
    con.close()
    refused(capsys, [str(tmp_path / "out"), str(best50["s0"]), str(s1), str(best50["s2"])],
            "shard 1/3", "no longer holds what the shard computed", "edited by hand")
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.parametrize("key, value, words", [("icl_version", "0.0.1", "icl version"),
                                               ("git_revision", "0" * 40, "git revision")])
def test_shards_of_another_icl_are_refused(best50, tmp_path, capsys, key, value, words):
    s2 = tmp_path / "s2"
    shutil.copytree(best50["s2"], s2)
    _edit(s2, lambda m: m.update({key: value}))
    refused(capsys, [str(tmp_path / "out"), str(best50["s0"]), str(best50["s1"]), str(s2)], words, value,
            "is not a shard of the same run")


def test_shards_of_an_older_icl_merge_with_warnings(best50, tmp_path, capsys):
    """Shards computed by another icl than the one merging (a warning line), without a digest of
    their stores (an earlier icl: a warning per shard): merged."""
    dirs = []
    for i in range(3):
        d = tmp_path / f"s{i}"
        shutil.copytree(best50[f"s{i}"], d)
        _edit(d, lambda m: (m.update(icl_version="0.0.1"), m["shard"].pop("content_sha256")))
        dirs.append(str(d))
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "out"), *dirs]) == 0
    err = capsys.readouterr().err
    assert "computed by icl version 0.0.1, this is" in err
    assert err.count("records no digest of its store's content") == 3


def test_a_shard_whose_files_were_cut_short_is_refused(best50, tmp_path, capsys):
    s1 = tmp_path / "s1"
    shutil.copytree(best50["s1"], s1)
    (s1 / "INCOMPLETE").write_text("This folder's output files are being replaced by: ...\n")
    refused(capsys, [str(tmp_path / "out"), str(best50["s0"]), str(s1), str(best50["s2"])], "INCOMPLETE", "cut short")
