"""Report pieces (CSV, rank rows, markdown, terminal summary, plots) from hand-made rows, and
the files a real run of the visual benchmark writes through them (``icl.run.outputs.files`` and the
vibe plugin's summarise / report / plots)."""

import csv
import io
import json
import math

import cv2
import numpy as np
import pytest

from icl.models import register_model
from icl.models.registry import unregister_model
from icl.report import aggregate, csv_text, jsonable, markdown_section, rank_models, rank_rows, summary_text
from icl.report.plots import qualitative_grid, rank_heatmap, task_plot, write_rgb
from icl.report.tables import RANK_COLUMNS, RESULT_COLUMNS
from icl.report.schema import common_tables
from icl.run import ModelSpec, RunConfig, run

from tests.report._rows import SPECS, hand_rows, row
from tests.run._adapters import BadShape


def _csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def _pieces(rows):
    aggs = aggregate(rows, SPECS)
    tables = rank_models(aggs, SPECS)
    results = csv_text([{c: getattr(a, c) for c in RESULT_COLUMNS} for a in aggs], RESULT_COLUMNS)
    ranks = csv_text(rank_rows(tables), RANK_COLUMNS)
    return aggs, tables, results, ranks


def test_report_pieces_from_hand_rows():
    rows = hand_rows() + [row("C", "d1", "img", "q9", dict(psnr=1.0, ssim=0.1, lpips=math.nan))]
    aggs, tables, results, ranks = _pieces(rows)
    res = _csv(results)
    assert list(res[0]) == list(RESULT_COLUMNS)
    lp = next(r for r in res if r["model"] == "C" and r["metric"] == "lpips")
    assert lp["mean"] == "nan" and lp["n_missing"] == "1" and lp["n"] == "3"  # missing, not dropped
    a_psnr = next(r for r in res if r["model"] == "A" and r["metric"] == "psnr")
    assert float(a_psnr["mean"]) == 60.0 and float(a_psnr["std"]) == 40.0  # inf capped at 100 dB
    overall = {r["model"]: float(r["rank"]) for r in _csv(ranks) if r["task"] == "*"}
    assert overall["A"] < overall["B"] < overall["C"]
    # lpips of C is missing: C ranks last on it, the metric is not left out
    lp_rank = {r["model"]: float(r["rank"]) for r in _csv(ranks) if r["task"] == "img" and r["metric"] == "lpips"}
    assert lp_rank["C"] == 3.0

    md = markdown_section(aggs, tables, ["sample q7: corrupt file /x.png"])
    assert "lpips missing for 1/3 samples: model C, task img, dataset d1, shots 1" in md
    assert "corrupt file /x.png" in md and "## Ranks, shots = 1" in md and "| C | d1 | 1 | 3 | 0 | " in md
    assert "| img | 1.17 | 2.17 | 2.67 |" in md
    lines = summary_text(tables).splitlines()
    assert lines[0].startswith("shots=1") and lines[-1].startswith("overall rank")
    assert any(ln.startswith("img") and "60.000 [1.17]" in ln for ln in lines)

    text = json.dumps(jsonable({"aggs": aggs, "x": {math.inf, 1.0}}), allow_nan=False)
    assert "NaN" not in text and "Infinity" not in text and '"mean": null' in text


def test_report_pieces_are_deterministic():
    a = _pieces(hand_rows())
    b = _pieces(list(reversed(hand_rows())))
    assert a[2:] == b[2:]
    assert markdown_section(a[0], a[1]) == markdown_section(b[0], b[1])
    assert summary_text(a[1]) == summary_text(b[1])


