"""VIF-Bench tables from score rows (PROTOCOL §5, §6).

A row is one (model, item) of one judge (``judge`` column, the judge's label: the runner adds it,
one row per judge of the run; rows without it are one judge). The headline per item is, for each
criterion, the mean over the judges that gave it (NaN only when none did), and the average of
those six means; items are kept only when every judge of that model scored them (the source's
two-judge ensemble, shim0114/VIF-Bench summarize.py ``judge_scores``: per task the judges' mean,
tasks scored by all). Every breakdown is computed on those judge-averaged items.

Means skip NaN (a criterion the judge did not give); a failed generation is NaN everywhere
(``--failed skip``, the default: left out of every mean, counted under ``failed``) or 1 everywhere
(``--failed score1``: kept in every mean). Bins: references 1, 2, 3, 4, 5+; VIs 1, 2, 3, 4+.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from icl.benchmarks.vif.rubric import CRITERIA
from icl.benchmarks.vif.schema import CONFLICT_TYPES, VI_TYPES
from icl.report import stats

SCORES = (*CRITERIA, "average")
DEFAULT_JUDGE = "judge"
BOOTSTRAP = 10_000
REF_BINS = ("1", "2", "3", "4", "5+")
VI_BINS = ("1", "2", "3", "4+")


def ref_bin(n: int) -> str:
    return str(n) if n < 5 else "5+"


def vi_bin(n: int) -> str:
    return str(n) if n < 4 else "4+"


def _nanmean(values: Iterable[float]) -> float:
    v = np.asarray([x for x in values if x is not None], np.float64)
    v = v[~np.isnan(v)]
    return float(v.mean()) if v.size else math.nan


def _f(row: Mapping[str, Any], k: str) -> float:
    v = row.get(k)
    try:
        return float(v) if v is not None and v != "" else math.nan
    except (TypeError, ValueError):
        return math.nan


def judge_of(row: Mapping[str, Any]) -> str:
    return str(row.get("judge") or DEFAULT_JUDGE)


def mean_ci(values: Sequence[float], key: str) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of the non-NaN ``values`` (10,000 resamples,
    :func:`icl.report.stats.mean_ci` seeded by ``key``)."""
    v = np.asarray([x for x in values if not math.isnan(x)], np.float64)
    e = stats.mean_ci(v, identity=key, benchmark="vif", resamples=BOOTSTRAP)
    return e.ci_low, e.ci_high


def judged_items(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, key): scores averaged over the model's judges, items every judge scored."""
    judges: dict[str, set[str]] = defaultdict(set)
    cells: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for r in rows:
        judges[r["model"]].add(judge_of(r))
        cells[(r["model"], r["key"])][judge_of(r)] = r
    out = []
    for (model, key), by_judge in sorted(cells.items()):
        if set(by_judge) != judges[model]:
            continue
        first = next(iter(by_judge.values()))
        merged = {k: v for k, v in first.items() if k not in SCORES and k != "judge"}
        for k in (*CRITERIA, "failed", "layout_iou", "centre_in_region"):
            merged[k] = _nanmean(_f(r, k) for r in by_judge.values())
        # the average of the six judge-averaged criteria (with every judge's six valid, the mean of
        # the judges' averages, as the source computes it); NaN while no judge gave one of them
        six = [merged[c] for c in CRITERIA]
        merged["average"] = math.nan if any(math.isnan(v) for v in six) else sum(six) / len(six)
        merged["judges"] = len(by_judge)
        out.append(merged)
    return out


def _cell(rows: Sequence[Mapping[str, Any]], *where: Any) -> dict[str, Any]:
    """n, failed, the mean of each criterion and the average's 95% interval (seeded by ``where``)."""
    out: dict[str, Any] = {"n": len(rows), "failed": int(sum(_f(r, "failed") > 0 for r in rows))}
    out.update({k: _nanmean(_f(r, k) for r in rows) for k in SCORES})
    out["average_lo"], out["average_hi"] = mean_ci([_f(r, "average") for r in rows], "/".join(map(str, where)))
    return out


