"""The viewer's own index of a store: filters, sorts and pages in SQL, follows a store that grows,
and never writes into the run folder."""

from __future__ import annotations

import json

from icl.store.sqlite import Response, Score, ScoreKey, Store
from icl.view.index import PAGE_SIZE, RunIndex, index_path
from tests.view._runs import BENCHMARK, PROTOCOL, SCORER, key_of, snapshot, write_run


def _index(folder):
    return RunIndex(folder, BENCHMARK, "acc")


def test_filters_sorts_and_pages_match_a_python_reference(tmp_path):
    ids = write_run(tmp_path / "run", n=120)
    before = snapshot(tmp_path / "run")
    ix = _index(tmp_path / "run")
    ix.refresh()
    rows, total = ix.sample_page({}, "key", 0)
    assert total == 2 * (120 + 4) and len(rows) == PAGE_SIZE
    alpha = ids["alpha"]
    # every filter at once against a plain reading of what was written
    want = []
    for i in range(120):
        task, shots = ("t1" if i % 2 == 0 else "t2"), (2 if i % 3 == 0 else 1)
        value = ((i * 7919) % 1000) / 1000.0
        if task == "t2" and shots == 1 and i not in (1, 2) and 0.2 <= value <= 0.8:
            want.append((value, key_of(i, task, shots)))
    filters = {"task": "t2", "shots": 1, "model": alpha, "outcome": "ok", "lo": 0.2, "hi": 0.8}
    got, total = ix.sample_page(filters, "-score", 0, size=1000)
    assert total == len(want) == len(got)
    assert [r["item_key"] for r in got] == [k for _, k in sorted(want, key=lambda w: (-w[0], w[1]))]
    # pages cut the same order
    first, _ = ix.sample_page(filters, "-score", 0, size=5)
    second, _ = ix.sample_page(filters, "-score", 1, size=5)
    assert [r["item_key"] for r in first + second] == [r["item_key"] for r in got[:10]]
    # outcomes: alpha failed item 1 and overflowed item 2
    failed, n = ix.sample_page({"outcome": "failed"}, "key", 0)
    assert n == 1 and failed[0]["item_key"] == key_of(1, "t2", 1) and "out of memory" in failed[0]["error"]
    over, n = ix.sample_page({"outcome": "overflow"}, "key", 0)
    assert n == 1 and over[0]["item_key"] == key_of(2, "t1", 1)
    # another metric through the JSON column: the same order as the values written
    cs, _ = ix.sample_page({"model": alpha, "task": "t1"}, "score", 0, metric="copy_ssim", size=1000)
    values = [json.loads(r["metrics"]).get("copy_ssim") for r in cs]
    assert [v for v in values if v is not None] == sorted(v for v in values if v is not None)
    assert snapshot(tmp_path / "run") == before


def test_disagreement_and_text_search(tmp_path):
    write_run(tmp_path / "run", n=40)
    ix = _index(tmp_path / "run")
    ix.refresh()
    rows, _ = ix.sample_page({}, "spread", 0, size=1000)
    spreads = [r["spread"] for r in rows if r["spread"] is not None]
    assert spreads == sorted(spreads, reverse=True) and spreads[0] > 0
    by_item = {}
    for r in rows:
        if r["score"] is not None and r["outcome"] == "ok":
            by_item.setdefault(r["item_key"], []).append(r["score"])
    filtered, n = ix.sample_page({"task": "t1"}, "spread", 0, size=1000)  # the planner's order, same result
    assert [r for r in rows if r["task"] == "t1"] == filtered and n == len(filtered)
    top = rows[0]["item_key"]
    assert abs(rows[0]["spread"] - (max(by_item[top]) - min(by_item[top]))) < 1e-12
    hits, n = ix.sample_page({"q": "ONERROR"}, "key", 0)  # answers, case-insensitive
    assert n == 2 and all("onerror" in r["answer_text"] for r in hits)
    hits, n = ix.sample_page({"q": "t2 item 7:"}, "key", 0)  # prompts (requests.jsonl)
    assert n == 2 and {r["item_key"] for r in hits} == {key_of(7, "t2", 1)}


