"""``python -m icl.run BENCH --reproduce "Table N"``: every table of every benchmark plans its
own columns (tasks, datasets, shots) and the rows icl can name; the plan is printed; an unknown
table answers with the known ones in one line (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icl.benchmarks.registry import get_benchmark
from icl.report import reproduction
from icl.run.__main__ import add_benchmark_options, build_config, common_parser, main
from icl.run.errors import ConfigError


def _config(bench: str, *argv: str):
    cls = get_benchmark(bench)
    parser = common_parser("t")
    add_benchmark_options(parser, cls)
    args = parser.parse_args(list(argv))
    return build_config(bench, args, cls, ["t", *argv]), args



@pytest.mark.parametrize("bench", ["vlicl", "cobsat", "vibe"])
def test_every_table_plans_its_own_columns(bench: str) -> None:
    p = reproduction.load(get_benchmark(bench))
    for table, spec in p.tables.items():
        extra = ["--models", "copy-last"] if bench != "vibe" else []
        config, args = _config(bench, "--reproduce", table, *extra)
        o = config.options
        columns = spec["columns"]
        if bench == "vlicl":  # columns are shots of one task
            assert o["tasks"] == (spec["cell"]["task"],) and o["shots"] == tuple(c["shots"] for c in columns.values())
            assert o["prompt_style"] == "reference" and o["seeds"] == (0, 1, 2)
        elif bench == "cobsat":  # columns are the ten tasks; the rows' shots
            assert o["tasks"] == tuple(columns) and o["legacy_prompts"] is True
            assert set(o["shots"]) == {v.cell["shots"] for v in p.values if v.table == table and v.cell}
        elif table != "Table 4":  # columns are datasets of one task
            assert o["tasks"] == (spec["cell"]["task"],) and o["shots"] == (1,)
            assert set(o["datasets"]) == {c["subset"] for c in columns.values() if "subset" in c}
        assert args.reproduce_note.startswith(f"--reproduce {table!r}")


def test_vibe_rows_with_an_official_checkpoint_run_by_hub_name() -> None:
    config, args = _config("vibe", "--reproduce", "table 25")
    assert [m.label for m in config.models] == ["lvm[weights=hf:default]", "painter[weights=hf:default]",
                                                "prompt-diffusion[weights=hf:default]", "copy-target"]
    assert config.options["datasets"] == ("deepcrack", "duke-layers") and config.options["tasks"] == ("edges",)
    assert "not planned (weights not on the Hub: give --models mae-vqgan:weights=PATH" in args.reproduce_note
    # and each is matched to its row by the official table, never by a name
    p = reproduction.load(get_benchmark("vibe"))
    rows = [reproduction.paper_row(p, m.name, m.args, ["lvm", "painter", "prompt-diffusion"])["row"]
            for m in config.models]
    assert rows == ["LVM", "Painter", "PromptDiff.", "Copy target"]


def test_user_models_join_and_conflicts_are_refused() -> None:
    config, args = _config("vlicl", "--reproduce", "Table 20", "--models", "copy-last:published_as=GPT4V")
    assert [m.label for m in config.models] == ["copy-last[published_as=GPT4V]"]
    # the row the user's model stands for is planned, not listed as "not planned"
    assert "  your models: copy-last[published_as=GPT4V] as GPT4V" in args.reproduce_note.splitlines()
    assert not any("GPT4V" in line for line in args.reproduce_note.splitlines() if "not planned" in line)
    with pytest.raises(ConfigError, match=r"--reproduce 'Table 20' sets tasks to \('clevr',\); leave --tasks out"):
        _config("vlicl", "--reproduce", "Table 20", "--tasks", "textocr", "--models", "copy-last")
    with pytest.raises(ConfigError, match="no row of it has an official checkpoint in icl"):
        _config("vlicl", "--reproduce", "Table 20")


def test_unknown_table_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cobsat", "--reproduce", "Table 9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["icl.run: --reproduce 'Table 9': cobsat knows Table 1, Table 2, Table 3, Table 4 "
                   "(docs/reproducing.md)"]
    assert main(["best50", "--reproduce", "Table 1"]) == 2
    assert "ships no published numbers" in capsys.readouterr().err


def test_planned_items_are_the_tables_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from icl.run.planning.setup import open_benchmark

    config, _ = _config("vlicl", "--reproduce", "Table 18", "--fast", "--models", "copy-last")
    items = list(open_benchmark(config).items())
    assert {(it.group["task"], it.group["shots"]) for it in items} == {("operator_induction", s) for s in (0, 1, 2, 4, 8)}
    assert {it.group["seed"] for it in items} == {0, 1, 2}
    assert main(["vlicl", "--reproduce", "Table 18", "--fast", "--models", "copy-last", "--check", "--out",
                 str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--reproduce 'Table 18' (VL-ICL): tasks operator_induction;") and "remaining" in out
