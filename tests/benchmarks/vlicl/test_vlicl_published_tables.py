"""VL-ICL's published numbers (icl/benchmarks/vlicl/published.json) entered a second time: a
sample of every per-shot table (Tables 16-29 of VL-ICL Bench, Zong, Bohdal and Hospedales,
arXiv:2403.13164, appendix D.2), typed here from the paper, each with its table, row and column,
and compared with the data file; and the summary columns of Tables 2 and 3 (zero-shot, peak,
ICL efficiency) recomputed from the per-shot data and compared with the printed magnitudes
(the text of Tables 2/3 lost the efficiency signs: only magnitudes are compared)."""

from __future__ import annotations

import pytest

from icl.benchmarks.vlicl import VLICL
from icl.benchmarks.vlicl.summary import shot_summary
from icl.report import reproduction

# (table, row, column, value as printed, ± as printed); "" where the paper prints no ±
TYPED = [
    ("Table 16", "OpenFlamingo-9B", "1-Shot", "39.50", "1.22"), ("Table 16", "IDEFICS-80B", "5-Shot", "62.50", "2.00"),
    ("Table 16", "IDEFICS2-8B", "4-Shot", "61.50", "1.41"), ("Table 16", "Otter", "2-Shot", "25.00", "1.22"),
    ("Table 16", "Qwen-VL-Chat", "1-Shot", "0.50", "0.41"), ("Table 16", "Emu2-Chat", "5-Shot", "27.54", "5.12"),
    ("Table 16", "Mantis-Idefics2", "4-Shot", "84.33", "2.09"), ("Table 16", "LLaVA-OneVision-72B", "4-Shot", "98.67", "0.47"),
    ("Table 16", "InternLM-X2d5", "5-Shot", "91.00", "1.47"), ("Table 16", "GPT4V", "5-Shot", "78.00", ""),
    ("Table 17", "IDEFICS-9B", "0-Shot", "26.50", "0.00"), ("Table 17", "IDEFICS-80B", "4-Shot", "94.67", "0.62"),
    ("Table 17", "Otter", "1-Shot", "51.00", "2.16"), ("Table 17", "Qwen-VL-Chat", "0-Shot", "32.17", "0.24"),
    ("Table 17", "LLaVA-Next-7B", "4-Shot", "7.83", "1.65"), ("Table 17", "Emu2-Chat", "0-Shot", "29.89", "0.00"),
    ("Table 17", "idefics2-8b", "5-Shot", "79.83", "1.25"), ("Table 17", "LLaVA-OneVision-7B", "2-Shot", "68.17", "1.31"),
    ("Table 17", "GPT4V", "4-Shot", "90.00", ""), ("Table 17", "Mantis-Idefics2", "2-Shot", "49.33", "1.25"),
    ("Table 18", "OpenFlamingo-9B", "8-Shot", "7.78", "2.08"), ("Table 18", "IDEFICS2-8B", "2-Shot", "39.45", "6.14"),
    ("Table 18", "InternLM-X2", "1-Shot", "40.00", "10.80"), ("Table 18", "InternLM-X2", "8-Shot", "28.89", "19.83"),
    ("Table 18", "Emu2-Chat", "0-Shot", "28.56", "1.57"), ("Table 18", "VILA-7B", "4-Shot", "7.78", "0.78"),
    ("Table 18", "Phi3-Vision", "8-Shot", "54.44", "2.83"), ("Table 18", "LLaVA-OneVision-72B", "1-Shot", "75.56", "3.42"),
    ("Table 18", "GPT4V", "4-Shot", "92.00", ""), ("Table 18", "LongVA-7B", "2-Shot", "6.11", "2.83"),
    ("Table 19", "IDEFICS-9B", "8-Shot", "28.00", "1.63"), ("Table 19", "IDEFICS-80B", "2-Shot", "25.38", "2.78"),
    ("Table 19", "Otter", "4-Shot", "0.83", "0.47"), ("Table 19", "Qwen-VL-Chat", "0-Shot", "4.83", "6.84"),
    ("Table 19", "LLaVA-Next-7B", "0-Shot", "24.67", "2.25"), ("Table 19", "VILA-2.7B", "8-Shot", "18.50", "1.22"),
    ("Table 19", "Phi3-Vision", "8-Shot", "41.50", "1.78"), ("Table 19", "InternLM-X2d5", "8-Shot", "27.02", "0.24"),
    ("Table 19", "GPT4V", "0-Shot", "39.29", ""), ("Table 19", "LLaVA-OneVision-72B", "8-Shot", "51.67", "0.62"),
    ("Table 20", "IDEFICS-80B", "1-Shot", "31.16", "2.10"), ("Table 20", "IDEFICS2-8B", "8-Shot", "51.50", "1.87"),
    ("Table 20", "Otter", "1-Shot", "5.42", "1.06"), ("Table 20", "LLaVA-Next-7B", "1-Shot", "25.17", "6.64"),
    ("Table 20", "VILA-7B", "8-Shot", "34.33", "2.39"), ("Table 20", "Mantis-Idefics2", "0-Shot", "31.45", "2.18"),
    ("Table 20", "LLaVA-OneVision-72B", "8-Shot", "42.33", "0.85"), ("Table 20", "InternLM-X2d5", "1-Shot", "63.17", "1.25"),
    ("Table 20", "GPT4V", "4-Shot", "42.00", ""), ("Table 20", "Emu2-Chat", "0-Shot", "5.33", "0.24"),
    ("Table 21", "OpenFlamingo-9B", "5-Shot", "29.11", "1.30"), ("Table 21", "IDEFICS-9B", "1-Shot", "0.08", "0.12"),
    ("Table 21", "IDEFICS-80B", "2-Shot", "28.30", "1.94"), ("Table 21", "Mantis-Idefics2", "1-Shot", "51.08", "3.44"),
    ("Table 21", "InternLM-X2", "4-Shot", "0.92", "0.31"), ("Table 21", "Phi3-Vision", "5-Shot", "50.75", "1.43"),
    ("Table 21", "Emu2-Chat", "2-Shot", "36.80", "1.80"), ("Table 21", "InternLM-X2d5", "2-Shot", "46.75", "0.00"),
    ("Table 21", "LLaVA-OneVision-72B", "5-Shot", "70.33", "0.66"), ("Table 21", "GPT4V", "2-Shot", "48.75", ""),
    ("Table 22", "IDEFICS-80B", "1-Shot", "36.67", "1.21"), ("Table 22", "IDEFICS2-8B", "0-Shot", "38.33", "0.00"),
    ("Table 22", "Emu2-Chat", "8-Shot", "7.62", "1.83"), ("Table 22", "Phi3-Vision", "8-Shot", "27.78", "3.14"),
    ("Table 22", "LongVA-7B", "4-Shot", "4.45", "3.14"), ("Table 22", "Mantis-Idefics2", "8-Shot", "7.22", "0.78"),
    ("Table 22", "LLaVA-OneVision-72B", "8-Shot", "47.78", "10.03"), ("Table 22", "InternLM-X2d5", "1-Shot", "32.22", "3.43"),
    ("Table 22", "GPT4V", "4-Shot", "74.00", ""), ("Table 22", "Qwen-VL-Chat", "1-Shot", "9.44", "0.79"),
    ("Table 23", "IDEFICS-80B", "0-Shot", "61.00", "0.00"), ("Table 23", "IDEFICS2-8B", "5-Shot", "52.92", "1.33"),
    ("Table 23", "Otter", "0-Shot", "48.75", "0.00"), ("Table 23", "InternLM-XComposer2", "4-Shot", "50.08", "1.65"),
    ("Table 23", "Qwen-VL-Chat", "1-Shot", "57.32", "1.82"), ("Table 23", "Emu2-Chat", "0-Shot", "62.15", "3.28"),
    ("Table 23", "VILA-7B", "0-Shot", "77.25", "0.00"), ("Table 23", "LLaVA-OneVision-72B", "2-Shot", "93.12", "1.38"),
    ("Table 23", "InternLM-X2d5", "4-Shot", "69.17", "1.01"), ("Table 23", "GPT4V", "1-Shot", "76.00", ""),
    ("Table 24", "GILL", "1-Shot", "12.33", "1.31"), ("Table 24", "GILL", "8-Shot", "8.00", "1.63"),
    ("Table 24", "SEED-LLaMA-8B", "8-Shot", "33.67", "2.32"), ("Table 24", "SEED-LLaMA-14B", "4-Shot", "40.83", "1.65"),
    ("Table 24", "SEED-LLaMA-14B", "2-Shot", "33.33", "3.32"), ("Table 24", "Emu1-Gen", "2-Shot", "6.17", "2.72"),
    ("Table 24", "Emu1-Gen", "0-Shot", "0.33", "0.47"), ("Table 24", "Emu2-Gen", "2-Shot", "28.67", "2.01"),
    ("Table 24", "Emu2-Gen", "8-Shot", "20.83", "0.85"), ("Table 24", "SEED-LLaMA-8B", "0-Shot", "0.50", "0.41"),
    ("Table 25", "GILL", "8-Shot", "72.33", "0.85"), ("Table 25", "GILL", "0-Shot", "7.67", "0.24"),
    ("Table 25", "SEED-LLaMA-8B", "1-Shot", "38.50", "1.47"), ("Table 25", "SEED-LLaMA-14B", "8-Shot", "57.17", "1.84"),
    ("Table 25", "Emu1-Gen", "8-Shot", "82.00", "0.00"), ("Table 25", "Emu1-Gen", "2-Shot", "71.00", "0.71"),
    ("Table 25", "Emu2-Gen", "4-Shot", "81.50", "0.41"), ("Table 25", "Emu2-Gen", "1-Shot", "43.83", "4.33"),
    ("Table 25", "SEED-LLaMA-14B", "0-Shot", "15.17", "0.62"), ("Table 25", "SEED-LLaMA-8B", "4-Shot", "49.50", "0.82"),
    ("Table 26", "GILL", "0-Shot", "19.33", "0.24"), ("Table 26", "GILL", "8-Shot", "15.83", "2.78"),
    ("Table 26", "SEED-LLaMA-8B", "1-Shot", "47.33", "4.03"), ("Table 26", "SEED-LLaMA-14B", "0-Shot", "82.67", "0.24"),
    ("Table 26", "SEED-LLaMA-14B", "8-Shot", "80.83", "0.85"), ("Table 26", "Emu1-Gen", "1-Shot", "11.17", "0.47"),
    ("Table 26", "Emu1-Gen", "0-Shot", "26.50", "0.41"), ("Table 26", "Emu2-Gen", "0-Shot", "62.00", "0.41"),
    ("Table 26", "Emu2-Gen", "8-Shot", "29.33", "1.43"), ("Table 26", "SEED-LLaMA-8B", "8-Shot", "63.33", "2.01"),
    ("Table 27", "GILL", "1-Shot", "16.00", "2.27"), ("Table 27", "GILL", "5-Shot", "14.33", "2.25"),
    ("Table 27", "SEED-LLaMA-8B", "4-Shot", "16.00", "2.12"), ("Table 27", "SEED-LLaMA-14B", "0-Shot", "0.75", "0.25"),
    ("Table 27", "SEED-LLaMA-14B", "5-Shot", "21.00", "3.00"), ("Table 27", "Emu1-Gen", "1-Shot", "31.50", "1.87"),
    ("Table 27", "Emu2-Gen", "4-Shot", "37.00", "1.22"), ("Table 27", "Emu2-Gen", "5-Shot", "34.50", "0.00"),
    ("Table 27", "Anole-7B", "1-Shot", "11.00", "2.86"), ("Table 27", "Anole-7B", "5-Shot", "0.17", "0.24"),
    ("Table 28", "GILL", "0-Shot", "34.17", "2.36"), ("Table 28", "GILL", "2-Shot", "3.33", "2.36"),
    ("Table 28", "SEED-LLaMA-8B", "1-Shot", "50.00", "6.12"), ("Table 28", "SEED-LLaMA-8B", "5-Shot", "56.67", "6.24"),
    ("Table 28", "SEED-LLaMA-14B", "4-Shot", "51.57", "3.25"), ("Table 28", "SEED-LLaMA-14B", "0-Shot", "41.26", "1.25"),
    ("Table 28", "Emu1-Gen", "4-Shot", "47.81", "3.94"), ("Table 28", "Emu1-Gen", "1-Shot", "39.55", "4.51"),
    ("Table 28", "Emu2-Gen", "5-Shot", "59.25", "5.23"), ("Table 28", "Emu2-Gen", "0-Shot", "44.17", "4.32"),
    ("Table 29", "GILL", "0-Shot", "20.50", "1.08"), ("Table 29", "GILL", "2-Shot", "4.67", "1.43"),
    ("Table 29", "SEED-LLaMA-8B", "2-Shot", "34.33", "0.62"), ("Table 29", "SEED-LLaMA-8B", "5-Shot", "32.17", "1.03"),
    ("Table 29", "SEED-LLaMA-14B", "5-Shot", "35.59", "3.09"), ("Table 29", "SEED-LLaMA-14B", "2-Shot", "33.57", "2.01"),
    ("Table 29", "Emu1-Gen", "1-Shot", "24.11", "6.26"), ("Table 29", "Emu1-Gen", "4-Shot", "29.14", "5.98"),
    ("Table 29", "emu2-gen", "4-Shot", "34.00", "2.27"), ("Table 29", "emu2-gen", "0-Shot", "26.50", "1.78"),
]

