"""Support rules of PROTOCOL §3.1 and determinism (the same episode whatever order, subset, sharding)."""

from __future__ import annotations

import numpy as np
import pytest

from icl.benchmarks.vlicl import VLICL
from icl.benchmarks.vlicl.builtin import generate
from icl.benchmarks.vlicl.episodes import build_episode, select_support
from icl.benchmarks.vlicl.records import OPERATORS, RecordError
from icl.data.seeds import rng as seeded_rng
from icl.models.requests import ChatRequest, GenerationRequest, content_hash


@pytest.fixture(scope="module")
def fast() -> VLICL:
    return VLICL({"fast": True})


@pytest.mark.parametrize("task", ["open_mi", "open_t2i_mi", "fast_count_t2i", "fast_attr_t2i"])
def test_per_class_interleaving(task: str) -> None:
    data = generate(task, 12, per_class=5)
    orders = set()
    for q in data.queries:
        label = q.get("task_label", q["answer"])
        for seed in (0, 1, 2):
            for k in (1, 2, 5):
                sup = select_support(data, q["id"], k, seed)
                assert len(sup) == 2 * k
                classes = [d.id.split("/")[0] for d in sup]
                a, b = classes[0], classes[1]
                assert a != b and label in (a, b) and {a, b} <= set(q["classes"])
                assert classes == [a, b] * k  # A, B, A, B
                for j, d in enumerate(sup):  # class c's i-th item is its i-th support image
                    assert d.images == (q["support"][classes[j]]["images"][j // 2],)
                orders.add(a == label)
    assert orders == {True, False}  # the coin flip goes both ways


def test_per_class_questions_and_answers() -> None:
    mi = generate("open_mi", 3)
    ep = build_episode(mi, "q0", 2, 0)
    assert all(d.question == "This is a" and d.answer == d.id.split("/")[0] for d in ep.support)
    real = build_episode(mi, "q0", 2, 0, real_names=True)
    assert [d.answer for d in real.support] == [mi.by_id["q0"]["support"][d.id.split("/")[0]]["real_name"]
                                                for d in ep.support]
    assert real.query.answer == mi.by_id["q0"]["real_name"]
    attr = generate("fast_attr_t2i", 2)
    ep = build_episode(attr, "q1", 2, 0)
    for d in ep.support:
        cls, i = d.id.split("/")
        assert d.question == f"Generate a {attr.by_id['q1']['support'][cls]['captions'][int(i)]}"


@pytest.mark.parametrize("task", ["operator_induction", "operator_induction_interleaved"])
def test_operator_consistency(task: str) -> None:
    data = generate(task, 30, 80)
    pool = {r["id"]: r for r in data.support}
    seen_ops = set()
    for q in data.queries:
        op = OPERATORS.index(q["operator"])
        seen_ops.add(q["operator"])
        for k in (1, 4, 8):
            sup = select_support(data, q["id"], k, 1)
            assert len({d.id for d in sup}) == k  # without replacement
            for d in sup:
                assert d.answer == pool[d.id]["answer"][op]
                assert d.images == tuple(pool[d.id]["image"])
                assert len(d.images) == (2 if task.endswith("interleaved") else 1)
    assert seen_ops == set(OPERATORS)


def test_cobsat_same_latent() -> None:
    data = generate("cobsat", 40, 8)
    for q in data.queries:
        lat = q["latent"]
        for k in (1, 2, 4, 8):
            sup = select_support(data, q["id"], k, 2)
            assert len({d.id for d in sup}) == k
            for d in sup:
                rec = next(r for r in data.support if r["id"] == d.id)
                assert rec["task"] == q["task"] and rec["latent"] == lat and rec[lat] == q[lat]
    with pytest.raises(RecordError, match="9 support records needed"):
        select_support(data, data.queries[0]["id"], 9, 0)


def test_matching_pairs() -> None:
    data = generate("matching_mi", 8, 20)
    pool = {r["id"]: r for r in data.support}
    for q in data.queries:
        sup = select_support(data, q["id"], 5, 0)
        assert len(sup) == 10
        assert [d.answer for d in sup] == ["yes", "no"] * 5
        for same, diff in zip(sup[::2], sup[1::2]):
            rid = same.id.split("/")[0]
            assert same.id == f"{rid}/same" and diff.id == f"{rid}/diff"
            assert same.images == tuple(pool[rid]["same"]["image"]) and diff.images == tuple(pool[rid]["diff"]["image"])
        assert len({d.id.split("/")[0] for d in sup}) == 5


def test_pool_sampling_and_zero_shot() -> None:
    data = generate("clevr", 5, 12)
    assert select_support(data, "query0", 0, 0) == []
    sup = select_support(data, "query0", 8, 0)
    assert len({d.id for d in sup}) == 8 and all(d.answer == data.support[int(d.id[7:])]["answer"] for d in sup)
    # per (seed, shots) its own draw; the same arguments give the same draw
    assert select_support(data, "query0", 8, 0) == sup
    assert [d.id for d in select_support(data, "query0", 8, 1)] != [d.id for d in sup]


def _hashes(bench: VLICL, items: list) -> dict[str, str]:
    return {i.key: content_hash(bench.request(i)) for i in items}


def test_same_episode_whatever_order_subset_sharding(fast: VLICL) -> None:
    assert len({i.key for i in fast.items()}) == len(list(fast.items())) == 10 * 5 * 3 * 4
    cfg = {"fast": True, "seeds": (0, 2), "queries": 2}
    plan = VLICL(cfg)
    items = list(plan.items())
    reference = _hashes(plan, items)
    shuffled = [items[i] for i in seeded_rng(0, "vlicl-test", "*", "plan", "shuffle").permutation(len(items))]
    assert _hashes(VLICL(cfg), shuffled) == reference  # another order, a fresh instance
    subset = VLICL({"fast": True, "tasks": ("cobsat", "clevr"), "seeds": (2,), "queries": 1})
    sub = _hashes(subset, list(subset.items()))
    assert sub and all(reference[k] == h for k, h in sub.items())
    for shard in range(3):  # three workers, each with its own instance and every third item
        worker = VLICL(cfg)
        mine = [i for n, i in enumerate(worker.items()) if n % 3 == shard]
        assert all(reference[k] == h for k, h in _hashes(worker, mine[::-1]).items())
    # requests are plain data of the right type
    req = {i.group["task"]: plan.request(i) for i in items}
    assert isinstance(req["clevr"], ChatRequest) and isinstance(req["cobsat"], GenerationRequest)


def test_episode_list_is_byte_identical() -> None:
    a = VLICL({"fast": True, "tasks": ("open_mi", "operator_induction", "cobsat")}).episodes_csv()
    b = VLICL({"fast": True, "tasks": ("open_mi", "operator_induction", "cobsat")}).episodes_csv()
    assert a == b
    lines = a.splitlines()
    assert lines[0] == "task,seed,shots,query_id,rank,support_id,protocol"
    # open_mi: 2k rows per (seed, shots, query); operator: k rows; cobsat: k rows
    per = {"open_mi": 2 * (1 + 2 + 4 + 5), "operator_induction": 1 + 2 + 4 + 8, "cobsat": 1 + 2 + 4 + 8}
    for task, n in per.items():
        assert sum(line.startswith(task + ",") for line in lines[1:]) == n * 3 * 4
    assert all(line.endswith(",vlicl-1") for line in lines[1:])


def test_builtin_records_do_not_depend_on_how_many() -> None:
    small, big = generate("textocr", 3, 5), generate("textocr", 9, 11)
    assert small.queries == big.queries[:3] and small.support == big.support[:5]
    for q in small.queries:
        np.testing.assert_array_equal(small.source.image(q["image"][0]), big.source.image(q["image"][0]))


@pytest.mark.parametrize("task", ["open_mi", "fast_count_t2i", "fast_attr_t2i", "cobsat", "clevr"])
def test_many_shot_data_extends_the_small_one(task: str) -> None:
    """The same episode at shot k whether or not the run also asks for 16, 32, 64 shots."""
    plain = VLICL({"fast": True, "tasks": (task,), "seeds": (1,)})
    many = VLICL({"fast": True, "tasks": (task,), "seeds": (1,), "many_shot": True})
    small = _hashes(plain, list(plain.items()))
    big = _hashes(many, [i for i in many.items() if i.group["shots"] <= 8])
    assert small == big