def test_plots_from_hand_rows(tmp_path, rng):
    rows = [row(m, f"d{i}", "seg", "q", {"miou": (i + 1) / 10 * (j + 1) / 3})
            for i in range(5) for j, m in enumerate("ABC")]
    aggs = aggregate(rows, SPECS)
    assert [p.name for p in task_plot(SPECS["seg"], aggs, 1, tmp_path / "r.png")] == ["r.png", "r.svg"]
    assert task_plot(SPECS["seg"], aggs, 2, tmp_path / "none.png") == []
    few = aggregate(hand_rows(), SPECS)  # img has one dataset: a bar chart
    assert cv2.imread(str(task_plot(SPECS["img"], few, 1, tmp_path / "bars.png")[0])) is not None
    (table,) = rank_models(few, SPECS)
    assert cv2.imread(str(rank_heatmap(table, tmp_path / "ranks.png")[0])) is not None

    dirs = []
    for q in ("d1__q1", "d2__q2"):
        d = tmp_path / "qual" / q
        for name in ("context_in_0", "context_out_0", "query", "target", "pred_k1_A", "pred_k1_B"):
            write_rgb(d / f"{name}.png", rng.integers(0, 256, (9, 13, 3), dtype=np.uint8))
        dirs.append(d)
    grid = cv2.imread(str(qualitative_grid(dirs, ["A", "B", "C"], 1, tmp_path / "grid.png")))
    # 2 samples x (context in, context out, query, A, B, C (crossed: missing), ground truth)
    # tiles of 128 + 16 label rows, 2-pixel borders
    assert grid.shape[0] == 2 * (128 + 16 + 4) and grid.shape[1] == 7 * (128 + 4)


def _config(builtin_root, out, **options):
    base = dict(tasks=("edges", "segmentation"), datasets=("scenes-a",), limit=2, qualitative=2)
    models = [ModelSpec(m) for m in ("oracle", "copy-target", "identity", "bad-shape-local")]
    return RunConfig("vibe", {**base, **options}, models, fast=True, data_root=builtin_root, out=out, progress=False)


@pytest.fixture
def bad_shape():
    register_model("bad-shape-local", BadShape)
    yield
    unregister_model("bad-shape-local")


