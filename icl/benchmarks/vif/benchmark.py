"""The VIF-Bench plugin (``vif``, protocol ``vif-1``; PROTOCOL §5, docs/vif.md).

Items are (task, variant): ``visual`` (references, then the rendered VI images, then the
instruction) for every task, and ``ti-dense`` / ``ti-medium`` / ``ti-sparse`` (references, then
the instruction and the VIs as text) for the tasks of the text subset. Requests are
:class:`GenerationRequest` s of ``size`` x ``size`` (1024 in the source). The judge gets one
:class:`ChatRequest` per answer with the original visual task (also for the text variants) and the
rubric (:mod:`~icl.benchmarks.vif.rubric`). Data: a release folder in schema ``vif-task-1`` under
``<data root>`` or ``<data root>/vif``, or the built-in synthetic tasks (always with ``--fast``).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from icl.benchmarks.base import Benchmark, Item, Option, comma_list, flag, judge_names
from icl.benchmarks.vif import rubric, tables
from icl.benchmarks.vif.models import SYNTHETIC_PREFIX
from icl.benchmarks.vif.render import vi_images
from icl.benchmarks.vif.schema import SCHEMA, Task, load_release, read_image, record
from icl.benchmarks.vif.spatial import placement
from icl.benchmarks.vif.synthetic import SyntheticImages
from icl.benchmarks.vif.texts import ti_text
from icl.data.images import max_pixels_default
from icl.data.release import NotPublished
from icl.data.seeds import derive_seed
from icl.models.requests import ChatRequest, GenerationRequest
from icl.report.schema import Metric, ResultsSpec

if TYPE_CHECKING:
    from icl.helpers import Job  # plots hands figures to the figure helpers

VARIANTS = ("visual", "ti-dense", "ti-medium", "ti-sparse")
# what a task without a generated image scores: "skip" (the reference, shim0114/VIF-Bench judge.py
# judges only tasks with an image) or "score1" (1 on every criterion, in every mean)
FAILED = ("skip", "score1")
SPATIAL_JUDGE = "vif-spatial-judge"
# the fast run's second judge: hf-vlm on a built-in tiny random LLaVA (icl.models.vlm.tiny); its
# answers hold no score (unparsed, NaN per criterion), it exercises the chat judge's JSON path
TINY_CHAT_JUDGE = "tiny-chat-judge"


class ReleaseImages:
    """A release folder: ``tasks.jsonl`` and the files its records name (:func:`load_release`)."""

    origin = "release"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.tasks = load_release(self.root)
        self._digest = hashlib.sha256((self.root / "tasks.jsonl").read_bytes()).hexdigest()

    def reference(self, task: Task, index: int) -> np.ndarray:
        return read_image(self.root, task.references[index].file, task.id, f"references[{index}].file")

    def pose(self, task: Task, index: int) -> np.ndarray:
        return read_image(self.root, task.poses[index].file, task.id, f"poses[{index}].file")

    def describe(self) -> str:
        return f"release {self.root} (tasks.jsonl sha256 {self._digest[:16]}, {len(self.tasks)} tasks)"

    def digest(self) -> Optional[str]:
        return self._digest


class VIF(Benchmark):
    """VIF-Bench: multi-reference generation under visual instructions, judged on six criteria."""

    name = "vif"
    protocol = "vif-1"
    # 2: the source's hard caps (vif-rubric-2); failed generations per --failed; 3: every cap and
    # calibration scale of the source's prompt (vif-rubric-3)
    scorer_version = "3"
    request_types = (GenerationRequest,)
    # results.csv: judge scores per variant over the judge-averaged items (tables.judged_items);
    # NaN (a criterion the judge left out) is skipped as in the benchmark's own means
    results_spec = ResultsSpec(task=None, subset=("variant",), shots=None, metrics=tuple(
        Metric(m, unit="score 1-10", skip_nan=True) for m in tables.SCORES))
    default_models = ("collage",)
    # on the Hub, but not as a dataset icl reads yet (docs/vif.md): not fetched
    releases = {"vif": NotPublished(
        "VIF-Bench is on the Hub (shim0114/VIF-Bench) with pre-rendered images whose layout files icl has no "
        "converter for yet (docs/vif.md); not fetched")}
    default_judge = SPATIAL_JUDGE
    max_judges = None  # PROTOCOL §5: two judges score independently, the headline is their mean
    thread_safe_scoring = True
    options = (
        Option("variants", VARIANTS, "visual and/or text variants (comma list)", comma_list),
        Option("size", 1024, "output side in pixels (the source forces 1024 x 1024; at most the image cap, "
               "40 MP: 6324)", int),
        Option("vi_size", 512, "side of the rendered VI images (at most the image cap, like size)", int),
        Option("synthetic", False, "run the built-in synthetic tasks (always with --fast)", flag),
        Option("synthetic_tasks", 16, "how many synthetic tasks", int),
        Option("tasks", (), "task ids to run (comma list; default all)", comma_list),
        Option("judge_tokens", 512, "new tokens of a judge answer", int),
        Option("human_scores", "", "CSV of human scores (model, key, criteria): judge PLCC/SRCC", str),
        Option("seed", 0, "global seed of the generation requests", int),
        Option("failed", "skip", "a task without a generated image: skip (left out of the means and counted, as "
               "the source's judge.py does) or score1 (1 on every criterion, kept in the means)", str, FAILED),
    )

    @classmethod
    def fast_config(cls) -> dict[str, Any]:
        return {"fast": True, "synthetic_tasks": 6, "size": 192, "vi_size": 128}

    @property
    def default_judges(self) -> tuple[str, ...]:
        """The spatial judge; with ``--fast`` also the tiny random chat judge (the JSON path)."""
        return (SPATIAL_JUDGE, TINY_CHAT_JUDGE) if self.fast else (SPATIAL_JUDGE,)

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(config)
        c = self.config
        c["variants"], c["tasks"] = tuple(c["variants"]), tuple(c["tasks"])
        bad = [v for v in c["variants"] if v not in VARIANTS]
        if bad:
            raise ValueError(f"vif: unknown variant {bad[0]!r}; variants: {', '.join(VARIANTS)}")
        for k, lo in (("size", 16), ("vi_size", 16), ("synthetic_tasks", 1), ("judge_tokens", 1)):
            if c[k] < lo:
                raise ValueError(f"vif: {k} must be >= {lo}, got {c[k]}")
        cap = max_pixels_default()  # the image inputs' cap (icl.data.images): outputs get the same
        for k in ("size", "vi_size"):
            if c[k] * c[k] > cap:
                raise ValueError(f"vif: {k} {c[k]} asks for {c[k] * c[k]:,} pixels per image, over the image cap of "
                                 f"{cap:,} that image inputs have (icl.data.images; ICL_MAX_IMAGE_PIXELS raises it): "
                                 f"at most {math.isqrt(cap)}")
        self._data: Optional[SyntheticImages | ReleaseImages] = None

    @property
    def data(self) -> SyntheticImages | ReleaseImages:
        if self._data is None:
            if self.fast or self.config["synthetic"]:
                self._data = SyntheticImages(self.config["synthetic_tasks"])
            else:
                from icl.data.registry import data_root

                root = data_root(self.data_root)
                self._data = ReleaseImages(root if (root / "tasks.jsonl").is_file() else root / "vif")
        return self._data

    def _tasks(self) -> list[Task]:
        wanted = self.config["tasks"]
        tasks = self.data.tasks
        if wanted:
            known = {t.id for t in tasks}
            missing = [t for t in wanted if t not in known]
            if missing:
                raise ValueError(f"vif: no task {missing[0]!r} in {self.data.describe()}")
            tasks = [t for t in tasks if t.id in wanted]
        return tasks

    # -- plan ---------------------------------------------------------------------------------
    def items(self) -> Iterable[Item]:
        out = []
        for task in self._tasks():
            for variant in self.config["variants"]:
                if variant != "visual" and not task.text_subset:
                    continue
                group = {"task": task.id, "variant": variant, "refs": len(task.references), "vis": task.n_vis,
                         "vi_types": "+".join(task.vi_types),
                         "conflicts": "+".join(k for k in sorted(task.conflicts) if task.conflicts[k]) or "none"}
                out.append(Item(f"{self.data.origin}/{variant}/{task.id}", group, task))
        return out

    def item_kind(self, item: Item) -> str:
        return str(item.group["variant"])

    def data_origin(self) -> dict[str, str]:
        return {"vif": self.data.describe()}

    def describe(self) -> dict[str, Any]:
        where = "built-in synthetic" if (self.fast or self.config["synthetic"]) else (
            "release under --data-root/vif" if self.data_root else "none given: --data-root DIR (DIR/vif/tasks.jsonl), or --fast")
        return {"data": [where], "variants": list(VARIANTS), "schema": [SCHEMA], "rubric": [rubric.RUBRIC_VERSION],
                "criteria": list(rubric.CRITERIA)}

    def check_judge(self, judges: Any, asked: Optional[Sequence[type]] = None) -> None:
        """Any number of judges (the source's headline averages two); the spatial judge only on
        the synthetic tasks."""
        super().check_judge(judges, asked)
        if SPATIAL_JUDGE in judge_names(judges) and not (self.fast or self.config["synthetic"]):
            raise ValueError("vif: vif-spatial-judge judges only the built-in synthetic tasks; judge release data "
                             "with a vision-language model (--judge hf-vlm:... or openai:...)")

    # -- requests -------------------------------------------------------------------------------
    def _references(self, task: Task) -> list[np.ndarray]:
        return [self.data.reference(task, i) for i in range(len(task.references))]

    def _vis(self, task: Task) -> list[tuple[str, np.ndarray]]:
        return vi_images(task, self.config["vi_size"], lambda i: self.data.pose(task, i))

    def request(self, item: Item, privileged: bool = False) -> GenerationRequest:
        task: Task = item.payload
        variant = item.group["variant"]
        refs = self._references(task)
        parts: list[Any] = []
        for i, img in enumerate(refs):
            parts += [f"Image {i}:", img]
        if variant == "visual":
            for j, (_, img) in enumerate(self._vis(task)):
                parts += [f"Image {len(refs) + j}:", img]
            parts.append(task.instruction)
        else:
            parts.append(f"{task.instruction} {ti_text(task, variant[3:])}")
        seed = derive_seed(self.config["seed"], "vif", "*", item.key, "vif/request")
        size = self.config["size"]
        return GenerationRequest(item.key, tuple(parts), (size, size), seed)

    def judge_requests(self, item: Item, response: Any) -> Sequence[Any]:
        if not _is_image(response):
            return ()
        task: Task = item.payload
        refs = [(f"reference: {r.role}, {r.type}", img) for r, img in zip(task.references, self._references(task))]
        vis = [(f"visual instruction: {t}", img) for t, img in self._vis(task)]
        prefix = SYNTHETIC_PREFIX if self.data.origin == "synthetic" else "vif/"
        return [ChatRequest.user(f"{prefix}{item.key}", *rubric.judge_prompt(refs, vis, task.instruction, response),
                                 max_new_tokens=self.config["judge_tokens"])]

    # -- scores ---------------------------------------------------------------------------------
    def score(self, item: Item, response: Any, judgements: Sequence[str] = ()) -> dict[str, float]:
        task: Task = item.payload
        if not _is_image(response):
            return _failed(self.config["failed"])
        verdict = rubric.parse(judgements[0]) if judgements else None
        out = {c: (verdict.scores[c] if verdict else math.nan) for c in rubric.CRITERIA}
        out.update(average=verdict.average if verdict else math.nan, failed=0.0,
                   judge_parsed=float(bool(verdict and verdict.parsed)),
                   judge_repaired=float(bool(verdict and verdict.repaired)),
                   judge_invalid=float(verdict.invalid if verdict else len(rubric.CRITERIA)),
                   judge_capped=float(verdict.capped if verdict else 0))
        if self.data.origin == "synthetic":  # colours are known only for the synthetic references
            p = placement(response, self._references(task), {b.ref: b.box for b in task.layout})
            out.update(layout_iou=p.iou, centre_in_region=p.centre_in)
        else:
            out.update(layout_iou=math.nan, centre_in_region=math.nan)
        return out

    def score_failure(self, item: Item, reason: str) -> Optional[dict[str, float]]:
        return _failed(self.config["failed"])

    # -- tables, figures, report ----------------------------------------------------------------
    def summarise(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        return tables.summarise(rows, self.config["human_scores"])

    def result_rows(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """One row per (model, item): scores averaged over the model's judges (the headline's items)."""
        return [{**r, "status": "failed" if r.get("failed", 0) > 0 else "ok"} for r in tables.judged_items(rows)]

    def plots(self, tables_: Mapping[str, list[dict[str, Any]]], out: Path,
              answers: Optional[Callable[[str], dict[str, Any]]] = None) -> list[Path | Job]:
        from icl import helpers

        out.mkdir(parents=True, exist_ok=True)
        return [helpers.submit("figures", tables.plots, dict(tables_), out)]  # drawn in a helper, collected by the runner

    def summary(self, tables_: Mapping[str, list[dict[str, Any]]]) -> str:
        rows = tables_.get("criteria", [])
        if not rows:
            return ""
        judges = sorted({r["judge"] for r in tables_.get("criteria_by_judge", [])})
        lines = [f"vif ({self.protocol}): judge scores 1-10, the mean of {len(judges)} judge(s) ({', '.join(judges)}) "
                 "per item and criterion (avg: the mean of all six criteria, not available while some criterion has no "
                 "judge: the row then says how many were judged; failed generations: "
                 + ("score 1, in the means)" if self.config["failed"] == "score1" else "left out of the means)")]
        from icl.report.tables import aligned

        lines += aligned([[r["model"], r["variant"], f"avg {_average_text(r)}",
                           f"adherence {_fmt(r['visual_instruction_adherence'])}",
                           f"cleanliness {_fmt(r['visual_instruction_cleanliness'])}", f"(n={r['n']}, failed {r['failed']})"]
                          for r in rows])
        return "\n".join(lines)

    def report(self, tables_: Mapping[str, list[dict[str, Any]]]) -> str:
        short = ("TIF", "RC", "VIA", "VIC", "SC", "VQ", "avg")
        judges = ", ".join(f"`{j}`" for j in dict.fromkeys(r["judge"] for r in tables_.get("criteria_by_judge", []))) \
            or "none"
        lines = ["## VIF-Bench", "", f"Protocol {self.protocol}, rubric {rubric.RUBRIC_VERSION}, data: "
                 f"{self.data.describe()}. Criteria 1-10 (TIF text instruction following, RC reference consistency, "
                 "VIA visual instruction adherence, VIC visual instruction cleanliness, SC scene coherence, VQ visual "
                 f"quality); NaN where the judge gave none. {failed_note(self.config['failed'])} The "
                 f"headline averages the judges per item and criterion; judges: {judges} (`--judge` repeated for "
                 "several).", ""]
        if TINY_CHAT_JUDGE in judges:
            lines += [f"`{TINY_CHAT_JUDGE}` is not a real judge: `hf-vlm` on a tiny LLaVA with random weights, built by "
                      "icl, that exercises the chat judge's JSON path (rubric request, stored raw answer, parsing). Its "
                      "answers hold no score: unparsed, NaN on every criterion and counted as `unparsed`, so each "
                      "headline criterion is the other judges' alone.", ""]
        lines += _md(tables_.get("criteria", []), ("model", "variant", "n", "failed"), tables.SCORES, short,
                     extra=("average_lo", "average_hi"))
        for name, keys, title in (("by_vi_type", ("model", "vi_type", "n"), "By VI type (visual variant)"),
                                  ("by_refs", ("model", "refs", "n"), "By number of references"),
                                  ("by_vis", ("model", "vis", "n"), "By number of VIs"),
                                  ("conflict", ("model", "vi_type", "conflict", "n"), "Conflict vs no conflict"),
                                  ("variants", ("model", "variant", "n"), "Visual vs text variants (text subset)"),
                                  ("criteria_by_judge", ("model", "judge", "variant", "n", "unparsed"), "Per judge")):
            if tables_.get(name):
                lines += ["", f"{title}:", ""] + _md(tables_[name], keys, tables.SCORES, short,
                                                     extra=("average_lo", "average_hi"))
        sp = tables_.get("spatial", [])
        if sp:
            lines += ["", "Spatial (synthetic tasks; release data needs a detector, not built): ", "",
                      "| model | variant | measured | layout IoU | centre in region |", "|---|---|---|---|---|"]
            lines += [f"| {r['model']} | {r['variant']} | {r['measured']} | {r['layout_iou']:.3f} | "
                      f"{r['centre_in_region']:.3f} |" for r in sp]
        rel = tables_.get("reliability", [])
        if rel:
            lines += ["", "Judge reliability (PLCC / SRCC):", "", "| a | b | criterion | n | PLCC | SRCC |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {r['a']} | {r['b']} | {r['criterion']} | {r['n']} | {_fmt(r['plcc'], 3)} | {_fmt(r['srcc'], 3)} |"
                      for r in rel]
        lines.append("")
        return "\n".join(lines)

    # -- reproducibility ------------------------------------------------------------------------
    def _records(self) -> str:
        return "".join(json.dumps(record(t), sort_keys=True) + "\n" for t in self._tasks())

    def write_artifacts(self, out: Path) -> dict[str, str]:
        text = self._records()
        (out / "vif_tasks.jsonl").write_text(text, encoding="utf-8")
        return {"vif_tasks.jsonl": hashlib.sha256(text.encode()).hexdigest()}

    def verdict(self, metrics: Mapping[str, float]) -> Optional[str]:
        """The six scores by short name (``adherence 3``; ``-`` where the judge gave none), and
        how many a cap lowered (``metrics`` as samples.jsonl holds them: NaN written as null)."""
        if metrics.get("failed") or not all(c in metrics for c in rubric.CRITERIA):
            return None
        def shown(v: Any) -> str:  # samples.jsonl writes NaN as null
            return "-" if v is None or math.isnan(float(v)) else format(float(v), "g")

        scores = ", ".join(f"{short} {shown(metrics[c])}" for short, c in zip(_SHORT, rubric.CRITERIA))
        capped = int(metrics.get("judge_capped") or 0)
        return scores + (f" ({capped} lowered by a cap)" if capped else "")

    def fingerprints(self) -> dict[str, str]:
        return {"vif/tasks": hashlib.sha256(self._records().encode()).hexdigest(),
                "vif/rubric": hashlib.sha256((rubric.HEADER + rubric.CRITERIA_TEXT).encode()).hexdigest()}


# the criteria as the gallery names them (rubric.CRITERIA order)
_SHORT = ("text", "reference", "adherence", "cleanliness", "scene", "quality")


def _failed(mode: str) -> dict[str, float]:
    """A failed generation (a refused one is not applicable, never scored: icl.run.execution.engine): with
    ``skip`` NaN on every score (means skip NaN, so it is left out of them, as the source leaves
    out tasks without an image); with
    ``score1`` 1 on every criterion (and 0 on the spatial measures), kept in the means."""
    v, spatial = (1.0, 0.0) if mode == "score1" else (math.nan, math.nan)
    out = {c: v for c in rubric.CRITERIA}
    out.update(average=v, failed=1.0, judge_parsed=0.0, judge_repaired=0.0, judge_invalid=0.0, judge_capped=0.0,
               layout_iou=spatial, centre_in_region=spatial)
    return out


def failed_note(mode: str) -> str:
    """The sentence report.md and the terminal summary give about failed generations."""
    if mode == "score1":
        return ("A failed generation scores 1 on every criterion and stays in the means (--failed score1, not the "
                "source's rule).")
    return ("A failed generation is left out of the means and counted under `failed` (--failed skip, the "
            "source's rule: its judge.py judges only tasks with an image).")


def _is_image(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim == 3 and x.shape[2] == 3 and x.dtype == np.uint8 and x.size > 0


def _average_text(row: Mapping[str, Any]) -> str:
    """The summary's average: the number, or what its absence means (the criteria some judge gave)."""
    value = row.get("average")
    if value is not None and not (isinstance(value, float) and math.isnan(value)):
        return _fmt(value)
    judged = sum(1 for c in rubric.CRITERIA if isinstance(row.get(c), (int, float)) and not math.isnan(row[c]))
    return f"n/a ({judged} of {len(rubric.CRITERIA)} criteria judged)"


def _fmt(v: Any, digits: int = 2) -> str:
    return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{float(v):.{digits}f}"


def _md(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], scores: Sequence[str], short: Sequence[str],
        extra: Sequence[str] = ()) -> list[str]:
    head = [*keys, *short, *(["avg 95% CI"] if extra else [])]
    out = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in rows:
        cells = [str(r[k]) for k in keys] + [_fmt(r[s]) for s in scores]
        if extra:
            cells.append(f"[{_fmt(r[extra[0]])}, {_fmt(r[extra[1]])}]")
        out.append("| " + " | ".join(cells) + " |")
    return out
