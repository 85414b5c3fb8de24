"""CoBSAT tables and figures: accuracy per (model, task, shots, setting), a judge's consistency
with human labels, and accuracy against shots per task."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from icl.benchmarks.cobsat.vocab import TASKS

METRICS = ("overall", "object", "attribute", "textual", "visual")
SETTING = ("mode", "variant", "family", "prompts")
LABEL_COLUMNS = {"correct": "overall", "object": "object", "attribute": "attribute"}


def accuracy_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Accuracy in % per (model, task, shots, setting); failed answers count wrong and are shown."""
    groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if all(m in r for m in METRICS):
            groups[(r["model"], r["task"], r["shots"], *(r.get(c) for c in SETTING))].append(r)
    order = {t: i for i, t in enumerate(TASKS)}
    out = []
    for (model, task, shots, *setting), rs in sorted(groups.items(),
                                                     key=lambda kv: (kv[0][0], order.get(kv[0][1], 99), kv[0][2:])):
        row: dict[str, Any] = {"model": model, "task": task, "shots": shots, **dict(zip(SETTING, setting)),
                               "prompts_scored": len(rs), "failed": int(sum(float(r.get("failed", 0)) for r in rs))}
        for m in METRICS:
            row[m] = 100.0 * sum(float(r[m]) for r in rs) / len(rs)
        out.append(row)
    return out


def read_labels(path: Path | str) -> dict[str, dict[str, float]]:
    """Human labels: a CSV with a ``key`` column (the item key) and any of ``correct``, ``object``,
    ``attribute`` (1/0, true/false)."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            cols = set(reader.fieldnames or ())
            if "key" not in cols or not cols & set(LABEL_COLUMNS):
                raise ValueError(f"{path}: human labels need a 'key' column and one of "
                                 f"{', '.join(LABEL_COLUMNS)} (has {', '.join(sorted(cols)) or 'none'})")
            out: dict[str, dict[str, float]] = {}
            for line, r in enumerate(reader, start=2):
                labels = {}
                for col, metric in LABEL_COLUMNS.items():
                    v = (r.get(col) or "").strip().lower()
                    if v == "":
                        continue
                    if v not in ("1", "0", "true", "false"):
                        raise ValueError(f"{path}:{line}: {col} must be 1/0 or true/false, got {r[col]!r}")
                    labels[metric] = float(v in ("1", "true"))
                out[r["key"]] = labels
            return out
    except OSError as exc:
        raise ValueError(f"{path}: cannot read human labels ({exc.strerror or exc})") from None


def consistency_table(rows: Sequence[Mapping[str, Any]], labels: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """Per model and aspect: how many labelled items were judged and the fraction agreeing."""
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        human = labels.get(r["key"])
        if not human:
            continue
        for metric, value in human.items():
            if metric in r:
                t = tally[(r["model"], metric)]
                t[0] += 1
                t[1] += int(float(r[metric]) == value)
    return [{"model": m, "aspect": a, "labelled": n, "agree": k, "consistency": k / n}
            for (m, a), (n, k) in sorted(tally.items())]


def shot_curves(accuracy: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """One figure per setting: a panel per task, a line per model (overall accuracy)."""
    by_setting: dict[tuple, dict[str, dict[str, list[Mapping[str, Any]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in accuracy:
        by_setting[tuple(r.get(c) for c in SETTING)][r["task"]][r["model"]].append(r)
    if not by_setting:
        return []
    from icl.report.plots import shot_curve_panels

    return [p for setting, tasks in sorted(by_setting.items(), key=lambda kv: str(kv[0]))
            for p in shot_curve_panels({t: tasks[t] for t in TASKS if t in tasks},
                                       out / ("cobsat_shots_" + "_".join(str(v) for v in setting) + ".png"), "overall",
                                       ylabel="overall accuracy (%) \u2191")]


def judge_agreement(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """How often two judges' verdicts agree on the same answers (score rows of two runs that differ
    only in ``--judge``), per model, task and aspect: items judged by both, and the agreeing fraction."""
    other = {(r["model"], r["key"]): r for r in rows_b}
    tally: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in rows_a:
        s = other.get((r["model"], r["key"]))
        if s is None or r.get("status", "ok") != "ok" or s.get("status", "ok") != "ok":
            continue
        for m in ("overall", "object", "attribute"):
            t = tally[(r["model"], r["task"], m)]
            t[0] += 1
            t[1] += int(float(r[m]) == float(s[m]))
    order = {t: i for i, t in enumerate(TASKS)}
    return [{"model": m, "task": t, "aspect": a, "items": n, "agreement": k / n}
            for (m, t, a), (n, k) in sorted(tally.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99), kv[0][2]))]


def agreement_plot(agreement: Sequence[Mapping[str, Any]], out: Path, name: str = "cobsat_judge_agreement") -> list[Path]:
    """Bars of :func:`judge_agreement` (overall verdicts) per task, one group per model."""
    rows = [r for r in agreement if r["aspect"] == "overall"]
    if not rows:
        return []
    from icl.report.plots import figures as plt  # Figure objects, never pyplot state
    from icl.report.plots import save_figure

    models = sorted({r["model"] for r in rows})
    tasks = [t for t in TASKS if any(r["task"] == t for r in rows)]
    fig, ax = plt.subplots(figsize=(1.0 + 0.9 * len(tasks), 3.0))
    width = 0.8 / len(models)
    for k, m in enumerate(models):
        vals = {r["task"]: 100 * r["agreement"] for r in rows if r["model"] == m}
        ax.bar([i + k * width for i in range(len(tasks))], [vals.get(t, 0.0) for t in tasks], width, label=m)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(tasks))], tasks, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("judges agree (%) \u2191")
    ax.set_ylim(0, 102)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out / f"{name}.png")


def mode_curves(accuracy: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """Image against description mode: accuracy tables of runs in both modes (concatenated), a panel
    per task, a line per (model, mode). Nothing when only one mode is present."""
    if len({r["mode"] for r in accuracy}) < 2:
        return []
    merged = [{**r, "model": f"{r['model']} ({r['mode']})", "mode": "both"} for r in accuracy]
    paths = shot_curves(merged, out)
    return paths
