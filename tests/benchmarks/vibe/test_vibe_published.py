"""The visual benchmark's published numbers (icl/benchmarks/vibe/published.json) entered a second
time: a sample of each per-model table A.10 Tables 23-42 ("Quo Vadis, Visual In-Context
Learning?", mean ± standard deviation over a model's predictions on a dataset) and of the rank
Table 4, typed here from the paper with table, row and column, and compared with the data file.
Table 4's text lost most cells: only Copy target's row is whole, and every row's last number is
its average total rank (the ranking the paper's text gives: SD-VICL, LVM, Painter, MAE-VQGAN,
DeLVM, Copy target, Prompt Diffusion)."""

from __future__ import annotations

import pytest

from icl.benchmarks.vibe.benchmark import Vibe
from icl.report import reproduction

# (table, row, column, value as printed, ± as printed)
TYPED = [
    ("Table 23", "DELVM 1B", "ATLANTIS", "0.125", "0.133"), ("Table 23", "LVM", "DRAM", "0.247", "0.232"),
    ("Table 23", "MAE-VQGAN", "DRAM", "0.411", "0.161"), ("Table 23", "Painter", "Duke", "0.035", "0.058"),
    ("Table 23", "PromptDiff.", "SUIM", "0.119", "0.094"), ("Table 23", "SD-VICL", "ATLANTIS", "0.229", "0.151"),
    ("Table 23", "SD-VICL", "NYU-D V2", "0.122", "0.069"), ("Table 23", "Copy target", "DRAM", "0.337", "0.116"),
    ("Table 23", "Copy target", "SUIM", "0.203", "0.127"), ("Table 23", "DELVM 1B", "Duke", "0.000", "0.002"),
    ("Table 24", "DELVM 1B", "NYU-D V2", "3.096", "0.907"), ("Table 24", "DELVM 1B", "Sea-Thru", "2.872", "2.665"),
    ("Table 24", "LVM", "Sea-Thru", "4.341", "4.311"), ("Table 24", "MAE-VQGAN", "NYU-D V2", "1.747", "0.767"),
    ("Table 24", "Painter", "Sea-Thru", "3.583", "1.793"), ("Table 24", "PromptDiff.", "NYU-D V2", "2.760", "0.782"),
    ("Table 24", "SD-VICL", "NYU-D V2", "1.478", "0.689"), ("Table 24", "SD-VICL", "Sea-Thru", "2.283", "1.486"),
    ("Table 24", "Copy target", "NYU-D V2", "1.596", "0.712"), ("Table 24", "Copy target", "Sea-Thru", "1.637", "1.243"),
    ("Table 25", "DELVM 1B", "DeepCrack", "0.003", "0.028"), ("Table 25", "LVM", "DeepCrack", "0.082", "0.171"),
    ("Table 25", "MAE-VQGAN", "DeepCrack", "0.289", "0.211"), ("Table 25", "MAE-VQGAN", "Duke", "0.019", "0.029"),
    ("Table 25", "Painter", "Duke", "0.030", "0.019"), ("Table 25", "PromptDiff.", "DeepCrack", "0.195", "0.141"),
    ("Table 25", "SD-VICL", "DeepCrack", "0.625", "0.225"), ("Table 25", "SD-VICL", "Duke", "0.538", "0.120"),
    ("Table 25", "Copy target", "DeepCrack", "0.037", "0.052"), ("Table 25", "Copy target", "Duke", "0.056", "0.075"),
    ("Table 26", "DELVM 1B", "AP-10K", "0.244", "0.382"), ("Table 26", "LVM", "AP-10K", "0.731", "0.438"),
    ("Table 26", "LVM", "Caltech Birds", "0.688", "0.455"), ("Table 26", "MAE-VQGAN", "LLVIP", "0.000", "0.000"),
    ("Table 26", "Painter", "Caltech Birds", "0.721", "0.435"), ("Table 26", "Painter", "LLVIP", "0.246", "0.314"),
    ("Table 26", "PromptDiff.", "AP-10K", "0.089", "0.244"), ("Table 26", "SD-VICL", "LLVIP", "0.290", "0.351"),
    ("Table 26", "Copy target", "AP-10K", "0.526", "0.499"), ("Table 26", "Copy target", "LLVIP", "0.012", "0.058"),
    ("Table 27", "DELVM 1B", "OTP", "0.041", "0.059"), ("Table 27", "LVM", "OTP", "0.087", "0.073"),
    ("Table 27", "LVM", "Caltech Birds", "0.021", "0.045"), ("Table 27", "MAE-VQGAN", "AP-10K", "0.000", "0.006"),
    ("Table 27", "Painter", "Caltech Birds", "0.034", "0.062"), ("Table 27", "PromptDiff.", "Caltech Birds", "0.001", "0.009"),
    ("Table 27", "SD-VICL", "AP-10K", "0.039", "0.063"), ("Table 27", "SD-VICL", "Caltech Birds", "0.142", "0.088"),
    ("Table 27", "SD-VICL", "OTP", "0.073", "0.116"), ("Table 27", "Copy target", "OTP", "0.011", "0.021"),
    ("Table 28", "DELVM 1B", "CDD", "11.112", "4.608"), ("Table 28", "LVM", "CDD", "14.502", "2.560"),
    ("Table 28", "MAE-VQGAN", "CDD", "12.985", "2.099"), ("Table 28", "Painter", "CDD", "15.313", "3.663"),
    ("Table 28", "PromptDiff.", "CDD", "9.904", "1.437"), ("Table 28", "SD-VICL", "CDD", "13.470", "2.454"),
    ("Table 28", "Copy target", "CDD", "9.378", "1.623"),
    ("Table 29", "DELVM 1B", "CDD", "0.327", "0.188"), ("Table 29", "LVM", "CDD", "0.386", "0.160"),
    ("Table 29", "MAE-VQGAN", "CDD", "0.358", "0.157"), ("Table 29", "Painter", "CDD", "0.517", "0.148"),
    ("Table 29", "PromptDiff.", "CDD", "0.272", "0.118"), ("Table 29", "SD-VICL", "CDD", "0.398", "0.130"),
    ("Table 29", "Copy target", "CDD", "0.246", "0.129"),
    ("Table 30", "DELVM 1B", "CDD", "0.676", "0.126"), ("Table 30", "LVM", "CDD", "0.654", "0.080"),
    ("Table 30", "MAE-VQGAN", "CDD", "0.721", "0.082"), ("Table 30", "Painter", "CDD", "0.590", "0.120"),
    ("Table 30", "PromptDiff.", "CDD", "0.842", "0.069"), ("Table 30", "SD-VICL", "CDD", "0.611", "0.099"),
    ("Table 30", "Copy target", "CDD", "0.747", "0.081"),
    ("Table 31", "DELVM 1B", "Duke", "14.669", "6.548"), ("Table 31", "LVM", "DeepCrack", "21.984", "3.596"),
    ("Table 31", "MAE-VQGAN", "Caltech Birds", "15.953", "1.984"), ("Table 31", "Painter", "AP-10K", "19.213", "3.471"),
    ("Table 31", "Painter", "DRAM", "21.154", "2.973"), ("Table 31", "PromptDiff.", "Duke", "7.818", "0.482"),
    ("Table 31", "SD-VICL", "IXI (Axial)", "23.416", "2.387"), ("Table 31", "SD-VICL", "Duke", "21.384", "2.454"),
    ("Table 31", "Copy target", "DeepCrack", "14.206", "2.747"), ("Table 31", "Copy target", "ATLANTIS", "9.117", "1.627"),
    ("Table 32", "DELVM 1B", "Sea-Thru", "21.427", "5.142"), ("Table 32", "LVM", "OTP", "24.943", "2.384"),
    ("Table 32", "MAE-VQGAN", "Sea-Thru", "27.346", "2.979"), ("Table 32", "Painter", "Sea-Thru", "10.275", "2.066"),
    ("Table 32", "Painter", "RORD", "20.097", "3.882"), ("Table 32", "PromptDiff.", "IXI (Sagittal)", "10.321", "0.247"),
    ("Table 32", "SD-VICL", "IXI (Coronal)", "23.851", "1.813"), ("Table 32", "SD-VICL", "OTP", "19.171", "6.509"),
    ("Table 32", "Copy target", "Sea-Thru", "25.947", "2.798"), ("Table 32", "Copy target", "NYU-D V2", "8.930", "1.420"),
    ("Table 33", "DELVM 1B", "IXI (Axial)", "0.331", "0.113"), ("Table 33", "LVM", "Caltech Birds", "0.511", "0.201"),
    ("Table 33", "MAE-VQGAN", "IXI (Axial)", "0.472", "0.045"), ("Table 33", "Painter", "DRAM", "0.692", "0.073"),
    ("Table 33", "Painter", "Caltech Birds", "0.707", "0.160"), ("Table 33", "PromptDiff.", "IXI (Axial)", "0.026", "0.021"),
    ("Table 33", "SD-VICL", "IXI (Axial)", "0.796", "0.044"), ("Table 33", "SD-VICL", "Duke", "0.443", "0.054"),
    ("Table 33", "Copy target", "AP-10K", "0.162", "0.082"), ("Table 33", "Copy target", "DRAM", "0.160", "0.064"),
    ("Table 34", "DELVM 1B", "OTP", "0.531", "0.399"), ("Table 34", "LVM", "OTP", "0.809", "0.136"),
    ("Table 34", "MAE-VQGAN", "Sea-Thru", "0.601", "0.121"), ("Table 34", "Painter", "IXI (Coronal)", "0.643", "0.041"),
    ("Table 34", "Painter", "Sea-Thru", "0.218", "0.054"), ("Table 34", "PromptDiff.", "IXI (Coronal)", "0.020", "0.032"),
    ("Table 34", "SD-VICL", "IXI (Coronal)", "0.860", "0.029"), ("Table 34", "SD-VICL", "IXI (Sagittal)", "0.806", "0.041"),
    ("Table 34", "Copy target", "Sea-Thru", "0.686", "0.088"), ("Table 34", "Copy target", "RORD", "0.221", "0.139"),
    ("Table 35", "DELVM 1B", "AP-10K", "0.747", "0.087"), ("Table 35", "LVM", "IXI (Axial)", "0.393", "0.036"),
    ("Table 35", "MAE-VQGAN", "CDD", "0.722", "0.074"), ("Table 35", "Painter", "DRAM", "0.377", "0.067"),
    ("Table 35", "PromptDiff.", "CDD", "0.850", "0.069"), ("Table 35", "PromptDiff.", "IXI (Axial)", "0.668", "0.012"),
    ("Table 35", "SD-VICL", "IXI (Axial)", "0.218", "0.029"), ("Table 35", "SD-VICL", "Duke", "0.422", "0.017"),
    ("Table 35", "Copy target", "Caltech Birds", "0.789", "0.084"), ("Table 35", "Copy target", "Duke", "0.550", "0.050"),
    ("Table 36", "DELVM 1B", "RORD", "0.781", "0.091"), ("Table 36", "LVM", "Sea-Thru", "0.634", "0.043"),
    ("Table 36", "MAE-VQGAN", "RORD", "0.699", "0.075"), ("Table 36", "Painter", "IXI (Coronal)", "0.263", "0.023"),
    ("Table 36", "PromptDiff.", "Sea-Thru", "0.817", "0.025"), ("Table 36", "PromptDiff.", "OTP", "0.761", "0.052"),
    ("Table 36", "SD-VICL", "IXI (Coronal)", "0.165", "0.025"), ("Table 36", "SD-VICL", "OTP", "0.351", "0.165"),
    ("Table 36", "Copy target", "SUIM", "0.722", "0.093"), ("Table 36", "Copy target", "NYU-D V2", "0.676", "0.043"),
    ("Table 37", "DELVM 1B", "Duke", "20.654", "2.885"), ("Table 37", "LVM", "Caltech Birds", "20.490", "3.060"),
    ("Table 37", "LVM", "Duke", "23.144", "1.167"), ("Table 37", "MAE-VQGAN", "DeepCrack", "17.218", "2.662"),
    ("Table 37", "Painter", "DRAM", "18.359", "2.921"), ("Table 37", "Painter", "Caltech Birds", "10.004", "4.631"),
    ("Table 37", "PromptDiff.", "IXI (Axial)", "7.498", "0.371"), ("Table 37", "SD-VICL", "IXI (Axial)", "19.919", "1.696"),
    ("Table 37", "Copy target", "AP-10K", "9.509", "1.575"), ("Table 37", "Copy target", "CDD", "9.378", "1.630"),
    ("Table 38", "DELVM 1B", "Sea-Thru", "27.992", "4.916"), ("Table 38", "LVM", "Sea-Thru", "31.000", "2.564"),
    ("Table 38", "LVM", "OTP", "23.601", "4.427"), ("Table 38", "MAE-VQGAN", "Sea-Thru", "28.766", "3.018"),
    ("Table 38", "Painter", "NYU-D V2", "9.141", "1.559"), ("Table 38", "Painter", "SUIM", "13.745", "5.656"),
    ("Table 38", "PromptDiff.", "OTP", "12.682", "1.881"), ("Table 38", "SD-VICL", "IXI (Sagittal)", "21.270", "1.743"),
    ("Table 38", "SD-VICL", "OTP", "17.279", "5.678"), ("Table 38", "Copy target", "LLVIP", "12.150", "2.102"),
    ("Table 39", "DELVM 1B", "IXI (Axial)", "0.579", "0.089"), ("Table 39", "LVM", "Caltech Birds", "0.607", "0.182"),
    ("Table 39", "MAE-VQGAN", "DRAM", "0.321", "0.122"), ("Table 39", "Painter", "DeepCrack", "0.797", "0.118"),
    ("Table 39", "Painter", "DRAM", "0.836", "0.083"), ("Table 39", "PromptDiff.", "IXI (Axial)", "0.042", "0.019"),
    ("Table 39", "SD-VICL", "IXI (Axial)", "0.808", "0.039"), ("Table 39", "SD-VICL", "Duke", "0.476", "0.050"),
    ("Table 39", "Copy target", "CDD", "0.246", "0.129"), ("Table 39", "Copy target", "Duke", "0.269", "0.055"),
    ("Table 40", "DELVM 1B", "OTP", "0.813", "0.135"), ("Table 40", "LVM", "OTP", "0.850", "0.122"),
    ("Table 40", "LVM", "Sea-Thru", "0.741", "0.077"), ("Table 40", "MAE-VQGAN", "IXI (Coronal)", "0.313", "0.044"),
    ("Table 40", "Painter", "IXI (Coronal)", "0.696", "0.056"), ("Table 40", "Painter", "SUIM", "0.511", "0.348"),
    ("Table 40", "PromptDiff.", "IXI (Sagittal)", "0.067", "0.013"), ("Table 40", "SD-VICL", "IXI (Coronal)", "0.845", "0.028"),
    ("Table 40", "SD-VICL", "IXI (Sagittal)", "0.820", "0.037"), ("Table 40", "Copy target", "OTP", "0.647", "0.240"),
    ("Table 41", "DELVM 1B", "CDD", "0.588", "0.125"), ("Table 41", "LVM", "Caltech Birds", "0.387", "0.087"),
    ("Table 41", "MAE-VQGAN", "AP-10K", "0.693", "0.063"), ("Table 41", "Painter", "DRAM", "0.213", "0.082"),
    ("Table 41", "Painter", "CDD", "0.756", "0.137"), ("Table 41", "PromptDiff.", "CDD", "0.844", "0.078"),
    ("Table 41", "PromptDiff.", "IXI (Axial)", "0.655", "0.034"), ("Table 41", "SD-VICL", "IXI (Axial)", "0.194", "0.023"),
    ("Table 41", "SD-VICL", "Duke", "0.399", "0.023"), ("Table 41", "Copy target", "DRAM", "0.766", "0.057"),
    ("Table 42", "DELVM 1B", "Sea-Thru", "0.587", "0.067"), ("Table 42", "LVM", "IXI (Coronal)", "0.257", "0.024"),
    ("Table 42", "MAE-VQGAN", "RORD", "0.679", "0.093"), ("Table 42", "Painter", "IXI (Coronal)", "0.150", "0.022"),
    ("Table 42", "Painter", "NYU-D V2", "0.733", "0.066"), ("Table 42", "PromptDiff.", "Sea-Thru", "0.831", "0.048"),
    ("Table 42", "PromptDiff.", "SUIM", "0.809", "0.065"), ("Table 42", "SD-VICL", "IXI (Coronal)", "0.157", "0.024"),
    ("Table 42", "SD-VICL", "LLVIP", "0.350", "0.051"), ("Table 42", "Copy target", "RORD", "0.773", "0.071"),
    # Table 4: Copy target's whole row, and the total rank of the others
    ("Table 4", "Copy target", "Sem. seg.", "3", ""), ("Table 4", "Copy target", "Edge det.", "4", ""),
    ("Table 4", "Copy target", "Depth est.", "1", ""), ("Table 4", "Copy target", "Obj. det.", "4", ""),
    ("Table 4", "Copy target", "Keyp. det.", "5", ""), ("Table 4", "Copy target", "Inpaint", "6", ""),
    ("Table 4", "Copy target", "Denoise", "5", ""), ("Table 4", "Copy target", "Artif. rem.", "7", ""),
    ("Table 4", "Copy target", "Rot.", "1", ""), ("Table 4", "Copy target", "Total", "6", ""),
    ("Table 4", "SD-VICL", "Total", "1", ""), ("Table 4", "LVM", "Total", "2", ""), ("Table 4", "Painter", "Total", "3", ""),
    ("Table 4", "MAE-VQGAN", "Total", "4", ""), ("Table 4", "DeLVM", "Total", "5", ""),
    ("Table 4", "Prompt Diffusion", "Total", "7", ""),
]