def _group(rows: Iterable[Mapping[str, Any]], *cols: str) -> dict[tuple, list[Mapping[str, Any]]]:
    out: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        out[tuple(r.get(c) for c in cols)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def _types(row: Mapping[str, Any], col: str) -> set[str]:
    return {t for t in str(row.get(col) or "").split("+") if t and t != "none"}


def per_judge_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, judge, variant), every row that judge scored; ``unparsed``: answers with no score read."""
    out = []
    for (m, j, v), rs in _group([{**r, "judge": judge_of(r)} for r in rows], "model", "judge", "variant").items():
        unparsed = int(sum(_f(r, "judge_parsed") == 0 and not _f(r, "failed") > 0 for r in rs))
        out.append({"model": m, "judge": j, "variant": v, **_cell(rs, m, j, v), "unparsed": unparsed})
    return out


def criteria_table(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for (m, v), rs in _group(items, "model", "variant").items():
        out.append({"model": m, "variant": v, **_cell(rs, m, v)})
    return out


def _visual(items: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in items if r.get("variant") == "visual"]


def by_vi_type(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for (m,), rs in _group(_visual(items), "model").items():
        for t in VI_TYPES:
            sub = [r for r in rs if t in _types(r, "vi_types")]
            if sub:
                out.append({"model": m, "vi_type": t, **_cell(sub, m, "vi_type", t)})
    return out


def by_count(items: Sequence[Mapping[str, Any]], col: str) -> list[dict[str, Any]]:
    """``col`` "refs" (bins 1..4, 5+) or "vis" (1..3, 4+)."""
    binner, bins = (ref_bin, REF_BINS) if col == "refs" else (vi_bin, VI_BINS)
    out = []
    for (m,), rs in _group(_visual(items), "model").items():
        for b in bins:
            sub = [r for r in rs if binner(int(r[col])) == b]
            if sub:
                out.append({"model": m, col: b, **_cell(sub, m, col, b)})
    return out


def conflict_table(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for (m,), rs in _group(_visual(items), "model").items():
        for t in CONFLICT_TYPES:
            sub = [r for r in rs if t in _types(r, "vi_types")]
            for flag in (True, False):
                part = [r for r in sub if (t in _types(r, "conflicts")) == flag]
                if part:
                    out.append({"model": m, "vi_type": t, "conflict": flag, **_cell(part, m, "conflict", t, flag)})
    return out


def variant_table(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Visual vs TI Dense/Medium/Sparse on the tasks that have text variants (per model)."""
    out = []
    for (m,), rs in _group(items, "model").items():
        subset = {r["task"] for r in rs if r.get("variant") != "visual"}
        if not subset:
            continue
        for (v,), part in _group([r for r in rs if r["task"] in subset], "variant").items():
            out.append({"model": m, "variant": v, **_cell(part, m, "subset", v)})
    return out


