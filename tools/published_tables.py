"""Write the papers' per-model numbers as data: ``icl/benchmarks/{vlicl,cobsat,vibe}/published.json``.

``python tools/published_tables.py SEEDS_DIR [--out DIR]`` reads the text of the source
documents (the seeds' README lists their extraction caveats) and writes one file per benchmark
(under ``DIR``, default this repository), every value with its provenance: paper, table, row
label, column label, the value as printed and its ± as printed. Only numbers are taken. The
mapping of each table onto icl's cells (task, subset, shots, metric) and the reproduce grids are
written here, beside the parsing, so that the data files are regenerated whole, the same bytes
from the same documents. A document that does not print what the mapping expects is one line
naming the table, row and column (exit 2), and nothing is written. A second, independent entry
of a sample of every table lives in tests/benchmarks/<bench>/test_*_published*.py (typed from
the papers); tests/tools/test_published_tables.py checks this parser on the documents.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PM = re.compile(r"^\s*(-?[0-9.]+)\s*(?:\$\\pm\$\s*([0-9.]+))?\s*$")

# ---------------------------------------------------------------- VL-ICL (its appendix D.2)
VLICL_PAPER = "VL-ICL Bench (Zong, Bohdal, Hospedales, arXiv:2403.13164)"
VLICL_TABLES = {  # table -> (task, variant, metric)
    16: ("open_mi", "image", "accuracy"), 17: ("open_mi", "real_names", "accuracy"),
    18: ("operator_induction", "image", "accuracy"), 19: ("textocr", "image", "accuracy"),
    20: ("clevr", "image", "accuracy"), 21: ("matching_mi", "image", "accuracy"),  # fast matching: see notes
    22: ("operator_induction_interleaved", "image", "accuracy"), 23: ("matching_mi", "image", "accuracy"),
    24: ("cobsat", "image", "accuracy"), 25: ("cobsat", "image", "latent"), 26: ("cobsat", "image", "non_latent"),
    27: ("open_t2i_mi", "image", "accuracy"), 28: ("fast_count_t2i", "image", "accuracy"),
    29: ("fast_attr_t2i", "image", "accuracy"),
}
# icl has no "Fast Matching MiniImageNet" task (synthetic names in the matching task): Table 21
# is data only, never matched to a cell
VLICL_UNMATCHED = {21: "icl has no Fast Matching MiniImageNet task (its matching_mi is Table 23's real-name task)"}


class SourceError(ValueError):
    """A source document is missing or does not print what the mapping expects."""


def _document(seeds: Path, prefix: str) -> list[str]:
    """The lines of the seed document whose name starts with ``prefix`` (one, or an error)."""
    found = sorted(seeds.glob(f"{prefix}_*.txt"))
    if len(found) != 1:
        raise SourceError(f"{seeds}: expected one {prefix}_*.txt source document, found {len(found)}")
    return found[0].read_text(encoding="utf-8").splitlines()


def _start(lines: list[str], prefix: str, document: str) -> int:
    """The index of the first line starting with ``prefix`` (a table's caption)."""
    found = next((i for i, l in enumerate(lines) if l.startswith(prefix)), None)
    if found is None:
        raise SourceError(f"{document}: no line starts with {prefix!r}")
    return found


def _rows(lines: list[str], start: int) -> tuple[list[str], list[list[str]], int]:
    """Header columns and rows (tab-separated) of the table whose header line follows ``start``."""
    i = start + 1
    while i < len(lines) and not lines[i].startswith("Model"):
        i += 1
    if i == len(lines):
        raise SourceError(f"no header line (Model ...) after {lines[start][:40]!r}")
    header = lines[i].split("\t")[1:]
    rows = []
    i += 1
    while i < len(lines) and lines[i].strip() and "\t" in lines[i]:
        rows.append(lines[i].split("\t"))
        i += 1
    return [h.strip() for h in header], rows, i


def _cell(text: str, where: str) -> tuple[str, str]:
    """The value and its ± as printed ("27.54$\\pm$ 5.12": the ± sign's spacing varies)."""
    m = PM.match(re.sub(r"\s+", " ", text.replace("$\\pm$", " $\\pm$ ").strip()))
    if not m:
        raise SourceError(f"{where}: not a value: '{text.strip()}'")
    return m.group(1), m.group(2) or ""


def vlicl(seeds: Path) -> dict[str, Any]:
    lines = _document(seeds, "001")
    tables, values = {}, []
    paper = "VL-ICL"
    for n, (task, variant, metric) in VLICL_TABLES.items():
        start = _start(lines, f"Table {n}:", "001 (VL-ICL)")
        header, rows, _ = _rows(lines, start)
        name = f"Table {n}"
        shots = [int(h.split("-")[0]) for h in header]
        tables[name] = dict(
            title=lines[start].split(":", 1)[1].strip(), metric=metric, scale=1.0, std="over 3 seeds (ddof 0)",
            count=3, std_over="seed", columns={h: {"shots": s} for h, s in zip(header, shots)},
            cell=dict(task=task, subset=f"{variant}/detailed/direct/*/1", metric=metric),
            unmatched=VLICL_UNMATCHED.get(n, ""),
            reproduce=dict(options={"tasks": [task], "variant": variant, "seeds": [0, 1, 2],
                                    "prompt_style": "reference"}, shots=shots,
                           rows=[r[0].strip() for r in rows]))
        for r in rows:
            for h, text in zip(header, r[1:]):
                printed, std = _cell(text, f"{paper} {name}, row {r[0].strip()}, column {h}")
                values.append(dict(table=name, row=r[0].strip(), column=h, printed=printed, std_printed=std))
    differences = [dict(part=3, expected="reference:*",
                        text="prompt style {value}: the paper prompted with the reference code's layout "
                             "(--prompt-style reference)")]
    return dict(benchmark="vlicl", paper=VLICL_PAPER, short="VL-ICL", document="001_86e88a9a8d0434c5.txt",
                subset_parts=["variant", "description", "cot", "prompt", "repeat"], differences=differences,
                tables=tables, values=values, official={}, row_aliases={"InternLM-XComposer2": "InternLM-X2"})


# ---------------------------------------------------------------- CoBSAT (main-text Tables 1-4)
COBSAT_PAPER = "CoBSAT (Zeng, Kang, Chen, Koo, Lee, arXiv:2402.01293)"
COBSAT_TASKS = ["Color-I", "Background-I", "Style-I", "Action-I", "Texture-I",
                "Color-II", "Background-II", "Style-II", "Action-II", "Texture-II"]


def _numbers(text: str) -> list[str]:
    return re.findall(r"(?<![0-9])\.[0-9]+", text)


def cobsat(seeds: Path) -> dict[str, Any]:
    lines = _document(seeds, "002")
    values: list[dict[str, Any]] = []
    tables: dict[str, Any] = {}

    def add(table: str, row: str, numbers: list[str], shots: int, mode: str, variant: str, family: str) -> None:
        if len(numbers) != 10:
            raise SourceError(f"CoBSAT {table} {row}: {len(numbers)} values where 10 tasks are printed")
        for task, printed in zip(COBSAT_TASKS, numbers):
            values.append(dict(table=table, row=row, column=task, printed=printed, std_printed="",
                               cell=dict(shots=shots, subset=f"{mode}/{variant}/{family}/*", model=row.split(",")[0])))

    def block(first: str, until: str) -> list[str]:
        i = _start(lines, first, "002 (CoBSAT)")
        j = i + _start(lines[i:], until, "002 (CoBSAT)")
        return lines[i:j]

    # Table 1: Gemini, image description, T2I-ICL rows (T-ICL replaces images by text: not a cell)
    t1 = block("Model Shot Method", "Table 1:")
    add("Table 1", "Gemini, 2 shots, T2I-ICL", _numbers(t1[2]), 2, "description", "default", "gemini")
    add("Table 1", "Gemini, 4 shots, T2I-ICL", _numbers(t1[4]), 4, "description", "default", "gemini")
    # Tables 2 and 3: the two rows (✗, ✓) of each shot count are printed interleaved, one number
    # of each per line (✗ first): split them back
    for table, first, model, mode, family, variants in (
            ("Table 2", "Model Shot Precise", "SEED-LLaMA", "image", "seed", ("default", "exact")),
            ("Table 3", "Model Shot Fine-tuned", "Qwen-VL", "description", "qwen", ("default", None))):
        lines_t = block(first, table + ":")
        shot_lines: dict[int, list[str]] = {}
        shot = None
        for l in lines_t[2:]:
            m = re.match(r"^(?:\S+ )?([0-9]) ✗", l) or re.match(r"^([0-9]) ✗", l)
            if m:
                shot = int(m.group(1))
                shot_lines[shot] = []
                continue
            if l.startswith(model + " 0 ✓"):  # Table 2's 0-shot row has only ✓
                add(table, f"{model}, 0 shots, precise textual inputs", _numbers(l[len(model) + 4:]), 0, mode,
                    "exact", family)
                continue
            if shot is not None:
                shot_lines[shot] += _numbers(l)
        for s, nums in shot_lines.items():
            plain, marked = nums[0::2], nums[1::2]
            label = "precise textual inputs" if table == "Table 2" else "fine-tuned"
            add(table, f"{model}, {s} shots, without {'precise textual inputs' if table == 'Table 2' else 'fine-tuning'}",
                plain, s, mode, variants[0], family)
            row = f"{model}, {s} shots, {label}"
            if variants[1] is not None:
                add(table, row, marked, s, mode, variants[1], family)
            else:  # a fine-tuned model: printed, never a cell of a run's model
                for task, printed in zip(COBSAT_TASKS, marked):
                    values.append(dict(table=table, row=row, column=task, printed=printed, std_printed="", cell=None))
    t4 = block("Model Shot CoT", "Table 4:")
    add("Table 4", "SEED-LLaMA, 2 shots, without CoT", _numbers(t4[2]), 2, "image", "default", "seed")
    # icl's two-pass chain of thought needs description mode: the paper's CoT rows of image
    # generation are printed, never a run's cell
    cot = [("SEED-LLaMA, 2 shots, CoT", t4[3]), ("SEED-LLaMA, 4 shots, CoT", t4[5])]
    add("Table 4", "SEED-LLaMA, 4 shots, without CoT", _numbers(t4[4]), 4, "image", "default", "seed")
    for row, line in cot:
        for task, printed in zip(COBSAT_TASKS, _numbers(line)):
            values.append(dict(table="Table 4", row=row, column=task, printed=printed, std_printed="", cell=None))
    titles = {"Table 1": "T2I-ICL vs T-ICL accuracy (Gemini, image description)",
              "Table 2": "accuracy with and without precise textual inputs (SEED-LLaMA, image generation)",
              "Table 3": "accuracy of pretrained-only vs fine-tuned Qwen-VL (image description)",
              "Table 4": "accuracy with and without chain of thought (SEED-LLaMA, image generation)"}
    models = {"Table 1": ["Gemini"], "Table 2": ["SEED-LLaMA"], "Table 3": ["Qwen-VL"], "Table 4": ["SEED-LLaMA"]}
    for name, title in titles.items():
        mine = [v for v in values if v["table"] == name]
        shots = sorted({v["cell"]["shots"] for v in mine if v["cell"]})
        modes = {v["cell"]["subset"].split("/")[0] for v in mine if v["cell"]}
        if len(modes) != 1:  # one generation mode per table: its reproduce options name it
            raise SourceError(f"CoBSAT {name}: cells of {len(modes)} generation modes {sorted(modes)}")
        variants = list(dict.fromkeys(v["cell"]["subset"].split("/")[1] for v in mine if v["cell"]))
        families = sorted({v["cell"]["subset"].split("/")[2] for v in mine if v["cell"]})
        tables[name] = dict(
            title=title, metric="overall", scale=100.0, std="", count=None,
            columns={t: {"task": t} for t in COBSAT_TASKS}, cell=dict(metric="overall"), unmatched="",
            reproduce=dict(options={"tasks": COBSAT_TASKS, "gen_mode": modes.pop(), "family": families[0],
                                    "legacy_prompts": True}, variants=variants, shots=shots, rows=models[name]))
    differences = [dict(part=3, expected="legacy",
                        text="prompts {value}: drawn by derive_seed, the paper's by random.seed(123) "
                             "(--legacy-prompts)")]
    return dict(benchmark="cobsat", paper=COBSAT_PAPER, short="CoBSAT", document="002_4b17cf617cb35dd4.txt",
                subset_parts=["mode", "variant", "family", "prompts"], differences=differences, tables=tables,
                values=values, official={})


# ---------------------------------------------------------------- the visual benchmark (A.10, Table 4)
VIBE_PAPER = "Quo Vadis, Visual In-Context Learning? (Halady, Wei, Marinov, Jaus, Reiss)"
VIBE_TASKS = {"Segmentation": "segmentation", "Depth estimation": "depth", "Edge detection": "edges",
              "Object detection": "detection", "Keypoint detection": "keypoints", "Artifact removal": "artifact_removal",
              "Denoising": "denoising", "Inpainting": "inpainting", "Colorization": "colorization",
              "Style Transfer": "modality_transfer", "Flip": "flip", "Rotation": "rotation",
              "Object Removal": "object_removal"}
VIBE_METRICS = {"mIoU": "miou", "RMSE": "rmse", "Edge F1": "f1", "mAP@0.5": "ap50", "F1": "f1", "PSNR": "psnr",
                "SSIM": "ssim", "LPIPS": "lpips"}
VIBE_DATASETS = {"ATLANTIS": "atlantis", "DRAM": "dram", "NYU-D V2": "nyuv2", "SUIM": "suim", "Sea-Thru": "seathru",
                 "DeepCrack": "deepcrack", "AP-10K": "ap10k", "Caltech Birds": "cub", "LLVIP": "llvip", "OTP": "otp",
                 "CDD": "cdd", "IXI (Axial)": "ixi-axial", "IXI (Coronal)": "ixi-coronal",
                 "IXI (Sagittal)": "ixi-sagittal", "RORD": "rord"}
# the paper's "Duke" column is one of two subsets: fluid segmentation, layer edges; elsewhere unsaid
VIBE_DUKE = {"segmentation": "duke-fluid", "edges": "duke-layers"}
VIBE_ROWS = {"DELVM 1B": "delvm", "LVM": "lvm", "MAE-VQGAN": "mae-vqgan", "Painter": "painter",
             "PromptDiff.": "prompt-diffusion", "SD-VICL": "sd-vicl", "Copy target": "copy-target"}
VIBE_TABLES = range(23, 67)
# Table 4's text lost the cells of most rows (tab-free, one number a line, no column marks):
# only Copy target's row has all 14; the last number of every row is its total rank
RANK_COLUMNS = ["Sem. seg.", "Edge det.", "Depth est.", "Obj. det.", "Keyp. det.", "Inpaint", "Denoise", "Colorize",
                "Artif. rem.", "Mod. trans.", "Rot.", "Flip", "Obj. rem.", "Total"]


def _vibe_table(lines: list[str], n: int) -> tuple[str, list[str], list[list[str]], bool]:
    """Table ``n`` of the visual benchmark: its caption line (up to the metric), header columns,
    rows (label, cells) and whether lower is better. A table whose text lost its layout (Table
    66: caption, header and rows run on in one line, no tabs) is split by the known row labels
    and dataset names."""
    start = next((i for i, l in enumerate(lines) if l.startswith(f"Table {n}:")), None)
    if start is not None:
        header, rows, _ = _rows(lines, start)
        return lines[start], header, rows, lines[start + 2].strip() == "\\downarrow"
    flat = next((l for l in lines if re.match(rf"^\W*Table {n}: ", l)), None)
    m = re.match(rf"^\W*(Table {n}: .+? results by dataset \(\S+) \$\\(up|down)arrow\$ \)\. Mean \$\\pm\$ "
                 r"standard deviation\. Model (.+)$", flat or "")
    if m is None:
        raise SourceError(f"000 (the visual benchmark): no Table {n}")
    labels = "|".join(re.escape(r) for r in sorted(VIBE_ROWS, key=len, reverse=True))
    parts = re.split(rf"(?:^|\s)({labels})\s+(?=[0-9])", m.group(3))
    header, rest = [], parts[0].strip()
    while rest:  # dataset names hold spaces ("NYU-D V2"): the longest known name that starts the rest
        found = next((d for d in sorted([*VIBE_DATASETS, "Duke"], key=len, reverse=True) if rest.startswith(d)), None)
        if found is None:
            raise SourceError(f"the visual benchmark Table {n}: unknown dataset column in {rest[:40]!r}")
        header.append(found)
        rest = rest[len(found):].strip()
    rows = [[label, *re.findall(r"[0-9.]+ \$\\pm\$ [0-9.]+", cells)] for label, cells in zip(parts[1::2], parts[2::2])]
    if not rows or any(len(r) != len(header) + 1 for r in rows):
        raise SourceError(f"the visual benchmark Table {n}: rows of the run-on text do not have {len(header)} cells")
    return m.group(1), header, rows, m.group(2) == "down"


def vibe(seeds: Path) -> dict[str, Any]:
    lines = _document(seeds, "000")
    tables, values = {}, []
    paper = "the visual benchmark"
    for n in VIBE_TABLES:
        head, header, rows, lower = _vibe_table(lines, n)
        m = re.match(r"Table \d+: (.+?) results by dataset \((.+)$", head)
        if m is None or m.group(1).strip() not in VIBE_TASKS or m.group(2).strip() not in VIBE_METRICS:
            raise SourceError(f"the visual benchmark Table {n}: caption not of a known task and metric: {head[:80]!r}")
        task, metric = VIBE_TASKS[m.group(1).strip()], VIBE_METRICS[m.group(2).strip()]
        name = f"Table {n}"
        columns = {}
        for h in header:
            if h != "Duke" and h not in VIBE_DATASETS:
                raise SourceError(f"the visual benchmark {name}: unknown dataset column {h!r}")
            ds = VIBE_DUKE.get(task, "") if h == "Duke" else VIBE_DATASETS[h]
            columns[h] = {"subset": ds} if ds else {"unmatched": "the paper's Duke column does not say which "
                                                                 "Duke subset (duke-fluid or duke-layers)"}
        tables[name] = dict(
            title=f"{m.group(1).strip()} results by dataset ({m.group(2).strip()}, "
                  f"{'lower' if lower else 'higher'} is better)",
            metric=metric, scale=1.0, std="over the predictions of the model on the dataset", count=None,
            columns=columns, cell=dict(task=task, shots=1, metric=metric), unmatched="",
            reproduce=dict(options={"tasks": [task], "datasets": sorted({c["subset"] for c in columns.values()
                                                                          if "subset" in c})},
                           shots=[1], rows=[r[0].strip() for r in rows]))
        for r in rows:
            for h, text in zip(header, r[1:]):
                printed, std = _cell(text, f"{paper} {name}, row {r[0].strip()}, column {h}")
                values.append(dict(table=name, row=r[0].strip(), column=h, printed=printed, std_printed=std))
    # Table 4 (ranks)
    start = _start([l.strip() for l in lines], "Sem. seg.", "000 (the visual benchmark)")
    end = _start(lines, "Table 4:", "000 (the visual benchmark)")
    cells = [re.sub(r"\\cellcolor\d+\s*", "", l).strip() for l in lines[start:end] if l.strip()]
    cells = cells[len(RANK_COLUMNS):]
    row, got = None, {}
    for c in cells:
        if re.fullmatch(r"[0-9.]+", c):
            got[row].append(c)
        else:
            row = c
            got[row] = []
    for row, nums in got.items():
        if len(nums) == len(RANK_COLUMNS):
            for h, printed in zip(RANK_COLUMNS, nums):
                values.append(dict(table="Table 4", row=row, column=h, printed=printed, std_printed="", cell=None))
        else:
            values.append(dict(table="Table 4", row=row, column="Total", printed=nums[-1], std_printed="", cell=None))
    tables["Table 4"] = dict(
        title="ranks of the six models and copy target per task, and the average total rank", metric="rank",
        scale=1.0, std="", count=None, columns={h: {} for h in RANK_COLUMNS}, cell=None,
        unmatched="ranks: compare ranks.csv by eye (a rank depends on the models run together)",
        reproduce=dict(options={}, shots=[1], rows=list(got)))
    official = {family: row for row, family in VIBE_ROWS.items()}
    official["prompt-diffusion"] = "PromptDiff."
    return dict(benchmark="vibe", paper=VIBE_PAPER, short="the visual benchmark",
                document="000_dc0e62f326ef3b7c.txt", subset_parts=["dataset"], differences=[], tables=tables,
                values=values, official=official,
                row_aliases={"Prompt Diffusion": "PromptDiff.", "DeLVM": "DELVM 1B"})


def render(seeds: Path) -> dict[str, str]:
    """The three data files' text, by path relative to the repository root (deterministic: the
    same documents give the same bytes)."""
    out = {}
    for data in (vlicl(seeds), cobsat(seeds), vibe(seeds)):
        out[f"icl/benchmarks/{data['benchmark']}/published.json"] = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python tools/published_tables.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("seeds", metavar="SEEDS_DIR", type=Path, help="folder of the source documents' text")
    parser.add_argument("--out", type=Path, default=ROOT,
                        help="write icl/benchmarks/*/published.json under this folder (default: this repository)")
    args = parser.parse_args(argv)
    if not args.seeds.is_dir():
        print(f"published_tables: {args.seeds}: not a folder", file=sys.stderr)
        return 2
    try:
        files = render(args.seeds)
    except SourceError as e:
        print(f"published_tables: {e}", file=sys.stderr)
        return 2
    for rel, text in files.items():
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        data = json.loads(text)
        print(f"{rel}: {len(data['tables'])} tables, {len(data['values'])} values")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