def test_index_follows_a_growing_store_and_lives_in_the_cache(tmp_path):
    ids = write_run(tmp_path / "run", n=10, hostile=False, samples=False)
    ix = _index(tmp_path / "run")
    ix.refresh()
    assert ix.sample_page({}, "key", 0)[1] == 20
    assert not str(index_path(tmp_path / "run" / "store.sqlite")).startswith(str(tmp_path))
    mid = ids["beta"]
    with Store(tmp_path / "run" / "store.sqlite") as store:
        key = key_of(99, "t1", 1)
        store.write_batch([Response("h99", mid, "ok", "text", "late answer")], [(key, mid, "answer:0", "h99")],
                          [Score(ScoreKey(BENCHMARK, PROTOCOL, key, mid, "j", SCORER), "ok", {"acc": 0.5})])
    ix.refresh()
    rows, n = ix.sample_page({"q": "late answer"}, "key", 0)
    assert n == 1 and rows[0]["item_key"] == key and rows[0]["score"] == 0.5
    # no samples.jsonl: no groups to filter by, every row still listed
    assert ix.choices()["task"] == [] and ix.sample_page({}, "key", 0)[1] == 21
    # the same score written again (a rescore): replaced, its old text gone from the search
    with Store(tmp_path / "run" / "store.sqlite") as store:
        store.write_batch([Response("h100", mid, "ok", "text", "rescored answer")], [(key, mid, "answer:1", "h100")],
                          [Score(ScoreKey(BENCHMARK, PROTOCOL, key, mid, "j", SCORER), "ok", {"acc": 0.25})])
    ix.refresh()
    assert ix.sample_page({"q": "late answer"}, "key", 0)[1] == 0
    rows, n = ix.sample_page({"q": "rescored"}, "key", 0)
    assert n == 1 and rows[0]["score"] == 0.25 and ix.sample_page({}, "key", 0)[1] == 21


def test_undecodable_and_surrogate_text_is_replaced_not_fatal(tmp_path):
    write_run(tmp_path / "run", n=4)
    ix = _index(tmp_path / "run")
    ix.refresh()
    rows, n = ix.sample_page({"q": "bad"}, "key", 0)
    assert n == 2 and rows[0]["answer_text"] == "bad \ufffd bytes"
    assert "d1?" in ix.choices()["dataset"] or any("\ufffd" in d or "?" in d for d in ix.choices()["dataset"])


def test_not_applicable_lists_the_items_a_model_was_not_asked(tmp_path):
    ids = write_run(tmp_path / "run", n=20, hostile=False, not_asked=3)
    ix = _index(tmp_path / "run")
    ix.refresh()
    rows, n = ix.sample_page({"outcome": "not applicable"}, "key", 0)
    assert n == 3 and {(r["item_key"], r["model_id"]) for r in rows} == {
        (key_of(i, "t2", 2 if i % 3 == 0 else 1), ids["beta"]) for i in (1, 3, 5)}
    assert all(r["task"] == "t2" for r in rows)
    assert ix.sample_page({"outcome": "not applicable", "model": ids["alpha"]}, "key", 0)[1] == 0
    assert ix.sample_page({"outcome": "not applicable", "task": "t1"}, "key", 0)[1] == 0


def test_headline_falls_back_to_a_metric_the_scores_carry(tmp_path):
    write_run(tmp_path / "run", n=6, hostile=False)
    ix = RunIndex(tmp_path / "run", BENCHMARK, "accuracy")  # an aggregate's name, not a per-item metric
    ix.refresh()
    assert ix.headline == "acc"
    rows, _ = ix.sample_page({"outcome": "ok"}, "score", 0)
    assert rows and all(r["score"] == json.loads(r["metrics"])["acc"] for r in rows)