def spatial_table(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for (m, v), rs in _group(items, "model", "variant").items():
        iou = [_f(r, "layout_iou") for r in rs]
        measured = [x for x in iou if not math.isnan(x)]
        if measured:
            out.append({"model": m, "variant": v, "measured": len(measured), "layout_iou": _nanmean(iou),
                        "centre_in_region": _nanmean(_f(r, "centre_in_region") for r in rs)})
    return out


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing their mean rank."""
    order = np.argsort(x, kind="stable")
    r = np.empty(x.size, np.float64)
    r[order] = np.arange(1, x.size + 1)
    for v in np.unique(x):
        tie = x == v
        r[tie] = r[tie].mean()
    return r


def plcc_srcc(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if x.size < 3 or x.std() == 0 or y.std() == 0:
        return math.nan, math.nan
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float(np.corrcoef(x, y)[0, 1]), math.nan
    return float(np.corrcoef(x, y)[0, 1]), float(np.corrcoef(rx, ry)[0, 1])


def read_human(path: str) -> dict[tuple[str, str], dict[str, float]]:
    """Human scores CSV: columns ``model``, ``key`` and any of the six criteria or ``average``."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        missing = [c for c in ("model", "key") if c not in cols]
        if missing:
            raise ValueError(f"vif: human scores {path}: no column {missing[0]!r} (need model, key and criteria)")
        if not set(cols) & set(SCORES):
            raise ValueError(f"vif: human scores {path}: no criterion column (any of {', '.join(SCORES)})")
        out = {}
        for n, row in enumerate(reader, 2):
            vals = {}
            for k in SCORES:
                if row.get(k, "") != "":
                    try:
                        vals[k] = float(row[k])
                    except ValueError:
                        raise ValueError(f"vif: human scores {path}, line {n}, column {k}: {row[k]!r} is not a number") from None
            out[(row["model"], row["key"])] = vals
    return out


def reliability_table(rows: Sequence[Mapping[str, Any]], human: Optional[Mapping[tuple[str, str], Mapping[str, float]]]
                      ) -> list[dict[str, Any]]:
    """PLCC/SRCC of each judge against humans (when given) and of each pair of judges."""
    by_judge: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = defaultdict(dict)
    for r in rows:
        by_judge[judge_of(r)][(r["model"], r["key"])] = r
    out = []

    def add(a_name: str, b_name: str, a: Mapping, b: Mapping, get_b) -> None:
        for k in SCORES:
            pairs = [(_f(a[i], k), get_b(b[i], k)) for i in sorted(set(a) & set(b))]
            pairs = [(x, y) for x, y in pairs if not (math.isnan(x) or math.isnan(y))]
            if pairs:
                p, s = plcc_srcc([x for x, _ in pairs], [y for _, y in pairs])
                out.append({"a": a_name, "b": b_name, "criterion": k, "n": len(pairs), "plcc": p, "srcc": s})

    if human:
        for j, scored in sorted(by_judge.items()):
            add(j, "human", scored, human, lambda h, k: float(h.get(k, math.nan)))
    names = sorted(by_judge)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            add(a, b, by_judge[a], by_judge[b], _f)
    return out


def summarise(rows: Sequence[Mapping[str, Any]], human_csv: str = "") -> dict[str, list[dict[str, Any]]]:
    items = judged_items(rows)
    tables = {"criteria": criteria_table(items), "criteria_by_judge": per_judge_table(rows),
              "by_vi_type": by_vi_type(items), "by_refs": by_count(items, "refs"), "by_vis": by_count(items, "vis"),
              "conflict": conflict_table(items), "variants": variant_table(items), "spatial": spatial_table(items)}
    human = read_human(human_csv) if human_csv else None
    rel = reliability_table(rows, human)
    if rel:
        tables["reliability"] = rel
    return tables


def plots(tables: Mapping[str, list[dict[str, Any]]], out: Path) -> list[Path]:
    """Adherence vs cleanliness (per model mean), criteria vs #references and #VIs, conflict bars."""
    from icl.report.plots import figures as plt  # Figure objects: no pyplot state, no global backend

    paths = []
    crit = [r for r in tables.get("criteria", []) if r["variant"] == "visual"]
    if crit:
        fig, ax = plt.subplots(figsize=(4.5, 4))
        for r in crit:
            ax.scatter(r["visual_instruction_adherence"], r["visual_instruction_cleanliness"])
            ax.annotate(str(r["model"]), (r["visual_instruction_adherence"], r["visual_instruction_cleanliness"]))
        ax.set(xlabel="visual instruction adherence (1-10) \u2191", ylabel="visual instruction cleanliness (1-10) \u2191",
               xlim=(0, 10.5),
               ylim=(0, 10.5), title="adherence vs cleanliness")
        paths += _save(fig, out / "vif_tradeoff.png")
    for name, col, bins in (("by_refs", "refs", REF_BINS), ("by_vis", "vis", VI_BINS)):
        rows = tables.get(name, [])
        if not rows:
            continue
        fig, axes = plt.subplots(1, 4, figsize=(14, 3.2))
        for ax, k in zip(axes, ("reference_consistency", "visual_instruction_adherence", "visual_instruction_cleanliness",
                                "average")):
            for (m,), rs in _group(rows, "model").items():
                got = {r[col]: r[k] for r in rs}
                xs = [b for b in bins if b in got]
                ax.plot(xs, [got[b] for b in xs], marker="o", label=str(m))
            ax.set(title=k.replace("_", " "), xlabel=f"{col} (count)", ylabel="score (1-10) \u2191", ylim=(0, 10.5))
        axes[0].legend(fontsize=7)
        paths += _save(fig, out / f"vif_{name}.png")
    conf = tables.get("conflict", [])
    if conf:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        labels = [f"{r['model']}\n{r['vi_type']}/{'C' if r['conflict'] else 'no C'}" for r in conf]
        ax.bar(range(len(conf)), [r["visual_instruction_adherence"] for r in conf])
        ax.set_xticks(range(len(conf)), labels, fontsize=6)
        ax.set(ylabel="visual instruction adherence (1-10) \u2191", ylim=(0, 10.5), title="conflict vs no conflict")
        paths += _save(fig, out / "vif_conflict.png")
    return paths


def _save(fig: Any, path: Path) -> list[Path]:
    from icl.report.plots import save_figure

    fig.tight_layout()
    return save_figure(fig, path)
