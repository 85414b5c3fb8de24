"""Cache keys carry the model's whole identity; rescore equals the run byte for byte."""

import csv
import io
import sqlite3

from icl.run import ModelSpec, RunConfig, rescore, run


def _config(out, data, **kw):
    return RunConfig("vibe", options=dict(tasks=("segmentation", "denoising"), datasets=("scenes-a",), limit=3),
                     models=[ModelSpec("oracle"), ModelSpec("copy-target")], fast=True, data_root=data, out=out,
                     plots=False, progress=False, **kw)


def _quiet(config):
    return run(config, stdout=io.StringIO(), stderr=io.StringIO())


def _planned(out):
    import json

    return json.loads((out / "results.json").read_text())["plan"]["items"]


def _results(out):
    with open(out / "vibe_results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_other_precision_computes_anew_and_both_are_kept(tmp_path, builtin_root):
    out = tmp_path / "run"
    first = _quiet(_config(out, builtin_root))
    n = first.stats.computed
    # 2 tasks x 3 queries, and the context-sensitivity items of the diagnostics (icl.benchmarks.vibe.diagnostics)
    assert n == 2 * _planned(out) >= 2 * 2 * 3 and first.exit_code == 0
    fp32_ids = {r["model_version"] for r in _results(out)}
    again = _quiet(_config(out, builtin_root))
    assert again.stats.computed == 0 and again.stats.skipped == n and again.stats.model_calls == 0
    bf16 = _quiet(_config(out, builtin_root, dtype="bf16"))
    assert bf16.stats.computed == n and bf16.stats.skipped == 0 and bf16.stats.model_calls > 0
    rows = _results(out)
    assert {r["model_version"] for r in rows}.isdisjoint(fp32_ids)  # nothing relabelled
    with sqlite3.connect(out / "store.sqlite") as db:
        precisions = sorted(r[0] for r in db.execute("SELECT json_extract(identity, '$.precision') FROM models"))
        assert precisions == ["bf16", "bf16", "fp32", "fp32"]
        assert db.execute("SELECT COUNT(*) FROM scores WHERE status='ok'").fetchone()[0] == 2 * n
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 2 * n
    # the oracle's bf16 answer x/255 decodes to the same image: equal scores under a new key
    by = lambda rs: {(r["model"], r["task"], r["metric"]): r["mean"] for r in rs}
    assert by(rows) == by(_results_of(first))


def _results_of(outcome):
    return [{k: str(v) if not isinstance(v, float) else repr(v) for k, v in r.items()}
            for r in outcome.tables["vibe_results"]]


def test_rescore_reproduces_every_table_byte_for_byte(tmp_path, builtin_root):
    out = tmp_path / "run"
    _quiet(_config(out, builtin_root))
    before = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    assert {"results.csv", "ranks.csv", "contexts.csv"} <= set(before)
    outcome = rescore(out, stdout=io.StringIO(), stderr=io.StringIO())
    assert outcome.exit_code == 0 and outcome.stats.model_calls == 0 and outcome.stats.computed == 2 * _planned(out)
    assert {"diagnostics.csv", "context_sensitivity.csv"} <= set(before)
    after = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    assert after == before


def test_rescore_of_a_folder_without_results_is_a_config_error(tmp_path):
    from icl.run.errors import ConfigError
    import pytest

    with pytest.raises(ConfigError, match="results.json"):
        rescore(tmp_path)