# Tables 2 and 3: (task, table of its per-shot numbers, row, zero-shot, peak, |efficiency|) as printed
SUMMARIES = [
    ("open_mi", "Table 16", "OpenFlamingo-9B", 0.0, 58.2, 46.2),
    ("open_mi", "Table 16", "LLaVA-OneVision-72B", 0.0, 98.7, 68.4),
    ("open_mi", "Table 16", "InternLM-X2d5", 0.0, 91.0, 62.7),
    ("clevr", "Table 20", "IDEFICS2-8B", 2.0, 51.5, 43.0),
    ("clevr", "Table 20", "Mantis-Idefics2", 31.4, 40.2, 3.9),
    ("clevr", "Table 20", "InternLM-X2d5", 6.0, 63.2, 47.5),
    ("operator_induction", "Table 18", "Phi3-Vision", 0.0, 54.4, 46.8),
    ("operator_induction", "Table 18", "Otter", 21.7, 21.7, 10.0),
    ("operator_induction", "Table 18", "GPT4V", 24.0, 92.0, 59.0),
    ("textocr", "Table 19", "LLaVA-Next-7B", 24.7, 24.7, 23.0),
    ("textocr", "Table 19", "Phi3-Vision", 8.0, 41.5, 28.9),
    ("operator_induction_interleaved", "Table 22", "IDEFICS2-8B", 38.3, 38.3, 18.1),
    ("operator_induction_interleaved", "Table 22", "GPT4V", 36.0, 74.0, 32.2),
    ("matching_mi (fast)", "Table 21", "VILA-7B", 0.0, 49.9, 44.6),
    ("matching_mi (fast)", "Table 21", "LLaVA-OneVision-72B", 0.0, 70.3, 50.8),
    # Table 3 (text-to-image)
    ("open_t2i_mi", "Table 27", "Emu2-Gen", 0.0, 37.0, 28.6),
    ("open_t2i_mi", "Table 27", "GILL", 0.0, 16.0, 13.6),
    ("cobsat", "Table 24", "SEED-LLaMA-14B", 5.5, 43.8, 30.7),
    ("cobsat", "Table 24", "Emu1-Gen", 0.3, 9.7, 7.1),
    ("fast_count_t2i", "Table 28", "GILL", 34.2, 34.2, 26.3),
    ("fast_count_t2i", "Table 28", "SEED-LLaMA-14B", 41.3, 51.6, 1.9),
    ("fast_attr_t2i", "Table 29", "SEED-LLaMA-8B", 21.0, 34.3, 10.5),
    ("fast_attr_t2i", "Table 29", "emu2-gen", 26.5, 34.0, 0.2),
]


