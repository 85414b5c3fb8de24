"""The visual benchmark's plan (icl.benchmarks.vibe.plan) and its items: queries, contexts,
the frozen contexts.csv, item keys."""

import csv

import pytest

from icl.benchmarks.vibe.benchmark import Vibe
from icl.benchmarks.vibe.plan import PlanError, context_hash, make_plan, qualitative
from icl.data.contexts import write_context_csv


def _plan(root, tasks=("edges",), datasets=None, shots=(1,), limit=None, seed=0):
    return make_plan(tasks, datasets, shots, limit, seed, root, True)


def _vibe(root, **options):
    return Vibe({"tasks": ("edges",), **options, "fast": True, "data_root": root})


def test_plan_limit_shots_and_context_csv(builtin_root, tmp_path):
    plan = _plan(builtin_root, limit=2, shots=(3, 1, 3))
    assert plan.shots == [1, 3] and plan.seed == 0
    assert [(g.dataset, g.task) for g in plan.groups] == [("scenes-a", "edges"), ("scenes-b", "edges")]
    for g in plan.groups:
        assert len(g.queries) == 2 and g.queries == sorted(g.queries)
        for q in g.queries:
            assert len(g.contexts[q]) == 3 and q not in g.contexts[q] and len(set(g.contexts[q])) == 3
    sha = write_context_csv(plan.context_rows, tmp_path / "a.csv")
    with open(tmp_path / "a.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 3 and {r["protocol"] for r in rows} == {"vibe-1"}
    assert len(qualitative(plan.groups, 1)) == 1 and len(qualitative(plan.groups, 3)) == 3
    again = _plan(builtin_root, limit=2, shots=(1, 3))
    assert write_context_csv(again.context_rows, tmp_path / "b.csv") == sha
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    other_seed = _plan(builtin_root, limit=2, shots=(1, 3), seed=1)
    assert write_context_csv(other_seed.context_rows, tmp_path / "c.csv") != sha


def test_plan_errors(builtin_root):
    with pytest.raises(PlanError, match="needs 9 contexts"):
        _plan(builtin_root, shots=(9,))
    with pytest.raises(PlanError, match="apply to none"):
        _plan(builtin_root, datasets=("photos",))
    with pytest.raises(PlanError, match="--limit"):
        _plan(builtin_root, limit=0)
    with pytest.raises(PlanError, match="--shots"):
        _plan(builtin_root, shots=(0, 1))
    with pytest.raises(PlanError, match="unknown tasks 'edgs'.*did you mean 'edges'"):
        _plan(builtin_root, tasks=("edgs",))
    assert issubclass(PlanError, ValueError)


def test_items_keys_and_artifacts(builtin_root, tmp_path):
    # the replaced-context items of the diagnostics are tested in test_vibe_diagnostics.py
    bench = _vibe(builtin_root, limit=2, shots=(1, 3), sensitivity_fraction=0)
    items = bench.items()
    assert len(items) == 2 * 2 * 2 and len({it.key for it in items}) == len(items)
    plan = bench.plan
    for it in items:
        g = it.group
        ctx = next(x for x in plan.groups if x.dataset == g["dataset"]).contexts[g["query"]][:g["shots"]]
        assert it.key.split("/")[2:] == [g["query"], f"k{g['shots']}", f"c{context_hash(ctx)}", "s0"]
        ds = plan.datasets[g["dataset"]]
        assert it.key.startswith(f"{g['dataset']}@{ds.meta.version}#{ds.content_digest()[:16]}/edges@")
    # a request shows the first K contexts; only privileged models get the answer
    req = bench.request(next(it for it in items if it.group["shots"] == 3))
    assert req.shots == 3 and req.oracle_target is None and req.task == "edges"
    assert bench.request(items[0], privileged=True).oracle_target.shape[:2] == bench.request(items[0]).target_size
    arts = bench.write_artifacts(tmp_path)
    assert set(arts) == {"contexts.csv"} and (tmp_path / "contexts.csv").is_file()
    prints = bench.fingerprints()
    assert prints.pop("lpips:alex") == (f"{bench.lpips.sha256} ({bench.lpips.source})" if bench.lpips else "missing")
    assert prints == {f"dataset:{n}": d.meta.version for n, d in sorted(plan.datasets.items())}
    # another seed changes every key; the same settings give the same keys
    assert {it.key for it in _vibe(builtin_root, limit=2, shots=(1, 3), sensitivity_fraction=0).items()} == {it.key for it in items}
    assert not {it.key for it in _vibe(builtin_root, limit=2, shots=(1, 3), seed=1, sensitivity_fraction=0).items()} & {it.key for it in items}


def test_context_hash_is_order_sensitive():
    assert context_hash(["a", "b"]) != context_hash(["b", "a"])
    assert context_hash(["a", "b"]) == context_hash(["a", "b"]) and len(context_hash([])) == 16


def _dataset_copy(dst, name, **fields):
    """The fast scenes-a, copied to ``dst`` as a dataset on disk whose meta.json says ``name``
    (and ``fields``; the text is written as is, so a JSON escape of a lone surrogate stays one)."""
    import json
    import shutil

    from icl.benchmarks.vibe.builtin import cache_path

    shutil.copytree(cache_path("scenes-a", True), dst)
    meta = {**json.loads((dst / "meta.json").read_text()), "name": name}
    text = json.dumps(meta)
    for key, raw in fields.items():
        text = text.replace(f'"{key}": {json.dumps(meta[key])}', f'"{key}": {raw}')
    (dst / "meta.json").write_text(text)


def test_the_only_dataset_refused_is_the_message_not_the_empty_plan(builtin_root, tmp_path):
    """The data failure that refused every dataset is the error (it named nothing when it
    refused the only one: "no (dataset, task) pair to run")."""
    root = tmp_path / "data"
    _dataset_copy(root / "renamed", "mine")
    with pytest.raises(PlanError) as caught:
        make_plan(None, None, (1,), 1, 0, root, False)
    text = str(caught.value)
    assert "pair to run" not in text
    assert "dataset 'renamed': meta.json names the dataset 'mine', its folder is named 'renamed'" in text
    assert f"file '{root / 'renamed' / 'meta.json'}'" in text
    _dataset_copy(root / "lone", "lone", description='"\\ud800 scenes"')  # a lone surrogate
    with pytest.raises(PlanError) as caught:
        make_plan(None, None, (1,), 1, 0, root, False)
    text = str(caught.value)  # both refusals, each naming its file
    assert "dataset 'lone': field 'description': not valid Unicode: a lone surrogate U+D800" in text
    assert f"file '{root / 'lone' / 'meta.json'}'" in text and "its folder is named 'renamed'" in text
    with pytest.raises(PlanError, match="^nothing to run: dataset 'lone': field 'description'"):
        make_plan(None, ("lone",), (1,), 1, 0, root, False)


@pytest.mark.slow
def test_the_only_dataset_refused_is_the_cli_line(builtin_root, tmp_path, capsys):
    from icl.run.__main__ import main

    root = tmp_path / "data"
    _dataset_copy(root / "lone", "lone", description='"\\ud800 scenes"')
    for check in ([], ["--check"]):
        code = main(["vibe", "--data-root", str(root), "--models", "identity", "--out", str(tmp_path / "out"),
                     "--no-plots", "--no-progress", *check])
        err = capsys.readouterr()
        assert code == 2 and "Traceback" not in err.err, err
        shown = err.err if not check else err.out
        if not check:
            assert len(err.err.strip().splitlines()) == 1, err.err
        assert "a lone surrogate U+D800" in shown and str(root / "lone" / "meta.json") in shown, shown
        assert "pair to run" not in err.err + err.out