def test_vibe_run_writes_the_report_files(builtin_root, tmp_path, bad_shape, capsys):
    out = tmp_path / "out"
    outcome = run(_config(builtin_root, out))
    assert outcome.exit_code == 1 and outcome.failed_items == 1  # the second answer of bad-shape's one batch
    for name in ("results.csv", "ranks.csv", "results.json", "report.md", "contexts.csv", "store.sqlite",
                 "plots/ranks_k1.png", "plots/task_edges_k1.png", "plots/task_segmentation_k1.png",
                 "plots/ranks_k1.svg", "plots/task_edges_k1.svg", "plots/task_segmentation_k1.svg",
                 "plots/qualitative_edges.png", "plots/qualitative_segmentation.png", "report.html"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    for p in (out / "plots").glob("*.png"):
        assert cv2.imread(str(p)) is not None, p
    grid = cv2.imread(str(out / "plots/qualitative_edges.png"))
    assert grid.shape[0] == 2 * (128 + 16 + 4) and grid.shape[1] == (3 + 4 + 1) * (128 + 4)  # 4 models

    text = (out / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    ids = {label: m["model_id"] for label, m in data["models"].items()}
    assert set(ids) == {"oracle", "copy-target", "identity", "bad-shape-local"} and len(set(ids.values())) == 4
    assert {"results": "results.csv", "vibe_results": "vibe_results.csv", "ranks": "ranks.csv"}.items() <= data["tables"].items()
    assert all((out / f).is_file() for f in data["tables"].values())
    assert data["failures"]["count"] == 1 and all("bad-shape-local" in m for m in data["failures"]["items"])
    for c in data["compute"]:
        assert c["samples_per_s"] == pytest.approx(c["samples"] / c["wall_s"]) or c["wall_s"] == 0

    with open(out / "vibe_results.csv") as f:
        res = list(csv.DictReader(f))
    assert list(res[0]) == list(RESULT_COLUMNS)
    assert {(r["model"], r["model_version"]) for r in res} == set(ids.items())  # the model_id
    bad = [r for r in res if r["model"] == "bad-shape-local"]
    assert sorted({(r["task"], r["n"], r["n_failed"]) for r in bad}) == [("edges", "1", "1"), ("segmentation", "2", "0")]
    oracle_f1 = next(r for r in res if r["model"] == "oracle" and r["metric"] == "f1")
    assert float(oracle_f1["mean"]) == 1.0 and oracle_f1["n"] == "2"

    # oracle and identity are reported, not ranked (PROTOCOL §1.4)
    with open(out / "ranks.csv") as f:
        ranks = list(csv.DictReader(f))
    assert list(ranks[0]) == list(RANK_COLUMNS)
    assert {r["model"] for r in ranks} == {"copy-target", "bad-shape-local"}

    md = (out / "report.md").read_text()
    for label, model_id in ids.items():
        assert f"- **model** `{label}`: id `{model_id}`" in md
    assert f"- **contexts.csv** SHA-256: `{data['artifacts']['contexts.csv']}`" in md
    assert "are reported but not ranked" in md and "| edges | - | " in md
    assert "## Failures (1)" in md and "returned an invalid answer" in md and "## Compute" in md
    for p in sorted((out / "plots").glob("*.png")):  # the SVG beside each figure is not linked twice
        assert f"]({p.relative_to(out).as_posix()})" in md
    stdout = capsys.readouterr().out
    assert stdout.startswith("shots=1") and "overall rank" in stdout

    # --rank-reference ranks them too: the oracle first on every task (exact edges and masks)
    ref = run(_config(builtin_root, tmp_path / "ref", rank_reference=True))
    task_ranks = {(r["task"], r["model"]): r["rank"] for r in ref.tables["ranks"] if r["metric"] == "*"}
    assert {m for _, m in task_ranks} == set(ids)
    assert all(rank == 1.0 for (task, m), rank in task_ranks.items() if m == "oracle")
    assert all(rank > 1.0 for (task, m), rank in task_ranks.items() if m != "oracle")
    assert ref.tables["vibe_results"] == outcome.tables["vibe_results"]


def test_vibe_summaries_do_not_depend_on_item_order(builtin_root, tmp_path, bad_shape):
    from icl.run.planning.setup import open_benchmark

    config = _config(builtin_root, tmp_path / "out", qualitative=0)
    outcome = run(config)
    bench = open_benchmark(config)
    bench.items()
    meta = json.loads((tmp_path / "out" / "results.json").read_text())
    bench.reference_models = {label for label, m in meta["models"].items() if m["reference"]}  # as the runner does
    by_model = {}
    for r in outcome.rows:
        by_model.setdefault(r["model"], []).append(r)
    shuffled = [r for rows in by_model.values() for r in reversed(rows)]  # model order kept
    tables = bench.summarise(shuffled)
    # the diagnostics' output changes compare two stored predictions: result_files completes them,
    # as the runner does, from the store
    from icl.run.execution import responses as R
    from icl.store import Store

    store = Store(tmp_path / "out" / "store.sqlite", create=False)
    ids = {label: m["model_id"] for label, m in meta["models"].items()}

    def answers(key):
        out = {}
        for label, model_id in ids.items():
            r = store.final_answers([key], model_id).get(key)
            if r is not None and r.status == "ok":
                out[label] = R.stored(r.kind, r.body)
        return out

    assert "context_sensitivity.csv" in bench.result_files(shuffled, answers)
    assert any(r["output_change"] is not None for r in tables["diagnostics"])
    assert tables == {k: v for k, v in outcome.tables.items() if k not in ("results", "comparisons", "reproduction")}
    # the long table and its comparisons (bootstrap intervals included) bit for bit
    assert common_tables(bench, shuffled) == {k: outcome.tables[k] for k in ("results", "comparisons")}
    assert bench.report(tables) in (tmp_path / "out" / "report.md").read_text()
    again = run(_config(builtin_root, tmp_path / "again", qualitative=0))
    for name in ("results.csv", "vibe_results.csv", "comparisons.csv", "ranks.csv", "contexts.csv"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    assert again.out_dir == tmp_path / "again"


def test_terminal_tables_keep_columns_apart_whatever_the_label_length():
    """A model label longer than the old fixed column (24-28 characters, e.g.
    ``copy-last[published_as=OpenFlamingo-9B]``) ran into the task column with no space."""
    from icl.report.tables import aligned

    label = "copy-last[published_as=OpenFlamingo-9B]"
    lines = aligned([["model", "task", "peak"], [label, "textocr", "16.67"], ["m", "clevr", "5"]], right=[2])
    assert lines[1].startswith(label + "  textocr") and lines[2].startswith("m" + " " * (len(label) + 1) + "clevr")
    assert [len(line) for line in lines] == [len(lines[1])] * 3  # the right column ends in one place
    assert lines[2].endswith("    5") and aligned([]) == []