@pytest.fixture(scope="module")
def published() -> reproduction.Published:
    p = reproduction.load(VLICL)
    assert p is not None and p.benchmark == "vlicl"
    return p


def _entry(p: reproduction.Published, table: str, row: str, column: str) -> reproduction.Value:
    found = [v for v in p.values if (v.table, v.row, v.column) == (table, row, column)]
    assert len(found) == 1, (table, row, column)
    return found[0]


def test_every_per_shot_table_is_in_the_file_and_typed_here(published: reproduction.Published) -> None:
    tables = {f"Table {n}" for n in range(16, 30)}
    assert set(published.tables) == tables
    for t in tables:
        assert sum(1 for e in TYPED if e[0] == t) >= 10, t


@pytest.mark.parametrize("table,row,column,printed,std", TYPED)
def test_typed_value_matches_the_file(published: reproduction.Published, table: str, row: str, column: str,
                                      printed: str, std: str) -> None:
    v = _entry(published, table, row, column)
    assert (v.printed, v.std_printed) == (printed, std)
    assert v.value == pytest.approx(float(printed))


def test_table_sizes(published: reproduction.Published) -> None:
    """Rows x 5 shot columns per table, as printed (Table 16: 17 models; Table 27: 6; ...)."""
    rows = {"Table 16": 17, "Table 17": 13, "Table 18": 17, "Table 19": 17, "Table 20": 17, "Table 21": 16,
            "Table 22": 17, "Table 23": 17, "Table 24": 5, "Table 25": 5, "Table 26": 5, "Table 27": 6,
            "Table 28": 5, "Table 29": 5}
    for table, n in rows.items():
        assert sum(1 for v in published.values if v.table == table) == 5 * n, table