@pytest.fixture(scope="module")
def published() -> reproduction.Published:
    p = reproduction.load(Vibe)
    assert p is not None and p.benchmark == "vibe"
    return p


def test_every_table_is_typed_here(published: reproduction.Published) -> None:
    assert set(published.tables) == {f"Table {n}" for n in (4, *range(23, 43))}
    for t in published.tables:  # the single-column CDD tables have 7 values in all: every one is typed
        assert sum(1 for e in TYPED if e[0] == t) >= min(10, sum(1 for v in published.values if v.table == t)), t


@pytest.mark.parametrize("table,row,column,printed,std", TYPED)
def test_typed_value_matches_the_file(published: reproduction.Published, table: str, row: str, column: str,
                                      printed: str, std: str) -> None:
    found = [v for v in published.values if (v.table, v.row, v.column) == (table, row, column)]
    assert len(found) == 1
    assert (found[0].printed, found[0].std_printed) == (printed, std)


def test_cells(published: reproduction.Published) -> None:
    by = {(v.table, v.row, v.column): v for v in published.values}
    assert by[("Table 24", "SD-VICL", "Sea-Thru")].cell == dict(task="depth", shots=1, metric="rmse", subset="seathru",
                                                                model="SD-VICL")
    assert by[("Table 23", "LVM", "Duke")].cell["subset"] == "duke-fluid"
    assert by[("Table 25", "LVM", "Duke")].cell["subset"] == "duke-layers"
    assert by[("Table 31", "LVM", "Duke")].cell is None  # which Duke subset the image tables used is unsaid
    assert by[("Table 4", "Copy target", "Total")].cell is None  # ranks depend on the models run together
    assert by[("Table 41", "LVM", "IXI (Axial)")].cell["metric"] == "lpips"
    assert published.official["lvm"] == "LVM" and published.official["copy-target"] == "Copy target"
    assert published.row_name("DeLVM") == "DELVM 1B"
