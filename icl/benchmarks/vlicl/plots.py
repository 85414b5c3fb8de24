"""VL-ICL figures: accuracy against shots per task (seed std as error bars), and ICL efficiency
against zero-shot accuracy with the ``zero-shot + efficiency = 100`` front (source, Fig. 14)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from icl.benchmarks.vlicl.summary import SETTING
from icl.benchmarks.vlicl.tasks import I2T, T2I, TASKS


def _label(setting: tuple[Any, ...]) -> str:
    defaults = {"prompt": "chat", "repeat": 1}  # the default setting keeps its historical names
    return "_".join(str(s).replace(":", "-") for c, s in zip(SETTING, setting) if defaults.get(c, object()) != s)


def shot_curves(accuracy: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """One figure per setting: a panel per task, a line per model, error bars = seed std."""
    from icl.report.plots import shot_curve_panels

    by_setting: dict[tuple, dict[str, dict[str, list[Mapping[str, Any]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in accuracy:
        by_setting[tuple(r.get(c) for c in SETTING)][r["task"]][r["model"]].append(r)
    titles = {t: TASKS[t].title for t in TASKS}
    return [p for setting, tasks in sorted(by_setting.items(), key=lambda kv: _label(kv[0]))
            for p in shot_curve_panels({t: tasks[t] for t in [*[t for t in TASKS if t in tasks],
                                                              *sorted(t for t in tasks if t not in TASKS)]},
                                       out / f"vlicl_shots_{_label(setting)}.png", "accuracy", std="std",
                                       titles=titles)]


def efficiency_front(summary: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """Efficiency vs zero-shot per direction, one point per (model, task), with the ZS + Eff = 100 front."""
    from icl.report.plots import figures as plt  # Figure objects, never pyplot state
    from icl.report.plots import save_figure

    by_setting: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in summary:
        by_setting[tuple(r.get(c) for c in SETTING)].append(r)
    paths = []
    markers = "os^Dv<>pP*"
    for setting, rs in sorted(by_setting.items(), key=lambda kv: _label(kv[0])):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), squeeze=False)
        models = sorted({r["model"] for r in rs})
        for ax, direction in zip(axes.flat, (I2T, T2I)):
            ax.plot([0, 100], [100, 0], "k--", lw=1, label="ZS + Eff = 100")
            tasks = [t for t in TASKS if TASKS[t].direction == direction]
            for r in rs:
                if r["direction"] != direction:
                    continue
                ax.scatter(r["zero_shot"], r["efficiency"], marker=markers[tasks.index(r["task"]) % len(markers)],
                           color=f"C{models.index(r['model']) % 10}",
                           label=f"{r['model']} / {r['task']}")
            ax.set_title(f"{direction}: ICL efficiency vs zero-shot", fontsize=9)
            ax.set_xlabel("zero-shot accuracy (%) \u2191")
            ax.set_ylabel("ICL efficiency (%) \u2191")
            ax.set_xlim(-2, 102)
            ax.axhline(0, color="grey", lw=0.5)
            ax.legend(fontsize=6)
        fig.subplots_adjust(left=0.07, right=0.98, top=0.92, bottom=0.12, wspace=0.25)
        paths += save_figure(fig, out / f"vlicl_efficiency_{_label(setting)}.png")
    return paths