@pytest.mark.parametrize("task,table,row,zero,peak,eff", SUMMARIES)
def test_tables_2_and_3_follow_from_the_per_shot_tables(published: reproduction.Published, task: str, table: str,
                                                          row: str, zero: float, peak: float, eff: float) -> None:
    mine = [v for v in published.values if v.table == table and v.row == row]
    shots = [int(v.column.split("-")[0]) for v in mine]
    s = shot_summary(shots, [v.value for v in mine])
    assert s["zero_shot"] == pytest.approx(zero, abs=0.051)
    assert s["peak"] == pytest.approx(peak, abs=0.051)
    assert abs(s["efficiency"]) == pytest.approx(eff, abs=0.11)  # the text lost the signs; Tables 2/3 round to 0.1


def test_cells_and_rows(published: reproduction.Published) -> None:
    v = _entry(published, "Table 18", "Qwen-VL-Chat", "2-Shot")
    assert v.cell == dict(task="operator_induction", subset="image/detailed/direct/*/1", metric="accuracy",
                          shots=2, model="Qwen-VL-Chat")
    assert _entry(published, "Table 17", "GPT4V", "0-Shot").cell["subset"] == "real_names/detailed/direct/*/1"
    assert _entry(published, "Table 21", "GPT4V", "1-Shot").cell is None  # no fast-matching task in icl
    assert _entry(published, "Table 25", "GILL", "1-Shot").cell["metric"] == "latent"
    assert published.row_name("idefics2-8b") == "IDEFICS2-8B" and published.row_name("EMU2-GEN") == "Emu2-Gen"
    assert published.row_name("InternLM-XComposer2") == "InternLM-X2" and published.row_name("Llama") is None