def test_a_stored_refusal_is_not_applicable_never_ok(tmp_path):
    """The engine stores a refused request as an ``ok`` score with ``reason`` "refused" and no metrics
    (icl.run.execution.engine; samples.jsonl says "not applicable"): the viewer shows it under
    "not applicable", never among the ok scores or the metric choices, and a bad metric name from
    the query string pairs nothing instead of failing."""
    ids = write_run(tmp_path / "run", n=6)
    alpha = ids["alpha"]
    refused = key_of(99, "t1", 1)  # an item alpha was asked only to refuse
    with Store(tmp_path / "run" / "store.sqlite") as store:
        store.write_batch([], [], [Score(ScoreKey(BENCHMARK, PROTOCOL, refused, alpha, "", SCORER), "ok", {}, "a refusal",
                                         "refused")], [])
    ix = _index(tmp_path / "run")
    ix.refresh()
    ok, _ = ix.sample_page({"model": alpha, "outcome": "ok"}, "key", 0, size=1000)
    assert (refused, "") not in [(r["item_key"], r["judge_id"]) for r in ok]
    na, _ = ix.sample_page({"model": alpha, "outcome": "not applicable"}, "key", 0, size=1000)
    assert refused in [r["item_key"] for r in na]
    assert "acc" in ix.choices()["metric"]
    assert ix.values(alpha, 'a"b') == {}


def _store_keys(store_path, benchmark):
    with Store(store_path, readonly=True) as store:
        return set(store.read("SELECT item_key, model_id, judge_id, scorer_version FROM scores WHERE benchmark=?",
                              (benchmark,)).fetchall())


def _index_keys(ix):
    return set(ix.conn.execute("SELECT item_key, model_id, judge_id, scorer_version FROM samples").fetchall())


def test_rows_stored_in_one_clock_tick_are_all_read(tmp_path, monkeypatch):
    """Two writes whose rows carry the same ``created`` (one tick of the clock): the second one's
    rows are new to the index all the same."""
    import icl.store.sqlite as store_module

    ids = write_run(tmp_path / "run", n=6, hostile=False, samples=False)
    ix = _index(tmp_path / "run")
    ix.refresh()
    assert ix.sample_page({}, "key", 0)[1] == 12
    tick = max(r[0] for r in ix.conn.execute("SELECT created FROM samples"))
    monkeypatch.setattr(store_module.time, "time", lambda: tick)  # the clock has not moved since
    with Store(tmp_path / "run" / "store.sqlite") as store:
        key = key_of(50, "t1", 1)
        store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, key, ids["alpha"], "", SCORER), "ok",
                                        {"acc": 0.5})])
    ix.refresh()
    assert _index_keys(ix) == _store_keys(tmp_path / "run" / "store.sqlite", BENCHMARK)
    assert ix.sample_page({}, "key", 0)[1] == 13


