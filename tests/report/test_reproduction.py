"""icl.report.reproduction: which model is which paper row (only explicitly), the verdicts of
reproduction.csv on fabricated scores of known accuracy, the Welch test, synthetic data never
compared, and a whole run on a release-format data folder whose verdicts survive rescore and
merge."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from icl.report import reproduction as R
from icl.report.schema import Metric, ResultsSpec, results_rows
from icl.run.__main__ import main
from tests.benchmarks.vlicl.conftest import make_published_release

DOC = {
    "benchmark": "demo", "paper": "A paper", "short": "Demo", "official": {"fam": "Row A", "base": "Row B"},
    "row_aliases": {"Alias A": "Row A"},
    "differences": [{"part": 1, "expected": "ref*", "text": "prompt {value}: the paper used the reference prompt"}],
    "tables": {"Table 1": {"title": "t", "metric": "accuracy", "scale": 1.0, "count": 3, "std_over": "seed",
                           "columns": {"1-Shot": {"shots": 1}, "2-Shot": {"shots": 2}, "4-Shot": {"shots": 4}},
                           "cell": {"task": "t1", "subset": "image/*", "metric": "accuracy"}, "unmatched": ""}},
    "values": [
        {"table": "Table 1", "row": "Row A", "column": "1-Shot", "printed": "50.00", "std_printed": "5.00"},
        {"table": "Table 1", "row": "Row A", "column": "2-Shot", "printed": "90.00", "std_printed": "1.00"},
        {"table": "Table 1", "row": "Row A", "column": "4-Shot", "printed": "50.00", "std_printed": ""},
        {"table": "Table 1", "row": "row b", "column": "1-Shot", "printed": "10.00", "std_printed": "0.00"},
    ],
}
SPEC = ResultsSpec(task="task", subset=("variant", "prompt"), shots="shots", cluster="query",
                   metrics=(Metric("accuracy", unit="%", scale=100.0, column="correct"),))


def _scores(model: str, prompt: str, per_seed: dict[int, dict[int, int]], queries: int = 20) -> list[dict]:
    """Score rows whose accuracy per (shots, seed) is known: ``per_seed[shots][seed]`` of
    ``queries`` queries right."""
    rows = []
    for shots, seeds in per_seed.items():
        for seed, right in seeds.items():
            for q in range(queries):
                rows.append(dict(model=model, key=f"{shots}/{seed}/{q}", status="ok", task="t1", variant="image",
                                 prompt=prompt, shots=shots, seed=seed, query=f"q{q}", correct=float(q < right)))
    return rows


def _table(rows: list[dict], data: str = "release d (sha256 0)") -> list[dict]:
    return [{**r, "data": data} for r in results_rows("demo", "demo-1", rows, SPEC, {}, resamples=2000)]


def test_paper_row_only_when_said() -> None:
    p = R.parse(DOC)
    assert R.paper_row(p, "any", {"published_as": "alias a"}) == {"row": "Row A", "by": "published_as", "paper": "Demo"}
    assert R.paper_row(p, "any", {"published_as": "ROW B"})["row"] == "row b"
    with pytest.raises(ValueError, match=r"published_as='Row C': no such row in Demo's tables; rows: Row A, row b"):
        R.paper_row(p, "any", {"published_as": "Row C"})
    with pytest.raises(ValueError, match="no published numbers"):
        R.paper_row(None, "any", {"published_as": "Row A"})
    # the official checkpoint, by the family's default weights only; never a name or a folder
    assert R.paper_row(p, "fam", {"weights": "hf:default"}, ["fam"])["by"] == "official checkpoint (weights=hf:default)"
    assert R.paper_row(p, "fam", {"weights": "/w/Row A"}, ["fam"]) is None
    assert R.paper_row(p, "fam", {}, ["fam"]) is None
    assert R.paper_row(p, "Row A", {}, ["fam"]) is None
    # a weight-free baseline the file lists: by its name, with no arguments
    assert R.paper_row(p, "base", {}, ["fam"])["row"] == "Row B"
    assert R.paper_row(p, "base", {"seed": 1}, ["fam"]) is None


def test_verdicts_on_known_accuracies() -> None:
    # seeds at 45/50/55 % (1 shot), 60/60/60 % (2 shots), 50 % (4 shots); published 50 ± 5, 90 ± 1, 50
    rows = _scores("m", "ref", {1: {0: 9, 1: 10, 2: 11}, 2: {0: 12, 1: 12, 2: 12}, 4: {0: 10, 1: 10, 2: 10}})
    rows += _scores("other", "chat", {1: {0: 10, 1: 10, 2: 10}})
    table = _table(rows)
    p = R.parse(DOC)
    mapping = {"m": {"row": "Row A"}, "other": {"row": "Row A"}}
    out = R.reproduction_rows(p, mapping, table, rows, SPEC)
    cell = {(r["model"], r["shots"]): r for r in out}
    assert len(out) == 4
    one = cell[("m", 1)]
    assert one["yours"] == pytest.approx(50.0) and one["ci_low"] < 50 < one["ci_high"]
    assert one["inside_interval"] == "yes" and one["difference"] == pytest.approx(0.0)
    assert one["source"] == "Demo Table 1, row Row A, column 1-Shot" and one["published_std"] == 5.0
    # Welch: ours 45, 50, 55 (sample var 25) against 50 with population std 5 over 3 (sample var 37.5)
    assert one["test"] == "Welch t=0, df=3.85 (3 vs 3 seeds)" and one["p_value"] == pytest.approx(1.0)
    two = cell[("m", 2)]
    assert two["inside_interval"] == "no" and two["difference"] == pytest.approx(-30.0)
    assert two["p_value"] < 1e-3
    four = cell[("m", 4)]
    assert four["inside_interval"] == "yes" and four["test"] == "" and four["p_value"] == ""  # no ± printed
    other = cell[("other", 1)]
    assert other["difference"] == "not comparable: prompt chat: the paper used the reference prompt"
    assert other["inside_interval"] == "" and other["test"] == ""
    # results.csv gains the three columns on the matched rows only
    R.annotate(p, {"m": {"row": "Row A"}}, table)
    got = {(r["model"], r["shots"]): (r["published_value"], r["published_std"], r["published_source"]) for r in table}
    assert got[("m", 2)] == (90.0, 1.0, "Demo Table 1") and got[("m", 4)] == (50.0, "", "Demo Table 1")
    assert got[("other", 1)] == ("", "", "")


def test_the_test_reads_each_seed_as_results_csv_groups_it() -> None:
    """The Welch test's per-seed values come from results.csv's own grouping and reduction: on a
    pooled task (every task's rows in one results row) with a pooled ratio metric and two prompt
    lists, each seed's value is the value results.csv gives that seed's rows alone."""
    spec = ResultsSpec(task="task", subset=("variant", "prompt"), shots="shots", cluster="query", pooled_task="all",
                       metrics=(Metric("accuracy", unit="%", scale=100.0, column="hits", denominator="asked"),))
    doc = json.loads(json.dumps(DOC))
    doc["tables"]["Table 1"]["cell"]["task"] = "all"
    rows = []
    for task in ("t1", "t2"):
        for prompt in ("ref", "ref2"):
            for seed in range(3):
                for q in range(6):
                    asked = 1.0 + (q + seed) % 4  # items of unequal weight: the pooled ratio is no mean of rows
                    rows.append(dict(model="m", key=f"{task}/{prompt}/{seed}/{q}", status="ok", task=task,
                                     variant="image", prompt=prompt, shots=1, seed=seed, query=f"{task}{q}",
                                     hits=float((q * (seed + 1) + len(task)) % int(asked + 1) > 0) * asked,
                                     asked=asked))
    table = [{**r, "data": "release d"} for r in results_rows("demo", "demo-1", rows, spec, {}, resamples=200)]
    out = R.reproduction_rows(R.parse(doc), {"m": {"row": "Row A"}}, table, rows, spec)
    assert [(r["task"], r["subset"]) for r in out] == [("all", "image/ref"), ("all", "image/ref2")]
    for row in out:
        prompt = row["subset"].split("/")[1]
        mine = []
        for seed in range(3):
            alone = [r for r in rows if r["seed"] == seed]
            mine += [r["value"] for r in results_rows("demo", "demo-1", alone, spec, {}, resamples=10)
                     if (r["task"], r["subset"]) == ("all", f"image/{prompt}")]
        assert len(mine) == 3
        m = sum(mine) / 3
        t, df, p = R.welch(m, sum((x - m) ** 2 for x in mine) / 2, 3, 50.0, 25.0 * 3 / 2, 3)
        assert row["test"] == f"Welch t={t:.3g}, df={df:.3g} (3 vs 3 seeds)" and row["p_value"] == pytest.approx(p)


def test_welch_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for a, b in (([45.0, 50.0, 57.0], [60.0, 61.0, 66.0, 70.0]), ([1.0, 2.0], [1.5, 2.5, 9.0])):
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
        vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
        t, df, p = R.welch(ma, va, len(a), mb, vb, len(b))
        ref = stats.ttest_ind(a, b, equal_var=False)
        assert t == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue, rel=1e-9)


def test_synthetic_data_is_never_compared() -> None:
    rows = _scores("m", "ref", {1: {0: 10, 1: 10, 2: 10}})
    table = _table(rows, data="built-in synthetic (generator digest 0)")
    p = R.parse(DOC)
    assert R.reproduction_rows(p, {"m": {"row": "Row A"}}, table, rows, SPEC) == []
    R.annotate(p, {"m": {"row": "Row A"}}, table)
    assert all(r["published_value"] == "" for r in table)


@pytest.mark.parametrize("args", [
    ["vlicl", "--tasks", "textocr", "--seeds", "0,1", "--prompt-style", "reference",
     "--models", "copy-last:published_as=OpenFlamingo-9B"],
    ["cobsat", "--tasks", "Color-I", "--shots", "2,4", "--legacy-prompts", "true",
     "--models", "copy-last:published_as=SEED-LLaMA"],
], ids=["vlicl", "cobsat"])
def test_a_fast_run_of_a_matched_model_is_never_set_against_the_paper(tmp_path: Path, args: list[str]) -> None:
    """``--fast`` with a model matched to a paper row, in the paper's own settings (reference
    prompts, legacy prompt lists): reproduction.csv is the header alone, results.csv's published
    columns stay empty, and both reports say why."""
    out = tmp_path / "run"
    assert main([*args, "--fast", "--no-progress", "--no-plots", "--out", str(out)]) == 0
    assert (out / "reproduction.csv").read_text().splitlines() == [",".join(R.COLUMNS)]
    results = _csv(out / "results.csv")
    assert results and all("built-in synthetic" in r["data"] for r in results)
    assert all(r[c] == "" for r in results for c in R.RESULT_COLUMNS)
    md = (out / "report.md").read_text()
    assert "## Against the paper\n\nNot compared: synthetic data is never compared with the papers.\n" in md
    html = (out / "report.html").read_text()
    assert "<p>Not compared: synthetic data is never compared with the papers.</p>" in html


def test_figure_has_identity_line_and_a_point_per_comparable_cell() -> None:
    rows = _scores("m", "ref", {1: {0: 9, 1: 10, 2: 11}, 2: {0: 12, 1: 12, 2: 12}})
    out = R.reproduction_rows(R.parse(DOC), {"m": {"row": "Row A"}}, _table(rows), rows, SPEC)
    svg = R.figure_svg(out)
    assert svg.count("<circle") == 2 and "<title>identity</title>" in svg and 'stroke="#cf222e"' in svg
    assert R.figure_svg([]) == ""
    assert R.summary_line(out) == "2 cells against the paper: 1 inside your 95% interval, 1 outside, 0 not comparable"


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


@pytest.mark.slow
def test_run_rescore_and_merge_keep_the_verdicts(tmp_path: Path) -> None:
    """copy-last and frequent-answer never answer a TextOCR query of the fabricated release right
    (0 % at every shot): inside OpenFlamingo-9B's published 0.00 (Table 19), outside Qwen-VL-Chat's."""
    root = make_published_release(tmp_path / "release")
    common = ["vlicl", "--no-progress", "--data-root", str(root), "--tasks", "textocr", "--prompt-style", "reference",
              "--models", "copy-last:published_as=OpenFlamingo-9B,frequent-answer:published_as=qwen-vl-chat"]
    out = tmp_path / "run"
    assert main([*common, "--out", str(out)]) == 0
    rows = _csv(out / "reproduction.csv")
    assert len(rows) == 10 and {r["yours"] for r in rows} == {"0.0"}
    verdict = {(r["model"], r["shots"]): r for r in rows}
    for shots in ("0", "1", "2", "4", "8"):
        assert verdict[("copy-last[published_as=OpenFlamingo-9B]", shots)]["inside_interval"] == "yes"
        qwen = verdict[("frequent-answer[published_as=qwen-vl-chat]", shots)]
        assert qwen["inside_interval"] == "no" and qwen["source"].startswith("VL-ICL Table 19, row Qwen-VL-Chat")
    assert float(verdict[("frequent-answer[published_as=qwen-vl-chat]", "1")]["published"]) == 17.17
    results = _csv(out / "results.csv")
    assert {r["published_source"] for r in results if r["task"] == "textocr"} == {"VL-ICL Table 19"}
    meta = json.loads((out / "results.json").read_text())
    assert meta["models"]["frequent-answer[published_as=qwen-vl-chat]"]["published_as"] == \
        {"row": "Qwen-VL-Chat", "by": "published_as", "paper": "VL-ICL"}
    assert "Against the paper" in (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert "## Against the paper\n\n10 cells against the paper: 5 inside your 95% interval, 5 outside" in md
    assert ("| textocr | image/detailed/direct/reference:llava/1 | 1 | frequent-answer[published_as=qwen-vl-chat] | "
            "VL-ICL Table 19, row Qwen-VL-Chat, column 1-Shot | 17.17 ± 1.43 | 0 [0, 0] | -17.17 | no |") in md
    before = (out / "reproduction.csv").read_text()
    assert main(["rescore", str(out)]) == 0
    assert (out / "reproduction.csv").read_text() == before
    shards = [tmp_path / f"shard{i}" for i in range(2)]
    for i, s in enumerate(shards):
        assert main([*common, "--shard", f"{i}/2", "--out", str(s)]) == 0
    merged = tmp_path / "merged"
    assert main(["merge", str(merged), *map(str, shards)]) == 0
    assert (merged / "reproduction.csv").read_text() == before


def test_published_as_leaves_the_identity_alone() -> None:
    from icl.run.planning.config import ModelSpec
    from icl.run.planning.models import make_model

    plain = make_model(ModelSpec("copy-last", {}), "cpu")
    named = make_model(ModelSpec("copy-last", {"published_as": "GPT4V"}), "cpu")
    assert named.model_id == plain.model_id and named.identity == plain.identity


def test_unknown_row_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["vlicl", "--fast", "--no-progress", "--out", str(tmp_path / "o"), "--models",
                 "copy-last:published_as=Nobody"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "published_as='Nobody': no such row in VL-ICL's tables" in err[0]


def test_a_cell_without_a_value_gets_no_verdict() -> None:
    row = dict(benchmark="demo", task="t1", subset="image/ref", shots=1, model="m", metric="accuracy",
               value=float("nan"), ci_low=float("nan"), ci_high=float("nan"), n=0, data="release d")
    out = R.reproduction_rows(R.parse(DOC), {"m": {"row": "Row A"}}, [row])
    assert len(out) == 1 and out[0]["difference"] == "" and out[0]["inside_interval"] == ""