def test_a_merge_into_an_indexed_folder_shows_every_merged_row(tmp_path):
    """A folder holding shard 0's store is indexed; ``python -m icl.run merge`` then copies shard
    1's rows into it, which carry the older ``created`` of shard 1 (it ran first): every one of
    them is in the index after the next refresh."""
    from icl.run.__main__ import main

    common = ["best50", "--fast", "--no-plots", "--no-progress", "--device", "cpu"]
    assert main([*common, "--shard", "1/2", "--out", str(tmp_path / "s1")]) == 0  # the older rows
    assert main([*common, "--shard", "0/2", "--out", str(tmp_path / "s0")]) == 0
    out = tmp_path / "out"
    out.mkdir()
    (out / "store.sqlite").write_bytes((tmp_path / "s0" / "store.sqlite").read_bytes())
    ix = RunIndex(out, "best50", None)
    ix.refresh()
    first = _index_keys(ix)
    assert first == _store_keys(out / "store.sqlite", "best50") and first
    assert main(["merge", str(out), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    merged = _store_keys(out / "store.sqlite", "best50")
    assert len(merged) == len(first) + len(_store_keys(tmp_path / "s1" / "store.sqlite", "best50"))
    ix.refresh()
    assert _index_keys(ix) == merged
    assert ix.sample_page({}, "key", 0)[1] == len(merged)


def test_a_store_put_in_place_of_the_indexed_one_is_read_whole(tmp_path):
    """Another store file at the same path (the run deleted and run again): its rows only."""
    write_run(tmp_path / "run", n=8, hostile=False, samples=False)
    ix = _index(tmp_path / "run")
    ix.refresh()
    assert ix.sample_page({}, "key", 0)[1] == 16
    write_run(tmp_path / "other", n=3, models=("gamma",), hostile=False, samples=False)
    (tmp_path / "run" / "store.sqlite").unlink()
    (tmp_path / "other" / "store.sqlite").rename(tmp_path / "run" / "store.sqlite")
    ix.refresh()
    assert _index_keys(ix) == _store_keys(tmp_path / "run" / "store.sqlite", BENCHMARK)
    assert ix.sample_page({}, "key", 0)[1] == 3


def test_rows_of_another_protocol_in_the_same_store_are_left_out(tmp_path):
    """A store may keep a benchmark's rows of an earlier protocol (a run of a new protocol never
    reuses them): the index of a run reads its own protocol's rows only; the same item and model
    under two protocols was one row or the other, whichever came last."""
    ids = write_run(tmp_path / "run", n=6, hostile=False, judged=False)
    keys = [key_of(i, "t1" if i % 2 == 0 else "t2", 2 if i % 3 == 0 else 1) for i in range(6)]
    with Store(tmp_path / "run" / "store.sqlite") as store:  # later rows of an older protocol, other values
        store.write_batch(scores=[Score(ScoreKey(BENCHMARK, "old-0", k, ids["alpha"], "", SCORER), "ok", {"acc": 7.0})
                                  for k in keys])
    mine = RunIndex(tmp_path / "run", BENCHMARK, "acc", PROTOCOL)
    mine.refresh()
    rows, total = mine.sample_page({"model": ids["alpha"]}, "key", 0, size=100)
    assert total == 6 and all(r["score"] != 7.0 for r in rows)
    old = RunIndex(tmp_path / "run", BENCHMARK, "acc", "old-0")  # the same cache file, another protocol: read anew
    old.refresh()
    rows, total = old.sample_page({"model": ids["alpha"]}, "key", 0, size=100)
    assert total == 6 and {r["score"] for r in rows} == {7.0}


def test_two_indexes_of_one_store_take_turns_and_neither_answers_from_a_stale_memo(tmp_path):
    """Two run lists in one process each hold an index of the same store (one cache file): their
    first readings at once failed one with "database is locked", and the one that found the file
    already brought up to date by the other kept answering its filters from before."""
    import threading

    write_run(tmp_path / "run", n=40, hostile=False, judged=False)
    a, b = _index(tmp_path / "run"), _index(tmp_path / "run")
    errors = []

    def read(ix):
        try:
            ix.refresh()
        except Exception as exc:  # noqa: BLE001 - the test reports any
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(ix,)) for ix in (a, b)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert errors == [] and a.choices() == b.choices()
    keys = [key_of(i, "t1", 1) for i in range(3)]
    with Store(tmp_path / "run" / "store.sqlite") as store:  # a model scored later
        store.write_batch(scores=[Score(ScoreKey(BENCHMARK, PROTOCOL, k, "late-model", "", SCORER), "ok", {"acc": 1.0})
                                  for k in keys])
    a.refresh()
    b.refresh()  # finds the file up to date: its own memo must go
    assert "late-model" in a.choices()["model"] and "late-model" in b.choices()["model"]
